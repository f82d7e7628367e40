// DownloadController's drive loop: what the task driving a download does
// after each attempt and each wake-up, decided under the controller's lock
// (the phases are in DownloadController.swift).
import SystemSupport

extension DownloadController {
    /// Runs `attempt` (given the figures of earlier attempts, and where to
    /// send events) until the download ends, then `end` (given the outcome
    /// and the partial download to remove, if any), and returns what `end`
    /// returns; nil when a `start()`ed download is paused and this thread
    /// leaves, or when `attempt` returned nil: it handed the commit off, and
    /// the committer ends the download.
    func drive(
        attempt: (inout Tally, @escaping @Sendable (DownloadEvent) -> Void) async throws(DownloadError) ->
            DownloadResult?,
        end: (DownloadOutcome, String?) -> DownloadOutcome
    ) async -> DownloadOutcome? {
        var step = Step.attempt
        while true {
            switch step {
            case .attempt:
                // A pause or cancel that came first ends the attempt before it starts.
                var outcome = DownloadOutcome.failure(.stopped)
                if !isStopRequested {
                    if announcesResume() { emit(.resumed) }
                    var tally = state.withLock(\.tally)
                    let attempted: Result<DownloadResult?, DownloadError>
                    do throws(DownloadError) {
                        attempted = .success(try await attempt(&tally, { [self] event in emit(event) }))
                    } catch {
                        attempted = .failure(error)
                    }
                    state.withLock { $0.tally = tally }
                    switch attempted {
                    case .success(nil): return nil
                    case let .success(result?): outcome = .success(result)
                    case let .failure(error): outcome = .failure(error)
                    }
                }
                if announcesPause(after: outcome) { emit(.paused) }
                step = settle(outcome)
            case let .park(gate):
                await gate.wait()
                step = unpark()
            case .leave:
                return nil
            case let .end(outcome, discarding):
                return end(outcome, discarding)
            }
        }
    }

    /// True when an attempt that ended with `outcome` stopped for a pause
    /// not yet announced, which the caller then announces (before `settle`
    /// lets `resume()` in, so `paused` always comes before `resumed`).
    private func announcesPause(after outcome: DownloadOutcome) -> Bool {
        guard case .failure(.interrupted) = outcome else { return false }
        return state.withLock { state in
            guard case .pausing = state.phase, !state.pauseAnnounced else { return false }
            state.pauseAnnounced = true
            return true
        }
    }

    /// True, once, when the attempt about to start continues an announced pause.
    private func announcesResume() -> Bool {
        state.withLock { state in
            defer { state.pauseAnnounced = false }
            return state.pauseAnnounced
        }
    }

    /// Decides what follows an attempt that ended with `outcome`. (Internal,
    /// as `unpark`, for the tests, which take the driving thread's steps one
    /// at a time.)
    func settle(_ outcome: DownloadOutcome) -> Step {
        state.withLock { state in
            switch outcome {
            case .success:
                return .end(outcome, discarding: nil)
            case .failure(.interrupted):
                break
            case .failure:
                guard case .cancelling(discard: true) = state.phase else { return .end(outcome, discarding: nil) }
                return .end(outcome, discarding: state.partPath)
            }
            switch state.phase {
            case .pausing:
                return pauseHere(&state)
            case let .cancelling(discard):
                return .end(outcome, discarding: discard ? state.partPath : nil)
            case .running(pauseUndone: true):
                state.phase = .running(pauseUndone: false)
                return .attempt
            case .ready, .running(pauseUndone: false), .paused, .ending, .ended:
                // Stopped by no request to this download (a shared loop's stop): it ends.
                return .end(outcome, discarding: nil)
            }
        }
    }

    /// Decides what follows the wake-up of the task parked on a gate that a
    /// move out of `paused` opened; the phase says which move.
    func unpark() -> Step {
        state.withLock { state in
            switch state.phase {
            case .running:
                state.phase = .running(pauseUndone: false)
                return .attempt
            case .pausing:
                // `resume()`, then `pause()` before this thread woke: no attempt ran, so paused again.
                return pauseHere(&state)
            case let .cancelling(discard), let .ending(discard):
                return .end(.failure(.stopped), discarding: discard ? state.partPath : nil)
            case .ready, .paused, .ended:
                preconditionFailure("a parked thread wakes only after its download left paused")
            }
        }
    }

    /// Moves a download whose attempt stopped to paused: the driver leaves
    /// (`threaded`), or parks on a gate of its own until `resume()` or
    /// `cancel()` opens it.
    private func pauseHere(_ state: inout State) -> Step {
        guard !state.threaded else {
            state.phase = .paused(parked: nil)
            return .leave
        }
        let parked = Gate()
        state.phase = .paused(parked: parked)
        return .park(parked)
    }
}
