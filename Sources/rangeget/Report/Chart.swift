// Chart: the SVG drawing the report pages share (`rangeget report` and
// `bench --report`): the page's frame and style, a plot area that maps
// values to coordinates, its axes and grid, lines, and legends. One piece of
// code draws every axis and line, so both pages read the same way.

/// The HTML around a page's sections: inline style, no script, nothing loaded.
enum PageShell {
    /// The SVGs' width, and where their plots start and end: the timeline's
    /// lane labels take the left, and the charts share its x axis.
    static let width = 1200.0
    static let plotLeft = 230.0
    static let plotRight = 1180.0

    /// A whole page: `title` (escaped) in the tab, `header` and `body` as given (already escaped).
    static func document(title: String, header: String, body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8"/>
        <meta name="viewport" content="width=device-width, initial-scale=1"/>
        <title>\(HTMLText.escaped(title))</title>
        <style>\(style)</style>
        </head>
        <body>
        <header>
        \(header)</header>
        \(body)</body>
        </html>

        """
    }

    private static let style = """
        body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2230;background:#fff;\
        max-width:1240px;margin:24px auto;padding:0 16px}
        h1{font-size:21px;margin:0 0 2px}
        h2{font-size:18px;margin:30px 0 4px;padding-top:16px;border-top:1px solid #d8dce6;word-break:break-all}
        h3{font-size:12px;margin:22px 0 6px;color:#59607a;text-transform:uppercase;letter-spacing:.06em}
        .source{color:#59607a;margin:0}
        code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;word-break:break-all}
        .facts{display:flex;flex-wrap:wrap;gap:6px 32px;margin:10px 0}
        .facts dt{font-size:11px;color:#6b7186;text-transform:uppercase;letter-spacing:.05em}
        .facts dd{margin:0;font-size:17px;font-variant-numeric:tabular-nums}
        table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:4px 0}
        th{font-size:11px;color:#6b7186;text-transform:uppercase;letter-spacing:.05em;font-weight:600}
        th,td{padding:4px 12px 4px 0;text-align:left;border-bottom:1px solid #eceef3;vertical-align:top}
        td.number,th.number{text-align:right}
        td.url{word-break:break-all;max-width:640px}
        .swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin-right:6px}
        .legend{display:flex;flex-wrap:wrap;gap:4px 18px;font-size:12px;color:#3c4257;margin:6px 0}
        .legend svg{display:inline-block;vertical-align:-3px;margin-right:4px}
        svg{display:block;max-width:100%;height:auto}
        svg text{font:11px system-ui,sans-serif;fill:#3c4257}
        svg .axis-title{font-size:12px;fill:#59607a}
        svg .grid{stroke:#e6e8ee;stroke-width:1}
        svg .axis{stroke:#9aa0b4;stroke-width:1}
        svg .stripe{fill:#f6f7fa}
        .note{background:#fff7e0;border-left:3px solid #e0a800;padding:6px 10px;margin:8px 0}
        .warning{background:#fde8e8;border-left:3px solid #d62728;padding:6px 10px;margin:8px 0}
        .verdict{background:#e8f4ea;border-left:3px solid #59a14f;padding:6px 10px;margin:8px 0}
        .empty{color:#59607a;font-style:italic}
        """

    /// `3 transfers`, `1 transfer`.
    static func count(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }

    /// Figures in a row: each label over its value (both already escaped).
    static func facts(_ items: [(String, String)]) -> String {
        "<dl class=\"facts\">" + items.map { "<div><dt>\($0.0)</dt><dd>\($0.1)</dd></div>" }.joined() + "</dl>\n"
    }

    /// A row of color swatches and their labels (labels already escaped).
    static func legend(_ items: [(color: String, label: String)]) -> String {
        var html = "<div class=\"legend\">"
        for item in items {
            html += "<span><span class=\"swatch\" style=\"background:\(item.color)\"></span>\(item.label)</span>"
        }
        return html + "</div>\n"
    }
}

/// A chart's plot area: values from `xLower` to `xUpper` across it, from 0
/// to `yUpper` up it, between `top` and `bottom` in the SVG.
struct ChartFrame {
    var xLower: Double
    var xUpper: Double
    var yUpper: Double
    var top: Double
    var bottom: Double
    var left = PageShell.plotLeft
    var right = PageShell.plotRight

    init(x xLower: Double, to xUpper: Double, yUpper: Double = 1, top: Double, bottom: Double) {
        self.xLower = xLower
        self.xUpper = max(xUpper, xLower + 1e-9)
        self.yUpper = yUpper > 0 && yUpper.isFinite ? yUpper : 1
        self.top = top
        self.bottom = bottom
    }

    func x(_ value: Double) -> Double { left + (value - xLower) / (xUpper - xLower) * (right - left) }
    func y(_ value: Double) -> Double { bottom - value / yUpper * (bottom - top) }

    /// The opening `<svg>` of a chart `height` high, its class and accessible label.
    static func open(_ kind: String, height: Double, label: String) -> String {
        let (width, high) = (Int(PageShell.width), Int(height.rounded(.up)))
        return "<svg class=\"\(kind)\" viewBox=\"0 0 \(width) \(high)\" width=\"\(width)\" height=\"\(high)\" "
            + "role=\"img\" aria-label=\"\(label)\">\n"
    }

    /// A y axis from 0 at round values: the frame with its ceiling at the
    /// highest tick (or `highest`, if above), and the ticks and their step.
    func withValueTicks(highest: Double, count: Int = 5) -> (frame: ChartFrame, values: [Double], step: Double) {
        let (values, step) = AxisTicks.between(0, max(highest, 1e-9), count: count)
        var frame = self
        frame.yUpper = max(values.last ?? 1, highest, 1e-9)
        return (frame, values, step)
    }

    /// A line of `kind` (`grid`, `axis`) from (`x1`, `y1`) to (`x2`, `y2`) in the SVG.
    static func segment(_ kind: String, _ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double) -> String {
        "<line class=\"\(kind)\" x1=\"\(Figure.coordinate(x1))\" y1=\"\(Figure.coordinate(y1))\" "
            + "x2=\"\(Figure.coordinate(x2))\" y2=\"\(Figure.coordinate(y2))\"></line>"
    }

    /// `text` (already escaped) at (`x`, `y`) in the SVG, anchored `anchor`, with its extra `attributes`.
    static func label(_ text: String, x: Double, y: Double, anchor: String, attributes: String = "") -> String {
        "<text \(attributes)x=\"\(Figure.coordinate(x))\" y=\"\(Figure.coordinate(y))\" "
            + "text-anchor=\"\(anchor)\">\(text)</text>\n"
    }

    /// Horizontal grid lines at `values`, their labels left of the plot, the
    /// y axis, and its `title` turned up it.
    func valueAxis(_ values: [Double], step: Double, title: String) -> String {
        var svg = ""
        for value in values {
            svg += Self.segment("grid", left, y(value), right, y(value))
            svg += Self.label(Figure.tick(value, step: step), x: left - 8, y: y(value) + 4, anchor: "end")
        }
        svg += Self.segment("axis", left, top, left, bottom) + "\n"
        svg += "<text class=\"axis-title\" transform=\"translate(\(left - 52),\((top + bottom) / 2)) rotate(-90)\" "
        svg += "text-anchor=\"middle\">\(title)</text>\n"
        return svg
    }

    /// Vertical grid lines at the x values `values`, from `top` to `bottom`.
    func verticalGrid(_ values: [Double]) -> String {
        values.map { Self.segment("grid", x($0), top, x($0), bottom) + "\n" }.joined()
    }

    /// The x axis along `bottom`: ticks at `ticks` (x values and labels) and `title` under them.
    func bottomAxis(_ ticks: [(value: Double, label: String)], title: String) -> String {
        var svg = Self.segment("axis", left, bottom, right, bottom) + "\n"
        for tick in ticks {
            svg += Self.segment("axis", x(tick.value), bottom, x(tick.value), bottom + 4)
            svg += Self.label(tick.label, x: x(tick.value), y: bottom + 16, anchor: "middle")
        }
        return svg
            + Self.label(
                title, x: (left + right) / 2, y: bottom + 33, anchor: "middle", attributes: "class=\"axis-title\" ")
    }

    /// Round ticks across the x range, with their labels.
    func xTicks(count: Int, scale: Double = 1) -> [(value: Double, label: String)] {
        let (values, step) = AxisTicks.between(xLower / scale, xUpper / scale, count: count)
        return values.map { ($0 * scale, Figure.tick($0, step: step)) }
    }

    /// A line through `points` (x and y values): `attributes` (class and
    /// data attributes, already escaped) and `title` (escaped) as its tooltip.
    func line(
        _ points: [(x: Double, y: Double)], attributes: String, color: String, width: Double, dashed: Bool = false,
        title: String
    ) -> String {
        let coordinates = points.map { Figure.coordinate(x($0.x)) + "," + Figure.coordinate(y($0.y)) }
        var svg = "<polyline \(attributes) fill=\"none\" stroke=\"\(color)\" stroke-width=\"\(width)\" "
        if dashed { svg += "stroke-dasharray=\"6 4\" " }
        svg += "stroke-linejoin=\"round\" points=\"" + coordinates.joined(separator: " ")
        return svg + "\"><title>\(title)</title></polyline>\n"
    }
}
