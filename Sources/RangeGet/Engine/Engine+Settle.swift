// What happens to a finished transfer: its bytes are recorded, and the rest
// of its piece goes back to the queue, to a retry after a backoff, or (when
// the failure says so) the mirror is dropped or the run ends with an outcome
// the download acts on (the file changed, ranges do not work, a signed URL
// expired). The retry policy for libcurl's errors is `CurlError.classification`.

extension Engine {
    /// Records what a finished transfer wrote and decides what happens to the rest.
    func settle(_ connection: Connection, _ finished: FinishedTransfer, now: Double) -> EngineOutcome? {
        returnSlots()
        written.insert(finished.written)
        var complete = false
        if case .complete = finished.end { complete = true }
        onEvent(.transfer(.pieceFinished(connection: connection.id, written: finished.written, complete: complete)))
        let mirror = finished.mirror
        switch finished.end {
        case .complete:
            mirror.consecutiveFailures = 0
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
            return retry(finished, on: connection.id, reason: reason, cause: cause, rejection: rejection, now: now,
                         partnerBusy: partnerIsBusy(connection, in: finished.race))
        }
    }

    func retry(
        _ finished: FinishedTransfer, on connection: Int, reason: String, cause: RetryCause, rejection: Rejection?,
        now: Double,
        partnerBusy: Bool
    ) -> EngineOutcome? {
        let mirror = finished.mirror
        let piece = finished.piece
        let progressed = !finished.written.isEmpty && finished.written.end > piece.range.start
        mirror.errors += 1
        mirror.consecutiveFailures = progressed ? 0 : mirror.consecutiveFailures + 1
        retries += 1
        let others = mirrors.filter { $0.isUsable && $0 !== mirror }.count
        if case let .otherTotal(total)? = rejection {
            sizeDisagreements = lastOtherTotal == total ? sizeDisagreements + 1 : 1
            lastOtherTotal = total
            if sizeDisagreements >= (unprobed ? 1 : Self.sizeDisagreementLimit), others == 0 {
                return .remoteChanged("the server reports \(total) bytes in all, not \(size ?? 0)")
            }
        } else if progressed {
            sizeDisagreements = 0
        }
        switch rejection {
        case let .changed(detail)?:
            if others == 0 { return .remoteChanged(detail) }
            if let outcome = drop(mirror, because: "it serves another version of the file (\(detail))", now: now) {
                return outcome
            }
        case .rangeIgnored?, .encoded?:
            if others == 0 { return .rangesUnsupported(rejection!.description) }
            if let outcome = drop(mirror, because: rejection!.description, now: now) { return outcome }
        case let .status(code, _)? where code == 429 || code == 503:
            connectionLimit = max(1, connections.count(where: \.isBusy))
        // A redirect reaches here only when libcurl may not follow it (a header
        // that may carry a credential is set): resolving anew follows it by hand.
        case let .status(code, _)? where (code == 403 || code == 410) && mirror.remote.effectiveURL != mirror.remote.url,
             let .status(code, _)? where (300..<400).contains(code):
            if !partnerBusy { requeue(piece, from: finished.written.end, failures: 0, notBefore: now) }
            return .expired(index: mirror.index, reason: reason)
        default:
            break
        }
        // A curl error another attempt would only repeat (a certificate that
        // fails verification, a malformed URL: see `CurlError.classification`)
        // drops the mirror when others remain and otherwise ends the download now.
        let permanent = finished.curlError.map { !$0.isTransient } ?? false
        let retryable = !permanent && (rejection?.isTransient ?? true)
        if mirror.isUsable, others > 0, !retryable || mirror.consecutiveFailures >= Self.mirrorFailureLimit {
            if let outcome = drop(mirror, because: reason, now: now) { return outcome }
        }
        if permanent, mirror.isUsable, let curlError = finished.curlError {
            let message = "\(reason) (not retried: another attempt would fail the same way)"
            return .failed(.network(url: mirror.remote.url, message: message, failure: curlError.failure))
        }
        if partnerBusy { return nil }
        // A plain stream starts over from byte 0 after any failure, so a cut
        // that made progress brings it no nearer the end: every restart counts.
        if plain { plainRestarts += 1 }
        var failures = plain ? plainRestarts : progressed ? 1 : piece.failures + 1
        let exhausted = failures > settings.retries || (!retryable && failures > settings.retries / 2)
        // A mirror that used up the piece's attempts gives the piece to the
        // others, and its failures are not held against the piece there.
        if exhausted, mirror.isUsable, others > 0, let outcome = drop(mirror, because: reason, now: now) {
            return outcome
        }
        if !mirror.isUsable { failures = 0 }
        if failures > 0, exhausted {
            let restarts = plain ? " of one stream from byte 0 (the server serves no ranges)" : ""
            let message = "giving up after \(failures) attempts\(restarts): \(reason)"
            // The last attempt decides: the network (a refused connection,
            // a stall, ...) or the server's answer (a status, ...).
            if let failure = finished.curlError?.failure {
                return .failed(.network(url: mirror.remote.url, message: message, failure: failure))
            }
            var status: Int?
            if case let .status(code, _)? = rejection { status = code }
            return .failed(.server(url: mirror.remote.url, message: message, status: status))
        }
        // A cut that made progress is retried at once; backoff is for failures that got nowhere.
        var delay = progressed && !plain ? 0 : settings.backoff(failures: failures)
        if case let .status(code, retryAfter?)? = rejection {
            if retryAfter <= settings.longestRetryAfter {
                delay = max(delay, retryAfter)
            } else if mirror.isUsable,
                      !connections.contains(where: { $0.isBusy && $0.mirror === mirror && $0.id != connection }) {
                // Nothing else of this mirror works: waiting that long is no retry.
                let wait = Rejection.overlongWait(retryAfter, status: code, longest: settings.longestRetryAfter)
                if others > 0 {
                    if let outcome = drop(mirror, because: "it \(wait)", now: now) { return outcome }
                } else {
                    return .failed(.server(url: mirror.remote.url, message: "the server \(wait)", status: code))
                }
            }
            // Else an extra connection was refused: the mirror's connection
            // limit came down above, and its working connections take the piece.
        }
        if !mirror.isUsable { delay = 0 }
        onEvent(.retry(connection: connection, cause: cause, reason: reason, delay: delay, attempt: failures + 1,
                       attempts: settings.retries + 1))
        if plain { written = RangeSet() }
        requeue(piece, from: plain ? piece.range.start : max(finished.written.end, finished.race?.frontier ?? 0),
                failures: failures, notBefore: now + delay)
        return nil
    }

