// Who fetches what: an idle connection takes the first ready piece of the
// queue; when none is left it steals the end of the piece that will finish
// last; when no piece can be cut any more, it takes a small piece of the
// file's end reserve, and when that is gone too, it races a very slow
// connection for its tail (first to finish wins); that order is PieceSource's.
// How many connections each mirror gets is the placement's call
// (MirrorPlacement), within the per-host cap.

extension Engine {
    /// Gives every idle connection within the limits a piece. Each transfer
    /// runs on a slot of the loop's connection limit (shared by the files of
    /// a list): it stops here when the loop has none to give.
    func startIdleConnections(now: Double) -> EngineOutcome? {
        loop.assertOnLoopThread()
        planAhead()
        // At a server's limit, the place of a transfer cut short stays taken
        // at the server a moment: a request sent meanwhile would be refused.
        placesHeldUntil.removeAll { $0 <= now }
        while true {
            // Counted anew each turn: a steal below may end a transfer.
            let busy = connections.count(where: \.isBusy)
            guard busy + placesHeldUntil.count < connectionLimit else { break }
            // The slot is taken before the piece, and joins slotsHeld only as
            // its transfer starts: a steal that takes a victim's whole rest
            // ends the victim (`cancel` gives back the slots no transfer
            // runs on), and a slot already counted would go back with the
            // victim's, leaving the thief on none and the loop over its limit.
            let needsSlot = busy >= slotsHeld
            if needsSlot {
                guard loop.takeSlot(first: busy == 0) else { break }
            }
            // The piece first (a steal may end a transfer), then a handle for it.
            let reuse = connections.first { !$0.isBusy }
            guard let mirror = chooseMirror(now: now, avoiding: avoidedByNextPiece(now: now)),
                let (piece, race) = nextPiece(thiefRate: reuse?.lastRate, for: mirror, now: now)
            else {
                if needsSlot { loop.giveSlots(1) }
                break
            }
            if needsSlot { slotsHeld += 1 }
            // A mirror on trial fetches one hash piece (Engine+Pieces.swift).
            let cut = race == nil ? trialCut(piece, for: mirror, now: now) : piece
            do {
                let connection = if let reuse { reuse } else { try newConnection() }
                if race != nil { onEvent(.transfer(.raced(connection: connection.id, range: cut.range))) }
                try launch(connection, cut, from: mirror, race: race, now: now)
            } catch {
                return .failed(.network(url: mirror.remote.url, message: error.message, failure: error.failure))
            }
        }
        return nil
    }

    /// A stream's next pieces, in file order, while they fit in its window:
    /// the connections fetch just ahead of the reader, and when the reader
    /// is behind, nothing more is planned until it makes room. Near the end
    /// the pieces shrink (to the minimum split): the last ones, in flight
    /// together, are small, so the reader is not left with the burst of all
    /// of them at once after the last byte arrives.
    func planAhead() {
        loop.assertOnLoopThread()
        guard let window, !unplanned.isEmpty else { return }
        let limit = window.limit
        while queue.count < connectionLimit, let next = unplanned.ranges.first {
            let tapered = max(settings.minimumSplit, unplanned.byteCount / Int64(2 * connectionLimit))
            let piece = ByteRange(next.start, next.start + min(next.count, streamPiece, tapered))
            guard piece.end <= limit else {
                window.wantRoom()
                return
            }
            unplanned.remove(piece)
            queue.append(Piece(range: piece))
        }
    }

