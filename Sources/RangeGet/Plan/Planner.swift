// Planner: the first split of the missing bytes into one segment per
// connection, and the split that hands a free connection half of the largest
// piece still being fetched (work stealing). Pure functions over values.

/// How a download's missing bytes are divided among connections.
public struct Planner: Sendable {
    /// How many connections may run at once.
    public var connections: Int
    /// No segment is split below this many bytes.
    public var minimumSplit: Int64

    /// A planner for `connections` connections that never cuts below `minimumSplit` bytes.
    public init(connections: Int, minimumSplit: Int64) {
        precondition(connections > 0 && minimumSplit > 0)
        self.connections = connections
        self.minimumSplit = minimumSplit
    }

    /// Splits `missing` into at most `connections` segments, sorted by offset.
    ///
    /// The largest piece is halved until there are enough segments or no piece
    /// is at least twice the minimum split, so a file smaller than `connections`
    /// minimum splits gets fewer segments and an empty set gets none.
    public func plan(_ missing: RangeSet) -> [ByteRange] {
        var segments = missing.ranges
        while segments.count < connections,
              let index = segments.indices.max(by: { segments[$0].count < segments[$1].count }),
              segments[index].count >= 2 * minimumSplit {
            let piece = segments[index]
            let middle = piece.start + piece.count / 2
            segments[index] = ByteRange(piece.start, middle)
            segments.insert(ByteRange(middle, piece.end), at: index + 1)
        }
        return segments
    }

    /// Where to cut a piece still being fetched so a free connection can take
    /// its end: `remaining` is the part not yet received, the rates are bytes
    /// per second (nil while unknown), `setupDelay` how long a new request
    /// takes to deliver its first byte.
    ///
    /// The cut is placed so that both finish together. Returns nil when the
    /// thief's share would be below the minimum split, or when the victim
    /// finishes sooner than a new request could help (its bytes are already
    /// on the wire and would be fetched twice).
    public func steal(from remaining: ByteRange, victimRate: Double?, thiefRate: Double?,
                      setupDelay: Double) -> ByteRange? {
        guard remaining.count >= minimumSplit else { return nil }
        guard let victim = victimRate ?? thiefRate, let thief = thiefRate ?? victimRate else {
            guard remaining.count >= 2 * minimumSplit else { return nil }
            return ByteRange(remaining.start + remaining.count / 2, remaining.end)
        }
        let bytes = Double(remaining.count)
        guard victim * (setupDelay + Self.minimumGain) < bytes, thief > 0 else { return nil }
        // Victim at `victim` B/s from now, thief at `thief` B/s after setupDelay:
        // both are done at t = (bytes + thief * setupDelay) / (victim + thief).
        let together = (bytes + thief * setupDelay) / (victim + thief)
        let keep = Int64(min(bytes, victim * together))
        let cut = remaining.start + keep
        guard remaining.end - cut >= minimumSplit else { return nil }
        return ByteRange(cut, remaining.end)
    }

    /// True when a free connection should fetch the rest of a piece too
    /// (the end game): the victim is so slow that a new request would finish
    /// `remaining` clearly sooner, and the piece is too small to cut.
    public func shouldRace(_ remaining: ByteRange, victimRate: Double, thiefRate: Double?, setupDelay: Double) -> Bool {
        guard let thief = thiefRate, thief > 0 else { return false }
        let bytes = Double(remaining.count)
        let fresh = setupDelay + bytes / thief
        return victimRate * (fresh + Self.minimumGain) < bytes
    }

    /// Seconds a steal must save at least to be worth a new request.
    static let minimumGain = 0.25
}
