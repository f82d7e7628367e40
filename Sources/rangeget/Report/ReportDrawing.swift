// The small pieces the report's page is drawn with: text made safe for
// HTML (the trace's text is untrusted), numbers for SVG attributes and
// labels, axis ticks at round values, the mirrors' colors.

/// Text from the trace, made safe to put in the page.
enum HTMLText {
    /// The most characters of one piece of trace text the page shows.
    static let longest = 300

    /// `text` escaped for HTML and XML, in element text and quoted
    /// attributes alike: `& < > " '` as entities, and the characters that
    /// are not allowed in XML or that would reorder the text around them
    /// (C0 and C1 controls but tab and line breaks, bidi controls,
    /// noncharacters) as U+FFFD. Cut to `longest` characters.
    static func escaped(_ text: String) -> String {
        let shown = text.count > longest ? text.prefix(longest) + "..." : Substring(text)
        var out = ""
        out.reserveCapacity(shown.utf8.count)
        for scalar in shown.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\t", "\n": out.unicodeScalars.append(scalar)
            case _ where isUnsafe(scalar): out += "\u{FFFD}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0xFFFE, 0xFFFF: true
        default: false
        }
    }
}

/// Numbers as the page writes them.
enum Figure {
    /// `value` with `places` decimals (0 to 6), without a formatter: `12.50`.
    static func fixed(_ value: Double, _ places: Int) -> String {
        guard value.isFinite else { return "0" }
        let places = min(6, max(0, places))
        let scale = (0..<places).reduce(1.0) { value, _ in value * 10 }
        guard abs(value) * scale < 9e15 else { return String(Int64(saturating: value)) }
        let units = Int64((abs(value) * scale).rounded())
        let sign = value < 0 && units > 0 ? "-" : ""
        guard places > 0 else { return sign + String(units) }
        let whole = units / Int64(scale)
        let fraction = String(units % Int64(scale))
        return sign + "\(whole)." + String(repeating: "0", count: places - fraction.count) + fraction
    }

    /// An SVG coordinate: one decimal.
    static func coordinate(_ value: Double) -> String { fixed(value, 1) }

    /// A tick's label: as many decimals as `step` needs.
    static func tick(_ value: Double, step: Double) -> String {
        let places = step >= 1 ? 0 : step >= 0.1 ? 1 : step >= 0.01 ? 2 : 3
        return fixed(value, places)
    }

    /// `1.25 s`, `340 ms`.
    static func seconds(_ value: Double) -> String {
        value >= 1 ? fixed(value, 2) + " s" : fixed(value * 1000, value >= 0.01 ? 0 : 1) + " ms"
    }

    /// `12.5 MiB/s`.
    static func rate(_ bytesPerSecond: Double) -> String {
        ByteCount.format(Int64(saturating: bytesPerSecond)) + "/s"
    }
}

/// The values an axis is marked at.
enum AxisTicks {
    /// Round values (1, 2 or 5 times a power of ten) from `lower` to
    /// `upper`, about `count` of them, and the step between them.
    static func between(_ lower: Double, _ upper: Double, count: Int = 6) -> (values: [Double], step: Double) {
        guard lower.isFinite, upper.isFinite, upper > lower else { return ([lower.isFinite ? lower : 0], 1) }
        let rough = (upper - lower) / Double(max(1, count))
        var magnitude = 1.0
        while magnitude * 10 <= rough { magnitude *= 10 }
        while magnitude > rough { magnitude /= 10 }
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= rough } ?? magnitude * 10
        var values: [Double] = []
        var value = (lower / step).rounded(.up) * step
        while value <= upper + step * 1e-9, values.count < 100 {
            values.append(value)
            value += step
        }
        return (values, step)
    }
}

/// The mirrors' colors: a palette told apart in print and by most color-blind readers.
enum MirrorColor {
    static let palette = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#79706e"
    ]
    /// Transfers that name no mirror.
    static let unknown = "#bbbbbb"

    static func of(_ index: Int?) -> String {
        guard let index, index >= 0 else { return unknown }
        return palette[index % palette.count]
    }
}
