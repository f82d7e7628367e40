// Planner: the first split of the missing bytes into one piece per
// connection, and the split that hands a free connection half of the largest
// piece still being fetched (work stealing). Pure functions over values,
// total over every input: sizes up to Int64.max, a minimum split of any size,
// rates that are zero, infinite or NaN never trap (no `2 * minimumSplit`).

/// How a download's missing bytes are divided among connections.
struct Planner: Sendable {
    /// How many connections may run at once.
    var connections: Int
    /// No piece is split below this many bytes (below 1 counts as 1).
    var minimumSplit: Int64
    /// Cuts fall on multiples of this many bytes where they can: a piece
    /// hash's length, so that each hash piece has one transfer, which hashes
    /// it as it writes it (PieceCheck+Stream.swift). 1: anywhere.
    var grain: Int64

    /// A planner for `connections` connections that never cuts below
    /// `minimumSplit` bytes, and cuts on multiples of `grain`.
    init(connections: Int, minimumSplit: Int64, grain: Int64 = 1) {
        self.connections = connections
        self.minimumSplit = minimumSplit
        self.grain = grain
    }

    /// `cut` moved up to the next multiple of the grain, unless that
    /// leaves less than a minimum split of `range` after it (then as it is:
    /// the grain never makes a piece shorter than the minimum split).
    private func aligned(_ cut: Int64, in range: ByteRange) -> Int64 {
        guard grain > 1 else { return cut }
        let (whole, rest) = cut.quotientAndRemainder(dividingBy: grain)
        guard rest != 0 else { return cut }
        let (up, overflow) = (whole + 1).multipliedReportingOverflow(by: grain)
        return !overflow && up < range.end && range.end - up >= split ? up : cut
    }

    /// The minimum split, at least one byte.
    private var split: Int64 { max(1, minimumSplit) }

    /// Splits `missing` into at most `connections` pieces, sorted by offset.
    ///
    /// The largest piece is halved until there are enough pieces or no piece
    /// is at least twice the minimum split, so a file smaller than `connections`
    /// minimum splits gets fewer pieces and an empty set gets none.
    func plan(_ missing: RangeSet) -> [ByteRange] {
        var pieces = missing.ranges
        while pieces.count < connections,
            let index = pieces.indices.max(by: { pieces[$0].count < pieces[$1].count }),
            pieces[index].count / 2 >= split
        {
            let piece = pieces[index]
            let middle = aligned(piece.start + piece.count / 2, in: piece)
            pieces[index] = ByteRange(piece.start, middle)
            pieces.insert(ByteRange(middle, piece.end), at: index + 1)
        }
        return pieces
    }

    /// The end reserve: the last bytes of `missing`, left out of the first
    /// split and handed out a piece at a time (`reservedPiece`) once nothing
    /// can be stolen any more.
    ///
    /// Why: the first split and the steals predict when each connection will
    /// finish from rates measured early, and a steal needs the victim to have
    /// a tenth of a second left and the thief's share to be a minimum split
    /// (at equal rates, two minimum splits left). So the last pieces,
    /// planned most of a download before, end up to 0.1 s apart, and the
    /// connections that finish first idle through that tail (bulk-mixed:
    /// 16 connections at 20 MiB/s ended 55 to 95 ms apart, 4% of a
    /// one-second run). Small pieces handed out at the end, to whichever
    /// connection is free, fill that tail without cutting anyone's transfer.
    ///
    /// One minimum split per connection, at most an eighth of what is
    /// missing; none when that makes fewer than two pieces. The engine keeps
    /// one only from a near server (a request's wait well below a piece's time).
    func endReserve(of missing: RangeSet) -> RangeSet {
        let pieces = min(Int64(max(1, connections)), missing.byteCount / 8 / split)
        guard pieces >= 2 else { return RangeSet() }
        var wanted = pieces * split
        var reserve = RangeSet()
        for range in missing.ranges.reversed() where wanted > 0 {
            let taken = min(range.count, wanted)
            reserve.insert(ByteRange(range.end - taken, range.end))
            wanted -= taken
        }
        return reserve
    }

    /// The next piece of the end reserve, from its lowest byte: a minimum
    /// split (what would be left shorter than one goes with it), so a piece
    /// taken just before the others end cannot hold the end up by much, and
    /// at equal rates is too short to be stolen from (a cut wastes what is in
    /// flight). Nil when the reserve is empty.
    func reservedPiece(from reserve: RangeSet) -> ByteRange? {
        guard let first = reserve.ranges.first else { return nil }
        guard first.count - min(first.count, split) >= split else { return first }
        return ByteRange(first.start, aligned(first.start + split, in: first))
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
    func steal(
        from remaining: ByteRange, victimRate: Double?, thiefRate: Double?,
        setupDelay: Double
    ) -> ByteRange? {
        guard remaining.count >= split else { return nil }
        guard let victim = victimRate ?? thiefRate, let thief = thiefRate ?? victimRate else {
            guard remaining.count / 2 >= split else { return nil }
            return ByteRange(aligned(remaining.start + remaining.count / 2, in: remaining), remaining.end)
        }
        let bytes = Double(remaining.count)
        guard victim * (setupDelay + Self.minimumGain) < bytes, thief > 0 else { return nil }
        // Victim at `victim` B/s from now, thief at `thief` B/s after setupDelay:
        // both are done at t = (bytes + thief * setupDelay) / (victim + thief).
        let together = (bytes + thief * setupDelay) / (victim + thief)
        let share = victim * together
        // Double(count) may round up to 2^63, which Int64 cannot hold: compare in Double, convert only below it.
        guard share.isFinite, share < bytes else { return nil }
        let cut = aligned(remaining.start + Int64(max(0, share)), in: remaining)
        guard remaining.end - cut >= split else { return nil }
        return ByteRange(cut, remaining.end)
    }

    /// True when a free connection should fetch the rest of a piece too
    /// (the end game): the victim is so slow that a new request would finish
    /// `remaining` clearly sooner, and the piece is too small to cut.
    func shouldRace(_ remaining: ByteRange, victimRate: Double, thiefRate: Double?, setupDelay: Double) -> Bool {
        guard let thief = thiefRate, thief > 0 else { return false }
        let bytes = Double(remaining.count)
        let fresh = setupDelay + bytes / thief
        return victimRate * (fresh + Self.minimumGain) < bytes
    }

    /// Seconds a victim must have left beyond a new request's setup delay
    /// for a steal (or a race) to be worth it; at equal rates a steal then
    /// saves half of that at least. At
    /// 0.25 s, a large file's last pieces at 20 MiB/s per connection (5 MiB
    /// each) were never cut: the connections that finished first idled
    /// through a 0.2 s tail, about 10% of a one-second download (bulk-mixed
    /// 0.92 of ideal over 7 runs). At 0.1 s: 0.97; a single file (cap) and a
    /// bursty server's run are unchanged.
    static let minimumGain = 0.1
}