    /// Answers in a row naming the same other size before the size counts as changed.
    static let sizeDisagreementLimit = 3

    /// Failures in a row without progress before a mirror is dropped (while others remain).
    static let mirrorFailureLimit = 3

    /// Stops using `mirror`; its transfers' ranges go back to the queue.
    func drop(_ mirror: Mirror, because reason: String, now: Double) -> EngineOutcome? {
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
        let untrusted = finished.piece.range
        if let race = finished.race {
            for other in connections where other !== connection && other.race === race && other.isBusy {
                cancel(other, reason: "its race partner's answer was not trusted", requeue: false,
                       distrustingFrom: race.start, now: now)
            }
        }
        written.remove(untrusted)
        journal?.forget(RangeSet([untrusted]))
        checkpointer?.retract(untrusted)
    }

    func partnerIsBusy(_ connection: Connection, in race: Race?) -> Bool {
        guard let race else { return false }
        return connections.contains { $0 !== connection && $0.race === race && $0.isBusy }
    }

    func requeue(_ piece: Piece, from start: Int64, failures: Int, notBefore: Double) {
        guard start < piece.range.end else { return }
        let rest = Piece(range: ByteRange(start, piece.range.end), failures: failures, notBefore: notBefore)
        let index = queue.firstIndex(where: { $0.range.start > start }) ?? queue.endIndex
        queue.insert(rest, at: index)
    }
}
