// RetryPolicy: what happens after a transfer failed, decided from facts
// alone, like OutcomePolicy after a run and Planner before one. The engine
// gathers the facts (the typed cause, what the mirror and the piece went
// through, whether other mirrors remain) and carries the decision out
// (drops the mirror, requeues the piece, ends the run); the rules are here,
// in order, each a row of RetryPolicyTests' table. A new rule is a change to
// this file and that table.
//
// The rules, in the order they are tried:
//  1. The same other total size, again and again, with no other mirror: the
//     file changed size.
//  2. The answer says the file changed, or ranges do not work: with no other
//     mirror that ends the run (start over, or one stream); else the mirror
//     is dropped.
//  3. 429 or 503: fewer connections at once from now on. Beside other
//     transfers of the mirror, that is the server's limit (`beyondLimit`):
//     not the piece's attempt, nor one of the mirror's failures in a row.
//  4. A signed link's expiry: a redirect libcurl may not follow, or 401, 403
//     or 410 from where a redirect led, or from a mirror that served bytes
//     when the URL can be refreshed: the URL expired, and the run ends to
//     renew it (once, however many connections see the refusal). A race's
//     duplicate that is refused only loses its race. With no way to renew
//     it, a mirror that served bytes and is now refused while none of its
//     other transfers runs is dropped while others remain, else the run
//     fails, saying it looks like an expired link (a refusal beside working
//     transfers is an extra connection turned away: rule 9).
//  5. A failure another attempt would repeat, or `mirrorFailureLimit`
//     failures in a row: the mirror is dropped while others remain.
//  6. A permanent libcurl failure on a mirror still in use ends the run.
//  7. A race partner still running takes the piece over: nothing to do.
//  8. Attempts used up: the mirror is dropped while others remain, else the
//     run fails.
//  9. Otherwise the piece waits and goes back to the queue: at once after a
//     cut that made progress, else the backoff; 429 without `Retry-After`
//     waits four times the backoff; a `Retry-After` within the limit is
//     waited; a longer one drops the mirror (or fails the run) when nothing
//     else of it works; a dropped mirror's piece goes at once to the others.
//     A piece refused beyond the server's limit goes to the connections
//     the server took (the count came down to them: an extra connection is
//     never sent again, which is how its Retry-After is honoured); refused
//     by a request sent within the limit the server had shown
//     (`slotNotYetFree`), it waits `limitGrace`, doubled for each refusal in
//     a row, up to what the server asked.

/// Decides what follows a failed transfer.
struct RetryPolicy {
    /// What the engine knows about a failed transfer.
    struct Failure {
        /// Why it failed.
        var cause: RetryCause
        /// The reason in words, for the messages.
        var reason: String
        /// The answer rangeget refused, when it refused one.
        var rejection: Rejection?
        /// The libcurl failure, when libcurl reported one.
        var curlError: CurlError?
        /// True when it wrote bytes of its piece before failing.
        var progressed: Bool
        /// True for a plain stream (no ranges), which restarts from byte 0.
        var plain: Bool
        /// Restarts of a plain stream so far, this one not counted.
        var plainRestarts: Int
        /// Attempts at the piece that got nowhere so far.
        var pieceFailures: Int
        /// The mirror's failures in a row without progress, this one counted.
        var mirrorFailuresInARow: Int
        /// True while the mirror is still used.
        var mirrorUsable: Bool
        /// Mirrors in use besides this one.
        var otherMirrors: Int
        /// True when another connection is still fetching from this mirror.
        var mirrorHasOtherTransfers: Bool
        /// The mirror's refusals beyond its limit in a row (`beyondLimit`),
        /// this one counted when it is one.
        var refusalsInARow = 0
        /// True when the request went out with no more transfers running
        /// than the server had accepted at once after refusing one more.
        var sentWithinLimit = false
        /// True when a race partner still runs on the same piece.
        var partnerBusy: Bool
        /// True when the mirror's URL was redirected (a signed URL, say).
        var redirected: Bool
        /// True when an expired URL can be refreshed (`DownloadOptions.refreshURL`).
        var refreshable: Bool
        /// Bytes the mirror served this download: this run, earlier runs,
        /// and for the first mirror the partial download's when it resumed.
        var mirrorServed: Int64
        /// True when answers naming the same other total size reached the
        /// limit (one, for a download that has not probed).
        var sizeDisagreementsReached: Bool

        /// True for a refusal beyond the server's connection limit: 429 or
        /// 503 to one of several ranged transfers from the mirror.
        var beyondLimit: Bool {
            RetryPolicy.refusedBeyondLimit(rejection, mirrorHasOtherTransfers: mirrorHasOtherTransfers, plain: plain)
        }

