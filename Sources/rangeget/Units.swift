import FoundationEssentials

// Sizes, rates and durations as people write and read them: `10M`, `1.5G`,
// `45.2 MiB`, `1:05`. K, M, G and T are binary (1024-based), as in curl.
// Every formatter takes any value, up to Int64.max bytes and infinite or NaN
// seconds (a server may claim 8 EiB, a rate may be 0), and never traps.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum ByteCount {
    /// Parses `1234`, `10K`, `1.5G`, `20MiB`, `3m`; nil for anything else.
    static func parse(_ text: String) -> Int64? {
        var digits = Substring(text.filter { $0 != " " && $0 != "\t" })
        var multiplier: Double = 1
        for suffix in ["ib", "b"] where digits.lowercased().hasSuffix(suffix) && digits.count > suffix.count {
            let stripped = digits.dropLast(suffix.count)
            if suffix == "b" || stripped.last.map({ "kmgt".contains($0.lowercased()) }) == true {
                digits = stripped
                break
            }
        }
        if let last = digits.last, let power = ["k": 1, "m": 2, "g": 3, "t": 4][last.lowercased()] {
            multiplier = pow1024(power)
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isNumber || $0 == "." }),
            let value = Double(digits), value >= 0
        else { return nil }
        let bytes = value * multiplier
        guard bytes < 9.2e18 else { return nil }
        return Int64(bytes.rounded())
    }

    /// `512 B`, `45.2 MiB`, `1.50 GiB`, up to `8.0 EiB` (Int64.max).
    static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        return value >= 100 ? "\(Int(value.rounded())) \(units[unit])" : String(format1: value) + " " + units[unit]
    }

    private static func pow1024(_ power: Int) -> Double {
        (0..<power).reduce(1.0) { value, _ in value * 1024 }
    }
}

enum DurationText {
    /// The longest duration shown in full: 100 days; an ETA beyond it says only that.
    static let longest = 100.0 * 86_400

    /// `0:07`, `12:34`, `1:02:03`; `> 100 days` beyond that, `--:--` when unknown.
    static func format(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0 else { return "--:--" }
        guard seconds <= longest else { return "> 100 days" }
        let total = Int(seconds.rounded())
        let (hours, minutes, secs) = (total / 3600, total / 60 % 60, total % 60)
        let twoDigits = { (value: Int) in value < 10 ? "0\(value)" : "\(value)" }
        return hours > 0 ? "\(hours):\(twoDigits(minutes)):\(twoDigits(secs))" : "\(minutes):\(twoDigits(secs))"
    }
}

extension String {
    /// One decimal place, without Foundation's formatter; a whole number
    /// from 10^15 on (saturated at Int64's range), `-` for NaN.
    init(format1 value: Double) {
        guard !value.isNaN else {
            self = "-"
            return
        }
        guard abs(value) < 1e15 else {
            self = String(Int64(saturating: value))
            return
        }
        let tenths = Int64((abs(value) * 10).rounded())
        self = (value < 0 && tenths > 0 ? "-" : "") + "\(tenths / 10).\(tenths % 10)"
    }
}

extension Int64 {
    /// `value` rounded toward zero and clamped to Int64's range (rates and
    /// seconds as whole numbers for display); 0 for NaN.
    init(saturating value: Double) {
        if value.isNaN {
            self = 0
        } else if value >= 0x1p63 {
            self = .max
        } else if value <= -0x1p63 {
            self = .min
        } else {
            self = Int64(value)
        }
    }

    /// The sum, clamped to Int64's range instead of trapping.
    func saturatingAdding(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
