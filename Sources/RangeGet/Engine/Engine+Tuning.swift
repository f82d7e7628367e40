// The connection count learned as the download runs (`-n auto`,
// ConnectionTuner): the engine measures the total over windows in which
// every running transfer delivers, and carries out the count the tuner asks
// for. More connections start by stealing from the running ones
// (startIdleConnections); fewer stop the transfers with most left, whose
// rest goes back to the queue.

nonisolated(unsafe) var lastDebug = 0.0
extension Engine {
    /// Feeds the tuner a total when the last window (`ConnectionTuner.window`)
    /// seconds had its count of transfers all delivering, and carries out
    /// its count.
    func tuneConnections(now: Double) {
        loop.assertOnLoopThread()
        guard var tuner, now - lastTuning >= 0.01 else { return }
        lastTuning = now
        let running = connections.filter(\.isBusy)
        tuningMeter.add(bytes: bytesReceived, at: now)
        tuningPause.note(running, now: now)
        // A window counts from when this many transfers all deliver.
        if running.count != tuningCount || !running.allSatisfy(\.hasDelivered) {
            tuningSince = now
            tuningCount = running.count
        }
        let window = ConnectionTuner.window(longestGap: tuningPause.seconds)
        let steady = running.count == tuner.target && now - tuningSince >= window
        tuner.update(
            rate: steady ? tuningMeter.rate(since: now - window) : nil, now: now,
            worthProbing: worthProbing(window: window))
        self.tuner = tuner
        apply(tuner, now: now)
    }

    /// The server refused a connection while others of its mirror ran: the
    /// count stays at those from now on (fixed counts drop to them too).
    func connectionRefused(now: Double) {
        let running = connections.count(where: \.isBusy)
        guard var tuner else {
            connectionLimit = max(1, running)
            return
        }
        // Refused with nothing else running: a busy server, not a limit.
        guard running > 0 else { return }
        tuner.refused(running: running)
        self.tuner = tuner
        apply(tuner, now: now)
    }

    /// Sets the connection limit to the tuner's count, stopping the
    /// transfers beyond it (those with most left: their rest goes back to
    /// the queue as one piece).
    private func apply(_ tuner: ConnectionTuner, now: Double) {
        guard tuner.target != connectionLimit else { return }
        connectionLimit = tuner.target
        onEvent(.transfer(.connectionCountChanged(count: tuner.target, reason: tuner.reason)))
        let running = connections.filter { $0.isBusy && $0.race == nil && !$0.isRechecking }
        let excess = connections.count(where: \.isBusy) - connectionLimit
        guard excess > 0 else { return }
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
