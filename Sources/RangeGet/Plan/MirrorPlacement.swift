// MirrorPlacement: how many of the connections each mirror gets.
//
// Mirrors limit throughput in two ways. Some cap each connection (nginx's
// limit_rate, per-flow shaping at a CDN): every connection added there adds
// its rate, so all connections belong on the mirror whose connections are
// fastest. Others share an uplink: connections added there split the same
// total, so such a mirror needs only the few that fill it. A snapshot of
// rates cannot tell the two apart; a move can. So placement keeps, for each
// mirror, the total it measured at each connection count (its curve), and
// moves connections from the mirrors where they add least to the one where
// they add most, as the curves predict. Where a curve has no point yet, the
// prediction is optimistic on both sides: a mirror scales until seen to
// stop rising, and a saturated mirror keeps its total with fewer
// connections until seen to fall. Each move is measured: a move whose sum
// fell is undone; one that paid doubles the next (like TCP's slow start).
// A donor not yet seen to scale always keeps a connection, so a wrong guess
// about an uplink mirror costs nothing, and the best placement is found in a
// few measurement windows. Pure: the engine measures and carries out moves.

/// The connection count each mirror should have, learned from moves.
struct MirrorPlacement: Sendable {
    /// What the engine measured of one mirror.
    struct Observation: Equatable, Sendable {
        /// Transfers running on it now.
        var connections: Int
        /// Its total bytes per second over the last measurement window; nil
        /// until a whole window has been measured at this count.
        var rate: Double?
        /// How many more connections it may take (0 when dropped or its host is full).
        var room: Int
        /// True when `rate` is an upper bound, not yet a measurement (a
        /// bursty mirror not yet seen over two of its pauses): it may give
        /// connections, never receive them, and a move to it is judged once
        /// it is measured.
        var bounded = false
    }

    /// Connections to take off `from` and start on `to`.
    struct Move: Equatable, Sendable {
        var from: Int
        var to: Int
        var count: Int
    }

    /// A move being measured.
    private struct Trial: Sendable {
        var moves: [Move]
        /// The totals of the mirrors involved before the move.
        var before: [Int: Double]
    }

    /// How many connections each mirror should run.
    private(set) var targets: [Int]
    private var curves: [ThroughputCurve]
    private var trial: Trial?
    /// The next move's size, doubled after each move that paid.
    private var step = 0
    /// An undo being carried out: no move starts until its mirrors are measured again.
    private var undoing: Set<Int> = []
    /// Mirrors no longer used: no target goes back to them.
    private var dropped: Set<Int> = []

    /// A move's predicted gain must be this many times its predicted loss
    /// (measurements are noisy).
    static let margin = 1.5
    /// The same for a move of one connection into a mirror whose curve ends
    /// at its present count: it tells whether the mirror has more to give.
    static let probeMargin = 1.15

    /// Connections spread evenly over the mirrors, within each one's room.
    init(connections: Int, room: [Int]) {
        targets = Array(repeating: 0, count: room.count)
        curves = Array(repeating: ThroughputCurve(saturationShare: 0.25), count: room.count)
        // Each connection to the first of the mirrors with room that has fewest
        // (searched in place: every file of a list makes a placement).
        for _ in 0..<max(0, connections) {
            var next: Int?
            for index in targets.indices where targets[index] < room[index] {
                if next.map({ targets[index] < targets[$0] }) ?? true { next = index }
            }
            guard let next else { break }
            targets[next] += 1
        }
    }

    /// The mirror a free connection should start on: the one furthest below
    /// its target, else the one where a connection adds most; nil when none
    /// has room.
    func choose(_ observations: [Observation]) -> Int? {
        let open = observations.indices.filter { observations[$0].room > 0 }
        if let behind = open.max(by: {
            targets[$0] - observations[$0].connections < targets[$1] - observations[$1].connections
        }),
            targets[behind] > observations[behind].connections
        {
            return behind
        }
        return open.max { gain(at: $0, observations[$0].connections) < gain(at: $1, observations[$1].connections) }
    }

    /// Stops sending connections to `mirror` (dropped); its target goes to
    /// the mirror still in use where a connection adds most.
    mutating func drop(_ mirror: Int) {
        let freed = targets[mirror]
        targets[mirror] = 0
        dropped.insert(mirror)
        trial = nil
        guard
            let best = targets.indices.filter({ !dropped.contains($0) && curves[$0].perConnection != 0 })
                .max(by: { gain(at: $0, targets[$0]) < gain(at: $1, targets[$1]) })
        else { return }
        targets[best] += freed
    }

