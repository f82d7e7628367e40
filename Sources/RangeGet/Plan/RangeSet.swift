// RangeSet: which bytes of a file are done (or missing), as sorted, disjoint,
// non-adjacent ranges. Small by construction: a few ranges per connection.

/// A set of bytes kept as sorted, disjoint, non-touching `ByteRange`s.
public struct RangeSet: Equatable, Sendable, Codable, CustomStringConvertible {
    /// The ranges, sorted by start; no two overlap or touch.
    public private(set) var ranges: [ByteRange] = []

    /// An empty set.
    public init() {}

    /// The union of `ranges`, in any order, overlapping or not.
    public init(_ ranges: [ByteRange]) {
        for range in ranges { insert(range) }
    }

    /// The number of bytes in the set.
    public var byteCount: Int64 { ranges.reduce(0) { $0 + $1.count } }

    /// True when the set holds no byte.
    public var isEmpty: Bool { ranges.isEmpty }

    /// Adds `range`, merging with neighbours it overlaps or touches.
    public mutating func insert(_ range: ByteRange) {
        guard !range.isEmpty else { return }
        var merged = range
        var kept: [ByteRange] = []
        kept.reserveCapacity(ranges.count + 1)
        var placed = false
        for existing in ranges {
            if existing.end < merged.start {
                kept.append(existing)
            } else if merged.end < existing.start {
                if !placed {
                    kept.append(merged)
                    placed = true
                }
                kept.append(existing)
            } else {
                merged = ByteRange(min(existing.start, merged.start), max(existing.end, merged.end))
            }
        }
        if !placed { kept.append(merged) }
        ranges = kept
    }

    /// Removes every byte of `range` from the set.
    public mutating func remove(_ range: ByteRange) {
        guard !range.isEmpty else { return }
        var kept: [ByteRange] = []
        for existing in ranges {
            if existing.end <= range.start || existing.start >= range.end {
                kept.append(existing)
                continue
            }
            if existing.start < range.start { kept.append(ByteRange(existing.start, range.start)) }
            if existing.end > range.end { kept.append(ByteRange(range.end, existing.end)) }
        }
        ranges = kept
    }

    /// True when every byte of `range` is in the set.
    public func contains(_ range: ByteRange) -> Bool {
        range.isEmpty || ranges.contains { $0.start <= range.start && range.end <= $0.end }
    }

    /// The bytes of `0 ..< size` that are not in the set.
    public func complement(size: Int64) -> RangeSet {
        var missing = RangeSet()
        var cursor: Int64 = 0
        for range in ranges where range.start < size {
            if range.start > cursor { missing.ranges.append(ByteRange(cursor, range.start)) }
            cursor = max(cursor, min(range.end, size))
        }
        if cursor < size { missing.ranges.append(ByteRange(cursor, size)) }
        return missing
    }

    /// The bytes of this set that are not in `other`.
    func subtracting(_ other: RangeSet) -> RangeSet {
        var rest = self
        for range in other.ranges { rest.remove(range) }
        return rest
    }

    /// The union of two sets.
    public func union(_ other: RangeSet) -> RangeSet {
        var result = self
        for range in other.ranges { result.insert(range) }
        return result
    }

    /// True when the set holds no byte at or beyond `size`.
    public func fits(size: Int64) -> Bool {
        (ranges.last?.end ?? 0) <= size
    }

    public var description: String { ranges.map(\.description).joined(separator: ", ") }

    public init(from decoder: Decoder) throws {
        let decoded = try [ByteRange](from: decoder)
        self.init(decoded)
    }

    public func encode(to encoder: Encoder) throws {
        try ranges.encode(to: encoder)
    }
}
