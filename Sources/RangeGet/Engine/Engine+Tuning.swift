// The connection count learned as the download runs (`-n auto`,
// ConnectionTuner): the engine measures the total over windows in which
// every running transfer delivers, and carries out the count the tuner asks
// for. More connections start by stealing from the running ones
// (startIdleConnections); fewer stop the transfers with most left, whose
// rest goes back to the queue.

extension Engine {
    /// Feeds the tuner the total over the last window when its count of
    /// transfers delivered through it (on average: on loopback transfers
    /// end and steal all the time), with whether the loop was saturated,
    /// and carries out its count.
    func tuneConnections(now: Double) {
        loop.assertOnLoopThread()
        guard var tuner, now - lastTuning >= 0.01 else { return }
        let running = connections.filter(\.isBusy)
        let delivering = running.count(where: \.hasDelivered)
        if delivering >= mostDelivering.count || now - mostDelivering.at > 2 { mostDelivering = (delivering, now) }
        tuningDelivering += Int64(Double(delivering) * (now - lastTuning) * 1e6)
        lastTuning = now
        tuningMeter.add(bytes: bytesReceived, at: now)
        deliveringMeter.add(bytes: tuningDelivering, at: now)
        idleMeter.add(bytes: loop.idleMicroseconds, at: now)
        tuningPause.note(running, now: now)
        // A count is measured from when nearly all its transfers first
        // deliver together (new ones wait a round trip), then over windows in
        // which, on average, most deliver (on loopback transfers end and
        // steal all the time).
        if tuner.target != tuningCount {
            tuningCount = tuner.target
            tuningChanged = now
            tuningRamped = nil
        }
        if tuningRamped == nil, Double(delivering) >= (Self.rampedShare * Double(tuner.target)).rounded(.up) {
            tuningRamped = now
        }
        let window = ConnectionTuner.window(longestGap: tuningPause.seconds)
        // Measured from the latest sample a window back: a turn on loopback
        // can outlast the window.
        let averageDelivering = (deliveringMeter.rate(over: window) ?? 0) / 1e6
        // Idle less than a tenth of the window: the loop is the bottleneck,
        // and a window counts however many transfers it kept busy (on
        // loopback it rarely keeps them all: they end and steal).
        let saturated = (idleMeter.rate(over: window) ?? 1e6) < Self.saturatedIdle * 1e6
        let steady =
            now - tuningChanged >= window
            && (saturated
                || tuningRamped.map { now - $0 >= window } ?? false
                    && averageDelivering >= Self.steadyShare * Double(tuner.target))
        tuner.update(
            rate: steady ? tuningMeter.rate(over: window) : nil, saturated: saturated, window: window, now: now,
            worthProbing: worthProbing(window: window), worthShedding: worthShedding(window: window))
        self.tuner = tuner
        apply(tuner, now: now)
    }

    /// The share of the count that must deliver at once before it is
    /// measured, and on average over a window for its total to count.
    static let rampedShare = 0.85
    static let steadyShare = 0.85
    /// The share of a window the loop idles below which it is saturated.
    static let saturatedIdle = 0.1

    /// The server refused a connection while others of its mirror ran: the
    /// count stays at those from now on (fixed counts drop to them too).
    func connectionRefused(now: Double) {
        let running = connections.count(where: \.isBusy)
        defer { learnedLimit = min(learnedLimit ?? connectionLimit, connectionLimit) }
        guard var tuner else {
            connectionLimit = max(1, running)
            return
        }
        // Refused with nothing else running: a busy server, not a limit.
        guard running > 0 else { return }
        // As many as it served at once lately: the refusals of one burst
        // come in while accepted transfers end and start (a server taking 4
        // left -n auto at 3, 1.42x the wall of -n 4).
        tuner.refused(running: max(running, mostDelivering.count))
        self.tuner = tuner
        // Nothing is stopped: the requests beyond the limit are refused
        // anyway, and stopping one the server took (they look alike here)
        // cost a fresh request refused in its place and a second's wait.
        apply(tuner, now: now, shedding: false)
    }

    /// Sets the connection limit to the tuner's count, stopping the
    /// transfers beyond it (those with most left: their rest goes back to
    /// the queue as one piece).
    private func apply(_ tuner: ConnectionTuner, now: Double, shedding: Bool = true) {
        guard tuner.target != connectionLimit else { return }
        connectionLimit = tuner.target
        onEvent(.transfer(.connectionCountChanged(count: tuner.target, reason: tuner.reason)))
        let running = connections.filter { $0.isBusy && $0.race == nil && !$0.isRechecking }
        let excess = connections.count(where: \.isBusy) - connectionLimit
        guard shedding, excess > 0 else { return }
        let shed = running.sorted { ($0.remaining?.count ?? 0) > ($1.remaining?.count ?? 0) }.prefix(excess)
        for connection in shed {
            cancel(connection, reason: "fewer connections do as well", requeue: true, now: now)
        }
    }

    /// True while enough is left that a round of the tuner pays back its
    /// new requests: several windows at the present total.
    private func worthProbing(window: Double) -> Bool {
        guard let size else { return false }
        let rate = tuningMeter.rate
        guard rate > 0 else { return true }
        return Double(size - currentlyDone) / rate > 4 * (window + setupDelay)
    }

    /// True while fewer connections cost at most a tenth of the time left.
    /// A shed connection that turns out to have counted comes back a window
    /// and a request's round trip behind the others; its lost window is
    /// shared out at the end by steals, but where requests take long, a
    /// steal costs more than it saves and the download ends a round trip
    /// later (against a server 300 ms away, shedding 16 to 12 cost 0.45 s
    /// of a 3.9 s download: 1.12x the wall of -n 16).
    private func worthShedding(window: Double) -> Bool {
        guard let size else { return false }
        // The present total, not the window's: the first round comes while
        // the total is still ramping up.
        guard let rate = tuningMeter.rate(over: window), rate > 0 else { return true }
        let cost = setupDelay + window / 2
        return Double(size - currentlyDone) / rate > Self.sheddingPayback * cost
    }

    /// How many times a shed's cost the time left must be.
    static let sheddingPayback = 10.0

    /// How the count was chosen, for the result.
    var connectionCountReport: ConnectionCountReport {
        guard let tuner else {
            let peak = plain ? 1 : settings.connections
            let reason =
                plain
                ? "one stream: the server does not serve ranges"
                : connectionLimit < peak
                    ? "fixed at \(peak); the server refused more than \(connectionLimit)"
                    : "fixed at \(peak)"
            return ConnectionCountReport(automatic: false, settled: connectionLimit, peak: peak, reason: reason)
        }
        return ConnectionCountReport(
            automatic: true, settled: tuner.settled, peak: tuner.peak, reason: tuner.reason)
    }
}