    /// Takes the latest totals; returns the connections to move now (a new
    /// move, or the undoing of one that lost). A mirror's rate is nil until
    /// the engine measured a whole window with its connections all
    /// delivering, so a move is judged once its mirrors have such a rate at
    /// their new counts. `worthMoving` is false near the end, where a move
    /// would not pay back.
    mutating func update(_ observations: [Observation], worthMoving: Bool) -> [Move] {
        precondition(observations.count == targets.count)
        // Totals count only where the connections are where they should be:
        // a connection between pieces is not a smaller count.
        func measured(_ index: Int) -> Bool {
            observations[index].connections == targets[index]
                && (targets[index] == 0 || observations[index].rate != nil)
        }
        if let trial {
            guard trial.before.keys.allSatisfy(measured),
                trial.moves.allSatisfy({ !observations[$0.to].bounded })
            else { return [] }
            record(observations)
            self.trial = nil
            return judge(trial, observations)
        }
        if !undoing.isEmpty {
            guard undoing.allSatisfy(measured) else { return [] }
            undoing = []
        }
        guard observations.indices.allSatisfy(measured) else { return [] }
        record(observations)
        guard worthMoving, let proposal = propose(observations) else { return [] }
        var before: [Int: Double] = [:]
        for index in Set(proposal.flatMap { [$0.from, $0.to] }) { before[index] = observations[index].rate ?? 0 }
        apply(proposal)
        trial = Trial(moves: proposal, before: before)
        return proposal
    }

    private mutating func record(_ observations: [Observation]) {
        for (index, observation) in observations.enumerated() where observation.connections > 0 {
            if let rate = observation.rate { curves[index].record(rate, at: observation.connections) }
        }
    }

    /// Bytes per second one more connection adds to `mirror` at `count`.
    private func gain(at mirror: Int, _ count: Int) -> Double {
        curves[mirror].total(at: count + 1, optimistic: true) - curves[mirror].total(at: count, optimistic: true)
    }

    /// The best move the curves predict, else a probe of one connection, else nil.
    private func propose(_ observations: [Observation]) -> [Move]? {
        let total = observations.compactMap(\.rate).reduce(0, +)
        let connections = observations.map(\.connections).reduce(0, +)
        guard connections > 0, total > 0 else { return nil }
        // Differences below a tenth of the average connection's rate are noise.
        let noise = 0.1 * total / Double(connections)
        let recipients = observations.indices.filter {
            observations[$0].room > 0 && !observations[$0].bounded && gain(at: $0, observations[$0].connections) > noise
        }
        .sorted { gain(at: $0, observations[$0].connections) > gain(at: $1, observations[$1].connections) }
        for recipient in recipients {
            let limit = min(observations[recipient].room, max(step, observations[recipient].connections, 1))
            if let moves = takeConnections(for: recipient, limit: limit, margin: Self.margin, observations),
                !moves.isEmpty
            {
                return moves
            }
        }
        for recipient in recipients where !curves[recipient].isMeasured(above: observations[recipient].connections) {
            if let moves = takeConnections(for: recipient, limit: 1, margin: Self.probeMargin, observations),
                !moves.isEmpty
            {
                return moves
            }
        }
        return nil
    }

    /// Up to `limit` connections for `recipient`, one at a time from the
    /// donor that loses least by it, while the recipient gains `margin`
    /// times what the donor loses.
    private func takeConnections(for recipient: Int, limit: Int, margin: Double, _ observations: [Observation])
        -> [Move]?
    {
        var counts = observations.map(\.connections)
        var taken: [Int: Int] = [:]
        for _ in 0..<limit {
            let added =
                curves[recipient].total(at: counts[recipient] + 1, optimistic: true)
                - curves[recipient].total(at: counts[recipient], optimistic: true)
            let donors = counts.indices.filter { donor in
                // A donor not yet seen to scale keeps one connection: an
                // uplink mirror emptied would lose its whole total.
                donor != recipient && counts[donor] > (curves[donor].scales ? 0 : 1)
            }
            func loss(_ donor: Int) -> Double {
                curves[donor].total(at: counts[donor], optimistic: true)
                    - curves[donor].total(at: counts[donor] - 1, optimistic: true)
            }
            guard let donor = donors.min(by: { loss($0) < loss($1) }), added > margin * loss(donor) else { break }
            counts[donor] -= 1
            counts[recipient] += 1
            taken[donor, default: 0] += 1
        }
        return taken.keys.sorted().map { Move(from: $0, to: recipient, count: taken[$0]!) }
    }