        /// True for a refusal beyond the limit of a request sent within it:
        /// the server had not yet given back the place of a transfer that
        /// ended (one cut short by a steal runs on at the server until it
        /// notices the closed connection).
        var slotNotYetFree: Bool { beyondLimit && sentWithinLimit }
    }

    /// True when `rejection` refuses a request beyond the server's limit:
    /// 429 or 503 while other ranged transfers from the mirror run.
    static func refusedBeyondLimit(_ rejection: Rejection?, mirrorHasOtherTransfers: Bool, plain: Bool) -> Bool {
        guard case let .status(code, _)? = rejection, code == 429 || code == 503 else { return false }
        return mirrorHasOtherTransfers && !plain
    }

    /// What the engine carries out.
    struct Decision: Equatable {
        /// Stop using the mirror, for this reason (the run goes on with the others).
        var dropMirror: String?
        /// Run fewer connections at once from now on (the server is throttling).
        var fewerConnections = false
        /// A plain stream's restart was counted (the decision got past rule 7).
        var restartCounted = false
        var verdict: Verdict

        enum Verdict: Equatable {
            /// Fetch the rest of the piece again after `delay` seconds; `failures`:
            /// its attempts that got nowhere (0 after its mirror was dropped).
            case requeue(delay: Double, failures: Int)
            /// A race partner still runs on the piece: nothing to requeue.
            case none
            /// The URL expired: requeue the rest at once and renew the URL.
            case expired
            /// The remote file changed.
            case remoteChanged(String)
            /// Ranged requests do not work.
            case rangesUnsupported(String)
            /// The run fails with this error.
            case fail(DownloadError)
        }
    }

    /// Attempts at a piece (1 + `DownloadOptions.retries`), their backoff, and the longest `Retry-After` waited.
    var settings: DownloadOptions
    /// The mirror's URL, for the errors.
    var url: String
    /// The file's size as the probe found it, for the errors.
    var size: Int64?

    /// Failures in a row without progress before a mirror is dropped (while
    /// others remain). Refusals beyond the server's limit are not failures:
    /// 16 connections to a server taking 4 are refused 12 times in a row.
    static let mirrorFailureLimit = 3
    /// The first wait of a piece refused beyond the server's limit: a server
    /// gives back a finished request's place a moment after its last byte
    /// (nginx's limit_conn at the request's end), and a request sent on the
    /// heels of one that ended can be refused in that moment.
    static let limitGrace = 0.1
    /// A 429 without `Retry-After` waits this many times the usual backoff:
    /// the server says it is throttling, not for how long, and retrying on
    /// the usual schedule would only be refused again.
    static let tooManyRequestsFactor = 4.0

    /// The answers a signed link gives once it has expired.
    static let expiryStatuses: Set<Int> = [401, 403, 410]

    /// Why a mirror that served `served` bytes and now answers `code` is
    /// given up when nothing can renew its URL.
    static func expiry(_ code: Int, served: Int64) -> String {
        "answered \(code) after serving \(served) bytes: a signed link that expired? nothing was given to refresh it"
    }