    /// What of `missing` the first split gets: all but the end reserve
    /// (kept in `unplanned`). Each reserved piece costs a request's wait, so
    /// the reserve is kept only from near servers: a distant server's pieces
    /// end no closer for it (the latency scenario, 300 ms a request, took
    /// 2.9 s with one against 2.2 s without). While a server's wait is not
    /// known yet (a resume sends no opening request to time), the reserve is
    /// kept until the first requests tell (`settleEndReserve`). It is sized
    /// for every connection of the run, not only those free when the plan is
    /// made: a list's file gains connections as the others end (bulk-mixed's
    /// large file starts on one and ends on 16).
    func keepEndReserve(of missing: RangeSet) -> RangeSet {
        let waits = mirrors.map { loop.firstByteDelay(from: $0.server) }
        guard !waits.contains(where: { $0.map { $0 >= Opening.distantFirstByte } ?? false }) else { return missing }
        unplanned = planner.endReserve(of: missing)
        endReservePending = waits.contains(nil) && !unplanned.isEmpty
        var rest = missing
        for range in unplanned.ranges { rest.remove(range) }
        return rest
    }

    /// Once every running request has its first byte: a reserve kept from a
    /// server that answered none of them within `Opening.distantFirstByte`
    /// (the fastest answer counts: at a run's start the loop sets up every
    /// connection in one turn, and the last ones wait for the others) goes
    /// to the queue, where the first free connection takes it. From a near
    /// server it stays: a download cut in the middle leaves its reserve a
    /// hole of its own at the end, which the resume's first split would
    /// otherwise hand to one connection for the others to steal from, and
    /// against nginx's bursty pacing each cut wastes the burst in flight
    /// (resume-kill-bursty served 1.013 of the file). `now`: a free
    /// connection wants the reserve before every first answer came (an
    /// unthrottled piece can end first): decided on the answers so far.
    func settleEndReserve(now: Bool = false) {
        guard endReservePending else { return }
        guard
            now
                || connections.allSatisfy({ !$0.isBusy || $0.hasDelivered })
                    && mirrors.contains(where: { $0.fastestFirstByte != nil })
        else { return }
        endReservePending = false
        // A dropped mirror gets no reserved piece: its wait has no say.
        guard mirrors.contains(where: { $0.isUsable && ($0.fastestFirstByte ?? 0) >= Opening.distantFirstByte })
        else { return }
        queue.append(contentsOf: unplanned.ranges.map { Piece(range: $0) })
        unplanned = RangeSet()
    }

    /// Gives back the slots no transfer runs on any more, so other files of
    /// the loop can use them: called whenever a transfer ends, so that
    /// slotsHeld == busy between turns.
    func returnSlots() {
        loop.assertOnLoopThread()
        let unused = slotsHeld - connections.count(where: \.isBusy)
        guard unused > 0 else { return }
        loop.giveSlots(unused)
        slotsHeld -= unused
    }

    /// The mirror for a connection about to start: where the placement
    /// wants more connections, among usable mirrors whose host is below its cap.
    /// `avoiding`: mirrors the next piece should not come from, passed
    /// over while another has room.
    private func chooseMirror(now: Double, avoiding: [Int] = []) -> Mirror? {
        let observations = placementObservations(now: now)
        if !avoiding.isEmpty {
            var others = observations
            for index in avoiding { others[index].room = 0 }
            if let other = placement.choose(others) { return mirrors[other] }
        }
        return placement.choose(observations).map { mirrors[$0] }
    }

    /// The mirrors the first ready queued piece should not come from
    /// (`Piece.avoid`): it was bad from them.
    private func avoidedByNextPiece(now: Double) -> [Int] {
        queue.first { $0.notBefore <= now }?.avoid ?? []
    }

    /// What the placement needs of each mirror: its connections, its total
    /// over the last window (once that many connections delivered for a
    /// whole window) and its room under the per-host cap.
    func placementObservations(now: Double) -> [MirrorPlacement.Observation] {
        var perHost: [String: Int] = [:]
        for mirror in mirrors { perHost[mirror.host, default: 0] += mirror.activeConnections }
        return mirrors.map { mirror in
            let measured = mirror.activeConnections > 0 && now - mirror.steadySince >= Self.placementWindow
            var room = mirror.isUsable ? max(0, settings.maxPerHost - perHost[mirror.host, default: 0]) : 0
            // A mirror on trial fetches one piece at a time, each checked before the next.
            if onTrial(mirror) {
                room = mirror.activeConnections == 0 && !mirror.awaitingVerdict ? min(room, 1) : 0
            }
            let total = measured ? total(of: mirror, now: now) : nil
            return MirrorPlacement.Observation(
                connections: mirror.activeConnections, rate: total?.rate, room: room, bounded: total?.exact == false)
        }
    }