    private mutating func judge(_ trial: Trial, _ observations: [Observation]) -> [Move] {
        let before = trial.before.values.reduce(0, +)
        let after = trial.before.keys.map { observations[$0].rate ?? 0 }.reduce(0, +)
        let moved = trial.moves.map(\.count).reduce(0, +)
        if after - before < -0.05 * before {
            let undo = trial.moves.map { Move(from: $0.to, to: $0.from, count: $0.count) }
            apply(undo)
            step = 0
            undoing = Set(trial.before.keys)
            return undo
        }
        // A move that paid at least half of what one connection adds doubles the next.
        let perConnection =
            before / Double(max(1, trial.moves.map { observations[$0.from].connections + $0.count }.reduce(0, +)))
        step = after - before >= 0.5 * perConnection ? 2 * moved : 0
        return []
    }

    private mutating func apply(_ moves: [Move]) {
        for move in moves {
            targets[move.from] -= move.count
            targets[move.to] += move.count
        }
    }
}

/// A mirror's measured total at each connection count, and what it predicts
/// between and beyond the measured counts.
struct ThroughputCurve: Sendable, Equatable {
    /// Bytes per second at each connection count: the latest measurement
    /// there, which the engine takes over all the time the count held (up
    /// to two seconds). The best of recent 0.1 s windows remembered a
    /// bursty mirror's bursts (nginx: 2 MiB at once, then a sleep) as its
    /// pace: 2/8/32 MiB/s mirrors reached 0.66 of the best allocation.
    private(set) var totals: [Int: Double] = [:]
    /// More connections that add less than this share of what the ones
    /// before added each count as adding nothing (a ceiling). Totals measured
    /// over long windows (bench: seconds) can be judged at a half; the
    /// engine's 0.1 s windows are noisier, and a mirror that scales can
    /// measure a third short there, so it judges at a quarter.
    let saturationShare: Double

    /// An empty curve that sees a ceiling below `saturationShare`.
    init(saturationShare: Double = 0.5) {
        self.saturationShare = saturationShare
    }

    mutating func record(_ total: Double, at connections: Int) {
        totals[connections] = total
    }

    /// The best rate per connection seen.
    var perConnection: Double? {
        totals.map { $0.value / Double($0.key) }.max()
    }

    private var points: [(count: Int, total: Double)] {
        totals.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// The total it does not rise above, once more connections were seen to
    /// add less than `saturationShare` of what the ones before added each.
    var ceiling: Double? {
        let points = points
        for (index, low) in points.enumerated() {
            for high in points[(index + 1)...] {
                let expected = low.total / Double(low.count) * Double(high.count - low.count)
                if high.total - low.total < saturationShare * expected { return points.map(\.total).max() }
            }
        }
        return nil
    }

    /// True once more connections were seen to add about their share.
    var scales: Bool {
        let points = points
        for (index, low) in points.enumerated() {
            for high in points[(index + 1)...] {
                let expected = low.total / Double(low.count) * Double(high.count - low.count)
                if high.total - low.total >= 0.5 * expected { return true }
            }
        }
        return false
    }

    /// True when a count above `count` was measured.
    func isMeasured(above count: Int) -> Bool {
        totals.keys.contains { $0 > count }
    }

    /// The predicted total at `count`. Where nothing was measured, an
    /// optimistic curve scales by its best rate per connection until a
    /// ceiling is known, and keeps the ceiling with fewer connections until a
    /// smaller count was seen below it.
    func total(at count: Int, optimistic: Bool) -> Double {
        guard count > 0 else { return 0 }
        if let measured = totals[count] { return measured }
        guard let perConnection else { return 0 }
        guard let ceiling else {
            // Scaling: between two measured counts on the line joining them,
            // beyond them in proportion to the nearest.
            let points = points
            if let above = points.firstIndex(where: { $0.count > count }), above > 0 {
                let (low, high) = (points[above - 1], points[above])
                return low.total + (high.total - low.total) * Double(count - low.count) / Double(high.count - low.count)
            }
            guard let nearest = count < points[0].count ? points.first : points.last else {
                return perConnection * Double(count)
            }
            return nearest.total / Double(nearest.count) * Double(count)
        }
        // Below the ceiling: the nearest measured count under it bounds the total.
        let below = points.last { $0.count < count }
        if let below, below.total < 0.9 * ceiling {
            return min(ceiling, below.total / Double(below.count) * Double(count))
        }
        return optimistic ? ceiling : min(ceiling, perConnection * Double(count))
    }
}
