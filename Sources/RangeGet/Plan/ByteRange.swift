// ByteRange: a half-open span of a file. Offsets are Int64 everywhere so files
// above 4 GiB are ordinary. HTTP's inclusive `first-last` form appears only
// where a header is written or parsed.

/// The bytes `start ..< end` of a file.
public struct ByteRange: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The first byte.
    public var start: Int64
    /// One past the last byte.
    public var end: Int64

    /// A range from `start` up to, not including, `end`; `0 <= start <= end`,
    /// so `count` never overflows.
    public init(_ start: Int64, _ end: Int64) {
        precondition(0 <= start && start <= end, "ByteRange \(start)..<\(end) is not a span of a file")
        self.start = start
        self.end = end
    }

    /// The number of bytes.
    public var count: Int64 { end - start }

    /// True when the range holds no byte.
    public var isEmpty: Bool { start == end }

    /// The `Range` request header value, `bytes=first-last`, or `bytes=first-`
    /// for a range that ends at `Int64.max` (to the end of a file of a size
    /// not known yet).
    public var rangeHeaderValue: String { end == .max ? "bytes=\(start)-" : "bytes=\(start)-\(end - 1)" }

    public var description: String { "\(start)..<\(end)" }

    public static func < (lhs: ByteRange, rhs: ByteRange) -> Bool {
        (lhs.start, lhs.end) < (rhs.start, rhs.end)
    }
}

extension ByteRange: Codable {
    /// Encoded as a two-element array `[start, end]` (end exclusive), which keeps
    /// manifests short and readable.
    public init(from decoder: Decoder) throws {
        var container = try decoder.unkeyedContainer()
        let start = try container.decode(Int64.self)
        let end = try container.decode(Int64.self)
        guard start >= 0, start <= end else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "range [\(start), \(end)) is not a valid byte range")
        }
        self.init(start, end)
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(start)
        try container.encode(end)
    }
}
