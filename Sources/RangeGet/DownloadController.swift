// DownloadController: the life cycle of one Download, shared by every thread
// and task that touches it. It owns the state machine (one phase under one
// lock: ready, running, pausing, paused, cancelling, ending, ended), the stop
// requests that reach the engine, the event subscribers and the tasks waiting
// for the outcome. It does no I/O: the thread driving the download asks it
// what to do next after each attempt and each wake-up. A task parked while
// paused waits on a gate of that park's own, held in the phase (no thread is
// held), and whoever moves the download out of that phase opens it: the
// wake-up then reads the phase, so any order of pause, resume, cancel and
// the wake-up ends parked again and paused, attempting, or ended (issue 36).
// The drive loop is in DownloadController+Drive.swift, the events in
// DownloadController+Events.swift.
import Synchronization
import SystemSupport

/// The outcome of a whole download.
typealias DownloadOutcome = Result<DownloadResult, DownloadError>

final class DownloadController: Sendable {
    /// Where the download stands, and what it was asked to do.
    enum Phase {
        case ready
        /// Attempts run. `pauseUndone`: `resume()` took back a pause that
        /// had already asked the running attempt to stop, so an attempt that
        /// ends interrupted is run again.
        case running(pauseUndone: Bool)
        /// `pause()` asked the running attempt to stop; then the driving thread parks or leaves.
        case pausing
        /// No attempt runs. `parked`: what the task driving the download
        /// waits on, opened by whoever moves the download out of this phase;
        /// nil: nothing waits (a `start()`ed download that runs alone left
        /// its thread), and `resume()` starts a driver.
        case paused(parked: Gate?)
        /// `cancel()` asked the running attempt to stop; the driving thread ends the download.
        case cancelling(discard: Bool)
        /// `cancel()` ends a paused download, on the parked thread or else
        /// on its caller's; nothing else may start.
        case ending(discard: Bool)
        case ended(DownloadOutcome, DownloadState)
    }

    /// What `claim` found.
    enum Claim {
        case claimed
        case busy
        case ended(DownloadOutcome)
    }

    /// What the driving thread does next.
    enum Step {
        case attempt
        /// Wait until `resume()` or `cancel()` opens the gate.
        case park(Gate)
        /// Leave: the download is paused and no thread is needed until `resume()`.
        case leave
        /// End with this outcome, after removing the partial download at the path if one is given.
        case end(DownloadOutcome, discarding: String?)
    }

    /// What `cancel` left for its caller to do.
    enum CancelAction {
        /// Nothing: the driving thread will see the request.
        case none
        /// No thread drives the download: end it here, removing the partial download at the path if given.
        case endHere(discarding: String?)
    }

    /// Touched under `state`'s lock only, here and in the extensions
    /// (+Drive, +Events).
    struct State {
        var phase = Phase.ready
        /// A `paused` event went out; the next attempt announces `resumed`.
        var pauseAnnounced = false
        /// The driver thread leaves instead of parking while paused (`start()`, not `run(onEvent:)`).
        var threaded = false
        /// Told the outcome once the download ends, on the thread that ends
        /// it; set, a verified file's commit goes to its SyncGroup's committer
        /// and the driver thread leaves (`Download.runHandingOffCommit`).
        var whenEnded: (@Sendable (DownloadOutcome) -> Void)?
        var engine: StopSignal?
        var partPath: String?
        var observer: @Sendable (DownloadEvent) -> Void = { _ in }
        var subscribers: [Int: AsyncStream<DownloadEvent>.Continuation] = [:]
        var nextSubscriber = 0
        var eventsClosed = false
        var waiters: [CheckedContinuation<DownloadOutcome, Never>] = []
        var tally = Tally()

        /// How the download ended; nil until it has.
        var outcome: DownloadOutcome? {
            guard case let .ended(outcome, _) = phase else { return nil }
            return outcome
        }

        /// True when a running attempt must stop: a pause or a cancel asked for it.
        var stopsAttempt: Bool {
            switch phase {
            case .pausing, .cancelling: return true
            case .ready, .running, .paused, .ending, .ended: return false
            }
        }
    }

    let state = Mutex(State())
    /// True for a download to a file, which keeps its partial download on
    /// a stop; false for a stream, which keeps nothing.
    private let keepsResumeState: Bool
    /// Where the events are traced (`DownloadOptions.trace`), if anywhere.
    let trace: TraceRecorder?

    init(keepsResumeState: Bool, trace: TraceRecorder? = nil) {
        self.keepsResumeState = keepsResumeState
        self.trace = trace
    }

    // MARK: - Starting

    /// Moves a ready download to running; `threaded` when no caller's thread
    /// waits in `run(onEvent:)`; `whenEnded`, if given, hands the commit off
    /// and hears the outcome.
    func claim(
        threaded: Bool, observer: @escaping @Sendable (DownloadEvent) -> Void,
        whenEnded: (@Sendable (DownloadOutcome) -> Void)? = nil
    ) -> Claim {
        state.withLock { state in
            switch state.phase {
            case .ready:
                state.phase = .running(pauseUndone: false)
                state.threaded = threaded
                state.observer = observer
                state.whenEnded = whenEnded
                return .claimed
            case let .ended(outcome, _):
                return .ended(outcome)
            case .running, .pausing, .paused, .cancelling, .ending:
                return .busy
            }
        }
    }