    /// A mirror's bytes per second for the placement: over all the time its
    /// connections have delivered at this count (up to
    /// `longestPlacementWindow`) once that spans its pauses twice; before
    /// that, the sum of its transfers' rates since their first bytes, which
    /// is not `exact` (an upper bound) while one of them has not run twice
    /// its longest pause. A fixed tenth of a second saw a bursty mirror
    /// (nginx: 2 MiB at once, then a sleep) at its burst's speed or at zero,
    /// and the placement moved connections to an 8 MiB/s mirror it had
    /// measured at 0 with 3.
    private func total(of mirror: Mirror, now: Double) -> (rate: Double, exact: Bool)? {
        let steady = now - mirror.steadySince
        if steady >= min(Self.longestPlacementWindow, 2 * mirror.pause.seconds),
            let rate = mirror.meter.rate(since: max(mirror.steadySince, now - Self.longestPlacementWindow))
        {
            return (rate, true)
        }
        var sum = 0.0
        var exact = true
        for connection in connections where connection.isBusy && connection.mirror === mirror {
            guard let average = connection.averageRate(now: now) else { return nil }
            sum += average.rate
            exact = exact && average.exact
        }
        return (sum, exact)
    }

    /// Measures every mirror's total and carries out the placement's moves:
    /// a moved transfer stops where it is (its range goes back to the queue)
    /// and its connection starts on the recipient.
    func placeConnections(now: Double) {
        loop.assertOnLoopThread()
        guard mirrors.count > 1, now - lastPlacement >= 0.01 else { return }
        lastPlacement = now
        for mirror in mirrors {
            let running = connections.filter { $0.isBusy && $0.mirror === mirror }
            mirror.meter.add(bytes: running.reduce(mirror.bytes) { $0 + $1.transferBytes }, at: now)
            mirror.pause.note(running, now: now)
            // A window counts from when this many connections all deliver.
            if running.count != mirror.measuredConnections || !running.allSatisfy(\.hasDelivered) {
                mirror.steadySince = now
                mirror.measuredConnections = running.count
            }
        }
        let moves = placement.update(placementObservations(now: now), worthMoving: worthMoving(now: now))
        for move in moves {
            let donor = mirrors[move.from]
            let moving = connections.filter { $0.isBusy && $0.mirror === donor && $0.race == nil }
                .sorted { ($0.remaining?.count ?? 0) > ($1.remaining?.count ?? 0) }
                .prefix(move.count)
            // A transfer about to finish is left to finish: the placement's
            // targets send its connection to the recipient next anyway.
            for connection in moving where !finishesSoon(connection, now: now) {
                cancel(connection, reason: "moved to another mirror", requeue: true, now: now)
            }
            onEvent(
                .transfer(
                    .connectionsMoved(from: donor.remote.url, to: mirrors[move.to].remote.url, count: moving.count)))
        }
    }

    /// True when `connection`'s transfer ends sooner than a new request could deliver.
    private func finishesSoon(_ connection: Connection, now: Double) -> Bool {
        guard let remaining = connection.remaining, let rate = connection.rate(now: now), rate > 0 else { return false }
        return Double(remaining.count) / rate < 2 * setupDelay
    }

    /// True while enough is left that a move pays back its new requests:
    /// two moves' worth of time (a new request and a measurement each).
    private func worthMoving(now: Double) -> Bool {
        guard let size else { return false }
        let rate = mirrors.map(\.meter.rate).reduce(0, +)
        guard rate > 0 else { return true }
        return Double(size - currentlyDone) / rate > 2 * (2 * setupDelay + Self.placementWindow)
    }

