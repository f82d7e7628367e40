// What happens to a finished transfer: its bytes are recorded, and the rest
// of its piece goes back to the queue, to a retry after a backoff, or (when
// the failure says so) the mirror is dropped or the run ends with an outcome
// the download acts on (the file changed, ranges do not work, a signed URL
// expired), as RetryPolicy decides. Which libcurl errors are worth another
// attempt is `CurlError.classification`.

extension Engine {
    /// What every transfer's end leaves, finished or cancelled: its slots
    /// back, its place at the server held a moment, what it wrote, and the
    /// events that say so (its timing, then `pieceFinished`).
    func recordEnd(of finished: FinishedTransfer, on connection: Connection, now: Double) {
        returnSlots()
        notePlaceHeld(by: finished, now: now)
        recordWritten(finished.written, by: finished.mirror)
        var complete = false
        if case .complete = finished.end { complete = true }
        onEvent(.transfer(.transferTimed(connection: connection.id, timing: finished.timing)))
        onEvent(.transfer(.pieceFinished(connection: connection.id, written: finished.written, complete: complete)))
    }

    /// Records what a finished transfer wrote and decides what happens to the rest.
    func settle(_ connection: Connection, _ finished: FinishedTransfer, now: Double) -> EngineOutcome? {
        loop.assertOnLoopThread()
        recordEnd(of: finished, on: connection, now: now)
        let mirror = finished.mirror
        switch finished.end {
        case .complete:
            mirror.consecutiveFailures = 0
            mirror.refusalsInARow = 0
            sizeDisagreements = 0
            if let race = finished.race {
                for other in connections where other !== connection && other.race === race && other.isBusy {
                    cancel(other, reason: "lost the race", requeue: false, now: now)
                }
            }
            return nil
        case let .localFailure(error):
            return .failed(.io(error))
        case let .incomplete(reason, cause, rejection):
            if isStopping {
                if !partnerIsBusy(connection, in: finished.race) {
                    requeue(finished.piece, from: finished.written.end, failures: 0, notBefore: now)
                }
                return nil
            }
            var finished = finished
            if case .overlong? = rejection {
                distrust(finished, of: connection, now: now)
                finished.race = nil
            }
            return retry(
                finished, on: connection.id, reason: reason, cause: cause, rejection: rejection, now: now,
                partnerBusy: partnerIsBusy(connection, in: finished.race), sentWithinLimit: connection.sentWithinLimit)
        }
    }

    /// Counts a failed transfer against its mirror and piece, and carries
    /// out what `RetryPolicy` decides: drop the mirror, fewer connections,
    /// requeue the rest of the piece after a wait, or end the run.
    func retry(
        _ finished: FinishedTransfer, on connection: Int, reason: String, cause: RetryCause, rejection: Rejection?,
        now: Double, partnerBusy: Bool, sentWithinLimit: Bool = false
    ) -> EngineOutcome? {
        loop.assertOnLoopThread()
        let mirror = finished.mirror
        let piece = finished.piece
        let progressed = !finished.written.isEmpty && finished.written.end > piece.range.start
        let othersRunning = connections.contains { $0.isBusy && $0.mirror === mirror && $0.id != connection }
        let beyondLimit = RetryPolicy.refusedBeyondLimit(
            rejection, mirrorHasOtherTransfers: othersRunning, plain: plain)
        mirror.errors += 1
        if beyondLimit {
            mirror.refusalsInARow += 1
        } else {
            mirror.consecutiveFailures = progressed ? 0 : mirror.consecutiveFailures + 1
            if progressed { mirror.refusalsInARow = 0 }
        }
        retries += 1
        if case let .otherTotal(total)? = rejection {
            sizeDisagreements = lastOtherTotal == total ? sizeDisagreements + 1 : 1
            lastOtherTotal = total
        } else if progressed {
            sizeDisagreements = 0
        }
        let failure = RetryPolicy.Failure(
            cause: cause, reason: reason, rejection: rejection, curlError: finished.curlError, progressed: progressed,
            plain: plain, plainRestarts: plainRestarts, pieceFailures: piece.failures,
            mirrorFailuresInARow: mirror.consecutiveFailures, mirrorUsable: mirror.isUsable,
            otherMirrors: mirrors.count { $0.isUsable && $0 !== mirror },
            mirrorHasOtherTransfers: othersRunning, refusalsInARow: mirror.refusalsInARow,
            sentWithinLimit: sentWithinLimit,
            partnerBusy: partnerBusy, redirected: mirror.remote.effectiveURL != mirror.remote.url,
            refreshable: settings.refreshURL != nil, mirrorServed: served(by: mirror),
            sizeDisagreementsReached: sizeDisagreements >= (unprobed ? 1 : Self.sizeDisagreementLimit))
        let decision = RetryPolicy(settings: settings, url: mirror.remote.url, size: size).decide(failure)
        if decision.fewerConnections { connectionRefused(now: now) }
        if decision.restartCounted { plainRestarts += 1 }
        if let why = decision.dropMirror, let outcome = drop(mirror, because: why, now: now) { return outcome }
        switch decision.verdict {
        case let .requeue(delay, failures):
            onEvent(
                .retry(
                    connection: connection, cause: cause, reason: reason, delay: delay, attempt: failures + 1,
                    attempts: settings.retries + 1))
            if plain { written = RangeSet() }
            // A piece refused beyond the limit waits without holding back
            // the connections the server took: they go on stealing and
            // taking the end reserve meanwhile.
            requeue(
                piece, from: plain ? piece.range.start : max(finished.written.end, finished.race?.frontier ?? 0),
                failures: failures, notBefore: now + delay, holdsOthers: !beyondLimit)
            return nil
        case .none:
            return nil
        case .expired:
            if !partnerBusy { requeue(piece, from: finished.written.end, failures: 0, notBefore: now) }
            return .expired(index: mirror.index, reason: reason)
        case let .remoteChanged(reason):
            return .remoteChanged(reason)
        case let .rangesUnsupported(reason):
            return .rangesUnsupported(reason)
        case let .fail(error):
            return .failed(error)
        }
    }