    /// The public view of the phase.
    var publicState: DownloadState {
        state.withLock { state in
            switch state.phase {
            case .ready: return .ready
            // Cancelling: the transfers are stopping, and the download ends next.
            case .running, .cancelling: return .running
            case .pausing: return .pausing
            case .paused, .ending: return .paused
            case let .ended(_, final): return final
            }
        }
    }

    // MARK: - Hooks for the attempt

    /// True when the running attempt should stop (pause or cancel).
    var isStopRequested: Bool {
        state.withLock(\.stopsAttempt)
    }

    /// Records how to stop the engine now running (nil when it returned); true if it must stop at once.
    func register(_ engine: StopSignal?) -> Bool {
        state.withLock { state in
            state.engine = engine
            return state.stopsAttempt
        }
    }

    /// True when a verified file's commit is handed off rather than waited for.
    var handsOffCommit: Bool {
        state.withLock { $0.whenEnded != nil }
    }

    /// Records where the partial download lives, for a later discard.
    func setPartPath(_ path: String) {
        state.withLock { $0.partPath = path }
    }

    /// TCP connections the attempts so far opened, probes included (a stopped download has no result to say it).
    var tcpConnectionsOpened: Int {
        state.withLock(\.tally.tcpConnections)
    }

    // MARK: - Control

    /// Asks a running download to pause; does nothing in any other phase.
    func pause() {
        state.withLock { state in
            guard case .running = state.phase else { return }
            state.phase = .pausing
            state.engine?.request()
        }
    }

    /// Continues a pausing or paused download; true when the caller must start a driving thread.
    func resume() -> Bool {
        state.withLock { state in
            switch state.phase {
            case .pausing:
                state.phase = .running(pauseUndone: true)
                return false
            case let .paused(parked):
                state.phase = .running(pauseUndone: false)
                guard let parked else { return true }
                parked.open()
                return false
            case .ready, .running, .cancelling, .ending, .ended:
                return false
            }
        }
    }

    /// Asks the download to end, keeping or discarding its partial download.
    func cancel(discard: Bool) -> CancelAction {
        let (action, closed) = state.withLock { state -> (CancelAction, Ended?) in
            switch state.phase {
            case .ready:
                state.phase = .cancelling(discard: discard)
                return (.none, end(&state, .failure(.stopped)))
            case .running, .pausing, .cancelling:
                state.phase = .cancelling(discard: discard)
                state.engine?.request()
                return (.none, nil)
            case let .paused(parked):
                state.phase = .ending(discard: discard)
                guard let parked else { return (.endHere(discarding: discard ? state.partPath : nil), nil) }
                parked.open()
                return (.none, nil)
            case .ending, .ended:
                return (.none, nil)
            }
        }
        closed?.notify()
        return action
    }

    /// True while a transfer (or a probe) runs, which a stop has to end.
    var isTransferring: Bool {
        state.withLock { $0.engine != nil }
    }

    /// Ends the download: records the outcome, wakes the waiting tasks,
    /// closes the event streams; returns the outcome recorded (the first
    /// one, when the download had ended already).
    @discardableResult
    func finish(_ outcome: DownloadOutcome) -> DownloadOutcome {
        let (ended, recorded) = state.withLock { state in (end(&state, outcome), state.outcome) }
        ended?.notify()
        return recorded ?? outcome
    }

    /// Who must hear that the download ended; told outside the lock.
    struct Ended {
        var outcome: DownloadOutcome
        var waiters: [CheckedContinuation<DownloadOutcome, Never>]
        var subscribers: [AsyncStream<DownloadEvent>.Continuation]
        var whenEnded: (@Sendable (DownloadOutcome) -> Void)?

        func notify() {
            whenEnded?(outcome)
            for waiter in waiters { waiter.resume(returning: outcome) }
            for subscriber in subscribers { subscriber.finish() }
        }
    }

    /// Records `outcome`, unless the download has ended already; an
    /// interruption then says what it kept: the partial download of a file,
    /// unless a cancel discarded it; nothing of a stream.
    func end(_ state: inout State, _ outcome: DownloadOutcome) -> Ended? {
        if case .ended = state.phase { return nil }
        var outcome = outcome
        let final: DownloadState
        switch outcome {
        case let .success(result):
            final = .finished(result)
        case .failure(.interrupted):
            switch state.phase {
            case let .cancelling(discard), let .ending(discard):
                let kept = keepsResumeState && !discard
                outcome = .failure(.interrupted(keptResumeState: kept))
                final = .cancelled(keptResumeState: kept)
            case .ready, .running, .pausing, .paused, .ended:
                let error = DownloadError.interrupted(keptResumeState: keepsResumeState)
                outcome = .failure(error)
                final = .failed(error)
            }
        case let .failure(error):
            final = .failed(error)
        }
        state.phase = .ended(outcome, final)
        state.engine = nil
        // The observer may hold the download itself (Download.data does): let both go.
        state.observer = { _ in }
        let ended = Ended(
            outcome: outcome, waiters: state.waiters, subscribers: Array(state.subscribers.values),
            whenEnded: state.whenEnded)
        state.whenEnded = nil
        state.waiters = []
        state.subscribers = [:]
        state.eventsClosed = true
        return ended
    }

    /// Waits for the outcome.
    func outcome() async -> DownloadOutcome {
        await withCheckedContinuation { continuation in
            let ended: DownloadOutcome? = state.withLock { state in
                if let outcome = state.outcome { return outcome }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }
}