    /// Seconds over which a mirror's total is measured for the placement:
    /// short enough that the placement settles within a fraction of a
    /// second (a slow start costs the whole gain), long enough to measure.
    static let placementWindow = 0.1
    /// The longest span a mirror's total is measured over: a slow bursty
    /// mirror's pauses (2 MiB at 2 MiB/s: a second) spanned twice.
    static let longestPlacementWindow = 2.0

    /// A mirror's bytes per second per connection, for a transfer with no
    /// rate of its own yet: its delivering transfers' recent rates, else its
    /// finished transfers' average; nil before any data. A silent transfer
    /// (rate 0) is left out: it tells that its own request stalled, not that
    /// a new one will.
    func measuredRate(of mirror: Mirror, now: Double) -> Double? {
        let live = connections.filter { $0.isBusy && $0.mirror === mirror }
            .compactMap { $0.rate(now: now) }.filter { $0 > 0 }
        if !live.isEmpty { return live.reduce(0, +) / Double(live.count) }
        return mirror.ratePerConnection
    }

    /// Where a free connection may find its next piece now, in order (`PieceSource.order`).
    func pieceSources(now: Double) -> [PieceSource] {
        PieceSource.order(
            notBefore: queue.map(\.notBefore), holding: queue.map(\.holdsOthers), now: now, plain: plain,
            reserve: window == nil && !unplanned.isEmpty, running: connections.contains(where: \.isBusy))
    }

    /// The next piece for a connection to `mirror` that fetched at
    /// `thiefRate` last (nil: a new one), from the first of `pieceSources`
    /// that has one.
    func nextPiece(thiefRate: Double?, for mirror: Mirror? = nil, now: Double) -> (Piece, Race?)? {
        for source in pieceSources(now: now) {
            switch source {
            case let .queued(index):
                guard let pick = queuedPiece(from: index, for: mirror, now: now) else { return nil }
                return (queue.remove(at: pick), nil)
            case .steal:
                if let stolen = steal(thiefRate: thiefRate, now: now) { return (stolen, nil) }
            case .reserve:
                settleEndReserve(now: true)
                // Pieces refused beyond a server's limit may wait in the queue.
                if let ready = queue.firstIndex(where: { $0.notBefore <= now }),
                    let pick = queuedPiece(from: ready, for: mirror, now: now)
                {
                    return (queue.remove(at: pick), nil)
                }
                if let reserved = planner.reservedPiece(from: unplanned) {
                    unplanned.remove(reserved)
                    return (Piece(range: reserved), nil)
                }
            case .race:
                return race(thiefRate: thiefRate, now: now)
            }
        }
        return nil
    }

    /// The first ready queued piece from `first` on that `mirror` may
    /// fetch: not one it served bad (`Piece.avoid`) while a usable mirror
    /// that did not is left. Nil: every ready piece waits for another mirror.
    private func queuedPiece(from first: Int, for mirror: Mirror?, now: Double) -> Int? {
        guard let mirror else { return first }
        for index in first..<queue.count where queue[index].notBefore <= now {
            let avoid = queue[index].avoid
            if avoid.isEmpty || !avoid.contains(mirror.index)
                || !mirrors.contains(where: { $0.isUsable && !avoid.contains($0.index) })
            {
                return index
            }
        }
        return nil
    }

    /// Running transfers that may be cut or raced, with the rate to plan with:
    /// measured over the last second (0 when silent that long), else 0 for a
    /// request still without a byte long after it should have had one (a
    /// request never answered is raced, not left to the stall timeout), else
    /// the mirror's per-connection rate, nil while nothing is known.
    /// A stream's reader waits for the lowest bytes alone: only the transfer
    /// at the head of its window is cut or raced (cutting the others would
    /// bring the reader nothing sooner, and cost their connections).
    private func candidates(now: Double) -> [(connection: Connection, remaining: ByteRange, rate: Double?)] {
        func candidate(_ connection: Connection) -> (connection: Connection, remaining: ByteRange, rate: Double?)? {
            guard connection.race == nil, !connection.isRechecking, let remaining = connection.remaining else {
                return nil
            }
            let rate =
                connection.rate(now: now)
                ?? (hasStalled(connection, now: now) ? 0 : connection.mirror.flatMap { measuredRate(of: $0, now: now) })
            return (connection, remaining, rate)
        }
        guard window != nil else { return connections.compactMap(candidate) }
        // The head counts even while raced: then nothing else is a candidate.
        let head = connections.filter { $0.remaining != nil }.min { $0.remaining!.start < $1.remaining!.start }
        return head.flatMap(candidate).map { [$0] } ?? []
    }

