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
    init?(_ value: String) {
        let text = value.trimmingWhitespace()
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = text.dropFirst("bytes ".count).trimmingWhitespace()
        let halves = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        if halves[1] == "*" {
            total = nil
        } else {
            guard let total = Self.number(halves[1]) else { return nil }
            self.total = total
        }
        if halves[0] == "*" {
            guard total != nil else { return nil }
            range = nil
            return
        }
        let bounds = halves[0].split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Self.number(bounds[0]), let last = Self.number(bounds[1]),
              first <= last, last < Int64.max else { return nil }
        if let total, last >= total { return nil }
        range = ByteRange(first, last + 1)
    }

    /// A non-negative decimal of digits only (no sign, no spaces), without overflow.
    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 19, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }
}