    func decide(_ failure: Failure) -> Decision {
        var decision = Decision(verdict: .none)
        var usable = failure.mirrorUsable
        let others = failure.otherMirrors
        // At most one drop: after one the mirror is out of use, and every later rule that drops asks for one in use.
        func drop(_ reason: String) {
            decision.dropMirror = reason
            usable = false
        }
        func ending(_ verdict: Decision.Verdict) -> Decision {
            decision.verdict = verdict
            return decision
        }
        // 1. The size changed.
        if case let .otherTotal(total)? = failure.rejection, failure.sizeDisagreementsReached, others == 0 {
            return ending(.remoteChanged("the server reports \(total) bytes in all, not \(size ?? 0)"))
        }
        switch failure.rejection {
        // 2. Another version of the file, or no ranges.
        case let .changed(detail)?:
            if others == 0 { return ending(.remoteChanged(detail)) }
            drop("it serves another version of the file (\(detail))")
        case .rangeIgnored?, .encoded?:
            let problem = failure.rejection?.description ?? failure.reason
            if others == 0 { return ending(.rangesUnsupported(problem)) }
            drop(problem)
        // 3. Throttled.
        case let .status(code, _)? where code == 429 || code == 503:
            decision.fewerConnections = true
        // 4. An expired URL.
        case let .status(code, _)? where Self.expiryStatuses.contains(code) || (300..<400).contains(code):
            let served = failure.mirrorServed > 0
            let renewable = !Self.expiryStatuses.contains(code) || failure.redirected || failure.refreshable && served
            guard renewable || served && !failure.mirrorHasOtherTransfers else { break }
            // A race's duplicate refused: its partner goes on with the piece.
            if failure.partnerBusy { return ending(.none) }
            if renewable { return ending(.expired) }
            let expiry = Self.expiry(code, served: failure.mirrorServed)
            if others == 0 { return ending(.fail(.server(url: url, message: expiry, status: code))) }
            drop(expiry)
        default:
            break
        }
        // 5. Hopeless here, or failing in a row.
        let permanent = failure.curlError.map { !$0.isTransient } ?? false
        let retryable = !permanent && (failure.rejection?.isTransient ?? true)
        if usable, others > 0, !retryable || failure.mirrorFailuresInARow >= Self.mirrorFailureLimit {
            drop(failure.reason)
        }
        // 6. Permanent, on the mirror still in use.
        if permanent, usable, let curlError = failure.curlError {
            let message = "\(failure.reason) (not retried: another attempt would fail the same way)"
            return ending(.fail(.network(url: url, message: message, failure: curlError.failure)))
        }
        // 7. The partner goes on.
        if failure.partnerBusy { return ending(.none) }
        // 8. Attempts used up. A plain stream starts over from byte 0 after
        // any failure, so a cut that made progress brings it no nearer the
        // end: every restart counts.
        decision.restartCounted = failure.plain
        var failures = failure.plain ? failure.plainRestarts + 1 : failure.progressed ? 1 : failure.pieceFailures + 1
        // An extra connection refused (429, 503) while others of the mirror
        // run: the server's limit, not the piece's fault, and not one of its
        // attempts (a server taking 4 at once refused 12 of -n 16's first
        // requests).
        if failure.beyondLimit { failures = failure.pieceFailures }
        let exhausted = failures > settings.retries || (!retryable && failures > settings.retries / 2)
        // A mirror that used up the piece's attempts gives the piece to the
        // others, and its failures are not held against the piece there.
        if exhausted, usable, others > 0 { drop(failure.reason) }
        if !usable { failures = 0 }
        if failures > 0, exhausted {
            let restarts = failure.plain ? " of one stream from byte 0 (the server serves no ranges)" : ""
            let message = "giving up after \(failures) attempts\(restarts): \(failure.reason)"
            // The last attempt decides: the network (a refused connection,
            // a stall, ...) or the server's answer (a status, ...).
            if let transport = failure.curlError?.failure {
                return ending(.fail(.network(url: url, message: message, failure: transport)))
            }
            var status: Int?
            if case let .status(code, _)? = failure.rejection { status = code }
            return ending(.fail(.server(url: url, message: message, status: status)))
        }
        // 9. Wait, then requeue. A cut that made progress is retried at once;
        // backoff is for failures that got nowhere.
        var delay = failure.progressed && !failure.plain ? 0 : settings.backoff(failures: failures)
        if case let .status(code, retryAfter)? = failure.rejection {
            if code == 429, retryAfter == nil {
                delay = max(delay, settings.backoff(failures: failures) * Self.tooManyRequestsFactor)
            } else if let retryAfter, retryAfter <= settings.longestRetryAfter {
                delay = max(delay, retryAfter)
            } else if let retryAfter, usable, !failure.mirrorHasOtherTransfers {
                // Nothing else of this mirror works: waiting that long is no retry.
                let wait = Rejection.overlongWait(retryAfter, status: code, longest: settings.longestRetryAfter)
                if others == 0 { return ending(.fail(.server(url: url, message: "the server \(wait)", status: code))) }
                drop("it \(wait)")
            }
            // Else an extra connection was refused: the mirror's connection
            // limit came down (rule 3), and its working connections take the piece.
        }
        // The server's limit. The Retry-After is for the connection beyond
        // it, which the count no longer runs: the piece goes to the first
        // connection the server took that frees (it waited the Retry-After
        // before, and -n auto against a server taking 4 of its first 16
        // requests took 1.4x the wall of -n 4, its connections idle while
        // the refused pieces waited). A request sent within the limit was
        // refused for a place the server had not yet given back: it waits a
        // grace, doubled for each refusal in a row, up to the server's own
        // wait, so a server whose limit fell, or is shared with another
        // client, is not asked ten times a second.
        if failure.slotNotYetFree {
            let doublings = min(30, max(0, failure.refusalsInARow - 1))
            delay = min(delay, Self.limitGrace * Double(1 << doublings))
        } else if failure.beyondLimit {
            delay = 0
        }
        if !usable { delay = 0 }
        return ending(.requeue(delay: delay, failures: failures))
    }
}