    /// The end of the piece that will take longest to finish, cut so that
    /// victim and thief finish together. A victim is judged by its
    /// candidate rate (`candidates`); one with none at all is assumed to run
    /// like the thief did on its last piece.
    private func steal(thiefRate lastRate: Double?, now: Double) -> Piece? {
        let running = candidates(now: now)
        let known = running.compactMap(\.rate).filter { $0 > 0 }.sorted()
        let thiefRate = lastRate ?? (known.isEmpty ? nil : known[known.count / 2])
        func secondsLeft(_ candidate: (connection: Connection, remaining: ByteRange, rate: Double?)) -> Double {
            guard let rate = candidate.rate ?? thiefRate else { return Double(candidate.remaining.count) }
            return rate > 0 ? Double(candidate.remaining.count) / rate : .infinity
        }
        guard let victim = running.max(by: { secondsLeft($0) < secondsLeft($1) }),
            let stolen = planner.steal(
                from: victim.remaining, victimRate: victim.rate, thiefRate: thiefRate,
                setupDelay: setupDelay)
        else { return nil }
        // Taking all that is left lets the victim's connection go, so it is
        // done only on the victim's own evidence: a rate of its own (it
        // delivered, then fell silent). A transfer started in this call has
        // none, and two free connections would otherwise hand one range back
        // and forth without end (a list run spun at 100% CPU, its last
        // requests never sent, once its mirror's only measured transfer fell
        // silent and every fresh one was judged by it). A request still
        // waiting for its first byte is raced instead, never let go: from a
        // server that answers in 2 s, before its wait is learned, each
        // request taken over would be cancelled just before its answer, and
        // its thief's in turn.
        if stolen.start == victim.remaining.start, victim.connection.rate(now: now) == nil { return nil }
        victim.connection.stop(at: stolen.start)
        onEvent(.transfer(.stolen(from: victim.connection.id, range: stolen)))
        if victim.connection.remaining == nil {
            cancel(victim.connection, reason: "its whole remainder was taken over", requeue: false, now: now)
        }
        return Piece(range: stolen)
    }

    /// True when `connection` has had no byte for longer than a new request
    /// takes to deliver, many times over: its transfer is stuck, whatever its
    /// mirror's others do.
    private func hasStalled(_ connection: Connection, now: Double) -> Bool {
        connection.silence(now: now) > max(1, 4 * setupDelay)
    }

    /// The end game: a piece too small to cut whose connection is far slower
    /// than a fresh request would be is fetched by a free connection as well.
    private func race(thiefRate lastRate: Double?, now: Double) -> (Piece, Race)? {
        let running = candidates(now: now)
        let known = running.compactMap(\.rate).filter { $0 > 0 }.sorted()
        guard let thiefRate = lastRate ?? (known.isEmpty ? nil : known[known.count / 2]) else { return nil }
        let slow = running.compactMap { candidate -> (Connection, ByteRange, Double)? in
            guard let rate = candidate.rate,
                planner.shouldRace(candidate.remaining, victimRate: rate, thiefRate: thiefRate, setupDelay: setupDelay)
            else { return nil }
            return (candidate.connection, candidate.remaining, rate)
        }
        guard let (victim, remaining, _) = slow.max(by: { $0.1.count < $1.1.count }) else { return nil }
        let race = Race(frontier: remaining.start)
        victim.join(race)
        return (Piece(range: remaining), race)
    }
}
