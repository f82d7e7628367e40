// Watching the running transfers: stalls, progress reports, and the
// checkpoints that make the manifest durable (with writeback in between).

import CCurl

extension Engine {
    /// Samples `connection`'s progress and, at its first byte, how long
    /// its request waited; returns the seconds since its last byte.
    @discardableResult
    func sample(_ connection: Connection, now: Double) -> Double {
        let (idle, timeToFirstByte) = connection.sample(now: now)
        if let timeToFirstByte {
            setupDelay = 0.8 * setupDelay + 0.2 * timeToFirstByte
            if let mirror = connection.mirror {
                loop.noteFirstByte(after: timeToFirstByte, from: mirror.server)
                mirror.fastestFirstByte = min(mirror.fastestFirstByte ?? .infinity, timeToFirstByte)
            }
        }
        return idle
    }

    /// Samples every transfer's progress; abandons those silent for the stall timeout.
    func watchTransfers(now: Double) -> EngineOutcome? {
        loop.assertOnLoopThread()
        for connection in connections where connection.isBusy {
            connection.resumeIfAllowed()
            if connection.isPaused { continue }
            let idle = sample(connection, now: now)
            guard idle > settings.transfer.stallTimeout else { continue }
            let reason = "no data for \(Rejection.duration(settings.transfer.stallTimeout)) (stalled)"
            loop.remove(connection.easy)
            // A stall is the timeout libcurl's low-speed limit would report.
            let stalled = connection.abandon(
                reason: reason, cause: .stall,
                error: CurlError(CURLE_OPERATION_TIMEDOUT, message: reason), now: now)
            if let outcome = settle(connection, stalled, now: now) {
                return outcome
            }
        }
        return nil
    }

    /// Bytes done: durable before this run plus everything written since.
    var currentlyDone: Int64 {
        writtenSnapshot().byteCount
    }

    func report(now: Double, force: Bool) {
        loop.assertOnLoopThread()
        guard force || now - lastReport >= 0.1 else { return }
        lastReport = now
        let completed = writtenSnapshot()
        let done = completed.byteCount
        meter.add(bytes: done, at: now)
        let running = connections.filter(\.isBusy)
        onEvent(
            .progress(
                DownloadProgress(
                    bytesDone: done, totalBytes: size, bytesPerSecond: meter.rate,
                    activeConnections: running.count, completed: completed,
                    inFlight: connections.compactMap(\.remaining),
                    transfers: running.map { TransferProgress(connection: $0.id, bytes: $0.transferBytes) })))
    }

    /// What is written now: finished ranges plus each running transfer's prefix.
    func writtenSnapshot() -> RangeSet {
        var snapshot = written
        for connection in connections {
            if let range = connection.writtenSoFar { snapshot.insert(range) }
        }
        return snapshot
    }

    /// Starts durable saves, and writeback in between, when due.
    func checkpointIfDue(now: Double) {
        loop.assertOnLoopThread()
        guard let checkpointer else { return }
        if now - lastCheckpoint >= settings.checkpointInterval {
            // A writeback still running makes this wait for the next loop turn.
            if checkpointer.saveInBackground(writtenSnapshot(), verified: pieceCheck?.verified) {
                lastCheckpoint = now
                lastWriteback = now
            }
        } else if now - lastWriteback >= Self.writebackInterval {
            lastWriteback = now
            checkpointer.startWriteback()
        }
    }

    /// Reports the last durable background save, if one finished since the
    /// last report (events come from this thread only), and drops what it
    /// covers from the journal.
    func reportSavedCheckpoint() {
        guard let durable = checkpointer?.takeSaved() else { return }
        journal?.forget(durable)
        onEvent(.transfer(.checkpoint(bytesDurable: durable.byteCount)))
    }

    /// Saves the manifest on the way out; the error if the disk refused.
    func saveFinalCheckpoint() -> IOError? {
        guard let checkpointer else { return nil }
        do {
            try checkpointer.saveNow(written, verified: pieceCheck?.verified)
            journal?.forget(written)
            onEvent(.transfer(.checkpoint(bytesDurable: written.byteCount)))
            return nil
        } catch {
            reportSavedCheckpoint()
            return error
        }
    }
}