    /// Credits each mirror with the bytes it served this download before this
    /// run (`served`, by the URL given), so that a refusal after them reads
    /// as a signed link's expiry (RetryPolicy rule 4). Before the run starts.
    func credit(served: [String: Int64]) {
        for mirror in mirrors { mirror.servedBefore = served[mirror.remote.url] ?? 0 }
    }

    /// Bytes `mirror` served this download: before this run, in this run's
    /// finished transfers, and so far in its running ones.
    func served(by mirror: Mirror) -> Int64 {
        connections.reduce(mirror.bytes + mirror.servedBefore) { total, connection in
            total + (connection.isBusy && connection.mirror === mirror ? connection.transferBytes : 0)
        }
    }

    /// Answers in a row naming the same other size before the size counts as changed.
    static let sizeDisagreementLimit = 3

    /// Stops using `mirror`; its transfers' ranges go back to the queue.
    func drop(_ mirror: Mirror, because reason: String, now: Double) -> EngineOutcome? {
        loop.assertOnLoopThread()
        mirror.droppedBecause = reason
        placement.drop(mirror.index)
        onEvent(.mirrorDropped(url: mirror.remote.url, reason: reason))
        for connection in connections where connection.isBusy && connection.mirror === mirror {
            cancel(connection, reason: "mirror dropped", requeue: true, now: now)
        }
        for index in queue.indices { queue[index].failures = 0 }
        guard mirrors.contains(where: \.isUsable) else {
            return .failed(.server(url: mirror.remote.url, message: "no mirror left: \(reason)"))
        }
        return nil
    }

    /// A transfer's answer ran past its Content-Range: none of its piece
    /// counts, nor, in a race, the bytes its partners skipped because it had
    /// written them. The partners stop, and the piece is fetched again. No
    /// resume may trust those bytes either, whenever a kill comes: a running
    /// partner gives them up before its range is logged, one that ended
    /// earlier has its logged range cut back in the journal, and a manifest
    /// a checkpoint saved with them is saved again without them, all before
    /// the transfers go on.
    func distrust(_ finished: FinishedTransfer, of connection: Connection, now: Double) {
        loop.assertOnLoopThread()
        let untrusted = finished.piece.range
        if let race = finished.race {
            for other in connections where other !== connection && other.race === race && other.isBusy {
                cancel(
                    other, reason: "its race partner's answer was not trusted", requeue: false,
                    distrustingFrom: race.start, now: now)
            }
        }
        untrust(untrusted)
    }

    /// A transfer cut short at a server with a known limit keeps its place
    /// there a moment (`placesHeldUntil`).
    func notePlaceHeld(by finished: FinishedTransfer, now: Double) {
        if finished.cutShort, learnedLimit != nil { placesHeldUntil.append(now + RetryPolicy.limitGrace) }
    }

    func partnerIsBusy(_ connection: Connection, in race: Race?) -> Bool {
        guard let race else { return false }
        return connections.contains { $0 !== connection && $0.race === race && $0.isBusy }
    }

    /// Queues the rest of `piece` from `start`; `avoiding`: mirrors that
    /// should not fetch it while another can (they served it bad).
    /// `holdsOthers`: while it waits, nothing else starts (`PieceSource`).
    func requeue(
        _ piece: Piece, from start: Int64, failures: Int, notBefore: Double, avoiding: [Int]? = nil,
        holdsOthers: Bool = true
    ) {
        loop.assertOnLoopThread()
        guard start < piece.range.end else { return }
        let rest = Piece(
            range: ByteRange(start, piece.range.end), failures: failures, notBefore: notBefore,
            avoid: avoiding ?? piece.avoid, recheck: piece.recheck, holdsOthers: holdsOthers)
        let index = queue.firstIndex(where: { $0.range.start > start }) ?? queue.endIndex
        queue.insert(rest, at: index)
    }
}
