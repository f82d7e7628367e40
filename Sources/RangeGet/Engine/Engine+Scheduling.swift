// Who fetches what: an idle connection takes the first ready piece of the
// queue; when none is left it steals the end of the piece that will finish
// last; when no piece can be cut any more, it races a very slow connection
// for its tail (first to finish wins). Mirrors are filled evenly within the
// per-host cap; stealing then hands more work to whatever runs faster.

extension Engine {
    /// Gives every idle connection within the limits a piece. With a budget
    /// shared among downloads, a transfer beyond one plus the spares held
    /// first takes a spare connection (and stops here when none is free).
    func startIdleConnections(now: Double) -> EngineOutcome? {
        while true {
            // Counted anew each turn: a steal below may end a transfer.
            let busy = connections.count(where: \.isBusy)
            guard busy < connectionLimit else { break }
            if let budget = settings.budget, busy >= 1 + sparesHeld {
                guard budget.take() else { break }
                sparesHeld += 1
            }
            // The piece first (a steal may end a transfer), then a handle for it.
            let reuse = connections.first { !$0.isBusy }
            guard let mirror = chooseMirror(now: now),
                  let (piece, race) = nextPiece(thiefRate: reuse?.lastRate, now: now) else {
                returnSpares()
                break
            }
            do {
                let connection = if let reuse { reuse } else { try newConnection() }
                if race != nil { onEvent(.raced(connection: connection.id, range: piece.range)) }
                try launch(connection, piece, from: mirror, race: race, now: now)
            } catch {
                return .failed(.network(url: mirror.remote.url, message: error.message))
            }
        }
        return nil
    }

    /// Gives back the spare connections no transfer runs on any more, so
    /// other downloads of the budget can use them: called whenever a
    /// transfer ends, so that sparesHeld == max(0, busy - 1) between turns.
    func returnSpares() {
        guard let budget = settings.budget else { return }
        let unused = sparesHeld - max(0, connections.count(where: \.isBusy) - 1)
        guard unused > 0 else { return }
        budget.giveBack(unused)
        sparesHeld -= unused
    }

    /// The mirror for a connection about to start, among usable mirrors whose
    /// host is below its cap. Until speeds are known, connections are spread
    /// evenly; then each goes where it adds least load per unit of measured
    /// per-connection speed, so connections end up in proportion to speed (a
    /// mirror not measured yet counts as fast as the best, so it gets tried).
    private func chooseMirror(now: Double) -> Mirror? {
        var perHost: [String: Int] = [:]
        for mirror in mirrors { perHost[mirror.host, default: 0] += mirror.activeConnections }
        let open = mirrors.filter { $0.isUsable && perHost[$0.host, default: 0] < settings.maxPerHost }
        let rates = open.map { measuredRate(of: $0, now: now) }
        guard let best = rates.compactMap({ $0 }).max(), best > 0 else {
            return open.min { $0.activeConnections < $1.activeConnections }
        }
        return zip(open, rates).min { lhs, rhs in
            Double(lhs.0.activeConnections + 1) / max(lhs.1 ?? best, 1) < Double(rhs.0.activeConnections + 1) / max(rhs.1 ?? best, 1)
        }?.0
    }

    /// A mirror's bytes per second per connection: its running transfers'
    /// recent rates, else its finished transfers' average; nil before any data.
    func measuredRate(of mirror: Mirror, now: Double) -> Double? {
        let live = connections.filter { $0.isBusy && $0.mirror === mirror }.compactMap { $0.rate(now: now) }
        if !live.isEmpty { return live.reduce(0, +) / Double(live.count) }
        return mirror.ratePerConnection
    }

    /// The next piece for a connection that fetched at `thiefRate` last
    /// (nil: a new one): a queued piece, else a stolen end, else a race.
    private func nextPiece(thiefRate: Double?, now: Double) -> (Piece, Race?)? {
        if let index = queue.firstIndex(where: { $0.notBefore <= now }) {
            return (queue.remove(at: index), nil)
        }
        guard queue.isEmpty, !settings.plain else { return nil }
        if let stolen = steal(thiefRate: thiefRate, now: now) { return (stolen, nil) }
        return race(thiefRate: thiefRate, now: now)
    }

    /// Running transfers that may be cut or raced, with the rate to plan with:
    /// measured over the last second (0 when silent that long), else the
    /// mirror's per-connection rate, nil while nothing is known.
    private func candidates(now: Double) -> [(connection: Connection, remaining: ByteRange, rate: Double?)] {
        connections.compactMap { connection in
            guard connection.race == nil, let remaining = connection.remaining else { return nil }
            let rate = connection.rate(now: now) ?? connection.mirror.flatMap { measuredRate(of: $0, now: now) }
            return (connection, remaining, rate)
        }
    }

    /// The end of the piece that will take longest to finish, cut so that
    /// victim and thief finish together. A victim whose rate is not known yet
    /// is assumed to run like the thief did on its last piece.
    private func steal(thiefRate lastRate: Double?, now: Double) -> Piece? {
        let running = candidates(now: now)
        let known = running.compactMap(\.rate).filter { $0 > 0 }.sorted()
        let thiefRate = lastRate ?? (known.isEmpty ? nil : known[known.count / 2])
        func secondsLeft(_ candidate: (connection: Connection, remaining: ByteRange, rate: Double?)) -> Double {
            guard let rate = candidate.rate ?? thiefRate else { return Double(candidate.remaining.count) }
            return rate > 0 ? Double(candidate.remaining.count) / rate : .infinity
        }
        guard let victim = running.max(by: { secondsLeft($0) < secondsLeft($1) }),
              let stolen = planner.steal(from: victim.remaining, victimRate: victim.rate, thiefRate: thiefRate,
                                         setupDelay: setupDelay)
        else { return nil }
        victim.connection.stop(at: stolen.start)
        onEvent(.stolen(from: victim.connection.id, range: stolen))
        if victim.connection.remaining == nil {
            cancel(victim.connection, reason: "its whole remainder was taken over", requeue: false, now: now)
        }
        return Piece(range: stolen)
    }

    /// The end game: a piece too small to cut whose connection is far slower
    /// than a fresh request would be is fetched by a free connection as well.
    private func race(thiefRate lastRate: Double?, now: Double) -> (Piece, Race)? {
        let running = candidates(now: now)
        let known = running.compactMap(\.rate).filter { $0 > 0 }.sorted()
        guard let thiefRate = lastRate ?? (known.isEmpty ? nil : known[known.count / 2]) else { return nil }
        let slow = running.compactMap { candidate -> (Connection, ByteRange, Double)? in
            let rate = candidate.rate ?? (candidate.connection.age(now: now).sinceLastByte > max(1, 4 * setupDelay) ? 0 : nil)
            guard let rate, planner.shouldRace(candidate.remaining, victimRate: rate, thiefRate: thiefRate,
                                               setupDelay: setupDelay) else { return nil }
            return (candidate.connection, candidate.remaining, rate)
        }
        guard let (victim, remaining, _) = slow.max(by: { $0.1.count < $1.1.count }) else { return nil }
        let race = Race(frontier: remaining.start)
        victim.join(race)
        return (Piece(range: remaining), race)
    }
}
