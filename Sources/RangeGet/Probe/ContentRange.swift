// ContentRange: the parsed `Content-Range` header of a 206 or 416 response
// (RFC 9110 14.4). Strict: anything unexpected is nil, and the engine then
// writes nothing from that response.

/// A `Content-Range: bytes first-last/total` or `bytes */total` value.
struct ContentRange: Equatable, Sendable {
    /// The bytes the response carries, nil for the unsatisfied form `*/total`.
    var range: ByteRange?
    /// The complete length, nil when the server sent `*`.
    var total: Int64?

    /// Parses a header value; nil for any other unit, bad numbers or last < first.
    /// White space around the parts is ASCII's (SP, HTAB, CR, LF, VT, FF).
    init?(_ value: String) {
        // Read as bytes: every response to a ranged request passes here.
        var value = value
        guard let parsed = value.withUTF8(Self.parse) else { return nil }
        self = parsed
    }

    private init(range: ByteRange?, total: Int64?) {
        self.range = range
        self.total = total
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> ContentRange? {
        let text = bytes.trimmingASCIIWhitespace()
        let unit = "bytes ".utf8
        guard text.startsIgnoringASCIICase(unit) else { return nil }
        let spec = text.dropFirst(unit.count).trimmingASCIIWhitespace()
        // Exactly one '/', and one '-' before it (split in place: no arrays).
        guard let (range, length) = halves(spec, at: UInt8(ascii: "/")) else { return nil }
        let total: Int64?
        if isStar(length) {
            total = nil
        } else {
            guard let number = number(length) else { return nil }
            total = number
        }
        if isStar(range) {
            guard total != nil else { return nil }
            return ContentRange(range: nil, total: total)
        }
        guard let bounds = halves(range, at: UInt8(ascii: "-")), let first = number(bounds.0),
            let last = number(bounds.1), first <= last, last < Int64.max
        else { return nil }
        if let total, last >= total { return nil }
        return ContentRange(range: ByteRange(first, last + 1), total: total)
    }

    /// What comes before and after the one `separator` in `text`; nil unless there is exactly one.
    private static func halves(_ text: Slice<UnsafeBufferPointer<UInt8>>, at separator: UInt8)
        -> (Slice<UnsafeBufferPointer<UInt8>>, Slice<UnsafeBufferPointer<UInt8>>)?
    {
        guard let index = text.firstIndex(of: separator) else { return nil }
        let after = text[(index + 1)...]
        return after.contains(separator) ? nil : (text[..<index], after)
    }

    private static func isStar(_ text: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        text.count == 1 && text.first == UInt8(ascii: "*")
    }

    /// A non-negative decimal of digits only (no sign, no spaces), without overflow.
    private static func number(_ text: Slice<UnsafeBufferPointer<UInt8>>) -> Int64? {
        guard !text.isEmpty, text.count <= 19 else { return nil }
        var value: Int64 = 0
        for byte in text {
            guard byte.isASCIIDigit else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowAgain) = times.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            guard !overflow, !overflowAgain else { return nil }
            value = sum
        }
        return value
    }
}
