// DownloadController: the life cycle of one Download, shared by every thread
// and task that touches it. It owns the state machine (ready, running,
// pausing, paused, ended), the stop requests that reach the engine, the event
// subscribers and the tasks waiting for the outcome. It does no I/O: the
// thread driving the download asks it what to do next after each attempt.
// (About 400 lines: one lock over one state, whose transitions read best
// side by side.)
import Dispatch
import Synchronization

/// The outcome of a whole download.
typealias DownloadOutcome = Result<DownloadResult, DownloadError>

final class DownloadController: Sendable {
    /// What a caller asked the running download to do.
    enum Request: Equatable {
        case none
        case pause
        case cancel(discard: Bool)
    }

    enum Phase {
        case ready
        case running
        case pausing
        case paused
        /// A cancel is removing a paused download's files; nothing else may start.
        case ending
        case ended(DownloadOutcome, DownloadState)
    }

    /// What `claim` found.
    enum Claim {
        case claimed
        case busy
        case ended(DownloadOutcome)
    }

    /// What the driving thread does next.
    private enum Step {
        case attempt
        /// Block this thread until `resume()` or `cancel()` signals.
        case park(DispatchSemaphore)
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

    private struct State {
        var phase = Phase.ready
        var request = Request.none
        /// `resume()` came while the transfers were still stopping for a pause.
        var resumedWhilePausing = false
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
        var parked: DispatchSemaphore?
        var observer: @Sendable (DownloadEvent) -> Void = { _ in }
        var subscribers: [Int: AsyncStream<DownloadEvent>.Continuation] = [:]
        var nextSubscriber = 0
        var eventsClosed = false
        var waiters: [CheckedContinuation<DownloadOutcome, Never>] = []
        var tally = Tally()
    }

    /// Events a subscriber may fall behind by before the oldest are dropped.
    static let eventBuffer = 4096

    private let state = Mutex(State())

    // MARK: - Starting

    /// Moves a ready download to running; `threaded` when no caller's thread
    /// waits in `run(onEvent:)`; `whenEnded`, if given, hands the commit off
    /// and hears the outcome.
    func claim(threaded: Bool, observer: @escaping @Sendable (DownloadEvent) -> Void,
               whenEnded: (@Sendable (DownloadOutcome) -> Void)? = nil) -> Claim {
        state.withLock { state in
            switch state.phase {
            case .ready:
                state.phase = .running
                state.threaded = threaded
                state.observer = observer
                state.whenEnded = whenEnded
                return .claimed
            case let .ended(outcome, _):
                return .ended(outcome)
            case .running, .pausing, .paused, .ending:
                return .busy
            }
        }
    }

    /// The public view of the phase.
    var publicState: DownloadState {
        state.withLock { state in
            switch state.phase {
            case .ready: return .ready
            case .running: return .running
            case .pausing: return .pausing
            case .paused, .ending: return .paused
            case let .ended(_, final): return final
            }
        }
    }

    // MARK: - Hooks for the attempt

    /// True when the running attempt should stop (pause or cancel).
    var isStopRequested: Bool {
        state.withLock { $0.request != .none }
    }

    /// Records how to stop the engine now running (nil when it returned); true if it must stop at once.
    func register(_ engine: StopSignal?) -> Bool {
        state.withLock { state in
            state.engine = engine
            return state.request != .none
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
            guard case .running = state.phase, state.request == .none else { return }
            state.request = .pause
            state.resumedWhilePausing = false
            state.phase = .pausing
            state.engine?.request()
        }
    }

    /// Continues a pausing or paused download; true when the caller must start a driving thread.
    func resume() -> Bool {
        state.withLock { state in
            guard state.request == .pause else { return false }
            switch state.phase {
            case .pausing:
                state.request = .none
                state.resumedWhilePausing = true
                state.phase = .running
                return false
            case .paused:
                state.request = .none
                state.phase = .running
                if let parked = state.parked {
                    parked.signal()
                    return false
                }
                return true
            case .ready, .running, .ending, .ended:
                return false
            }
        }
    }

    /// Asks the download to end, keeping or discarding its partial download.
    func cancel(discard: Bool) -> CancelAction {
        let (action, closed) = state.withLock { state -> (CancelAction, Ended?) in
            switch state.phase {
            case .ready:
                state.request = .cancel(discard: discard)
                return (.none, end(&state, .failure(.interrupted)))
            case .running, .pausing:
                state.request = .cancel(discard: discard)
                state.engine?.request()
                return (.none, nil)
            case .paused:
                state.request = .cancel(discard: discard)
                if let parked = state.parked {
                    parked.signal()
                    return (.none, nil)
                }
                state.phase = .ending
                return (.endHere(discarding: discard ? state.partPath : nil), nil)
            case .ending, .ended:
                return (.none, nil)
            }
        }
        closed?.notify()
        return action
    }

    /// `cancel(discard: false)` for `Download.stop()`; true if a transfer was running.
    func stop() -> Bool {
        let running = state.withLock { $0.engine != nil }
        _ = cancel(discard: false)
        return running
    }

    // MARK: - Driving

    // MARK: - The drive loop

    /// Runs `attempt` (given the figures of earlier attempts, and where to
    /// send events) until the download ends, then `end` (given the outcome
    /// and the partial download to remove, if any), and returns what `end`
    /// returns; nil when a `start()`ed download is paused and this thread
    /// leaves, or when `attempt` returned nil: it handed the commit off, and
    /// the committer ends the download.
    func drive(
        attempt: (inout Tally, @escaping @Sendable (DownloadEvent) -> Void) throws(DownloadError) -> DownloadResult?,
        end: (DownloadOutcome, String?) -> DownloadOutcome
    ) -> DownloadOutcome? {
        var step = Step.attempt
        while true {
            switch step {
            case .attempt:
                if announcesResume() { emit(.resumed) }
                var tally = state.withLock(\.tally)
                let attempted = Result { () throws(DownloadError) in
                    try attempt(&tally, { [self] event in emit(event) })
                }
                state.withLock { $0.tally = tally }
                let outcome: DownloadOutcome
                switch attempted {
                case .success(nil): return nil
                case let .success(result?): outcome = .success(result)
                case let .failure(error): outcome = .failure(error)
                }
                if announcesPause(after: outcome) { emit(.paused) }
                step = settle(outcome)
            case let .park(signal):
                signal.wait()
                step = unpark()
            case .leave:
                return nil
            case let .end(outcome, discarding):
                return end(outcome, discarding)
            }
        }
    }

    /// True when an attempt that ended with `outcome` stopped for a pause,
    /// which the caller then announces (before `settle` lets `resume()` in,
    /// so `paused` always comes before `resumed`).
    private func announcesPause(after outcome: DownloadOutcome) -> Bool {
        guard case .failure(.interrupted) = outcome else { return false }
        return state.withLock { state in
            guard state.request == .pause else { return false }
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

    /// Decides what follows an attempt that ended with `outcome`.
    private func settle(_ outcome: DownloadOutcome) -> Step {
        state.withLock { state in
            switch outcome {
            case .success:
                return .end(outcome, discarding: nil)
            case .failure(.interrupted):
                break
            case .failure:
                let discard = state.request == .cancel(discard: true)
                return .end(outcome, discarding: discard ? state.partPath : nil)
            }
            switch state.request {
            case .pause:
                state.phase = .paused
                if state.threaded { return .leave }
                let parked = DispatchSemaphore(value: 0)
                state.parked = parked
                return .park(parked)
            case let .cancel(discard):
                return .end(outcome, discarding: discard ? state.partPath : nil)
            case .none:
                guard state.resumedWhilePausing else { return .end(outcome, discarding: nil) }
                state.resumedWhilePausing = false
                return .attempt
            }
        }
    }

    /// Decides what follows a wake-up of a parked thread.
    private func unpark() -> Step {
        state.withLock { state in
            state.parked = nil
            switch state.request {
            case .none:
                return .attempt
            case let .cancel(discard):
                return .end(.failure(.interrupted), discarding: discard ? state.partPath : nil)
            case .pause:
                let parked = DispatchSemaphore(value: 0)
                state.parked = parked
                return .park(parked)
            }
        }
    }

    /// Ends the download: records the outcome, wakes the waiting tasks, closes the event streams.
    func finish(_ outcome: DownloadOutcome) {
        state.withLock { end(&$0, outcome) }?.notify()
    }

    /// Who must hear that the download ended; told outside the lock.
    private struct Ended {
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

    private func end(_ state: inout State, _ outcome: DownloadOutcome) -> Ended? {
        if case .ended = state.phase { return nil }
        let final: DownloadState
        switch outcome {
        case let .success(result):
            final = .finished(result)
        case .failure(.interrupted):
            if case let .cancel(discard) = state.request {
                final = .cancelled(keptResumeState: !discard)
            } else {
                final = .failed(.interrupted)
            }
        case let .failure(error):
            final = .failed(error)
        }
        state.phase = .ended(outcome, final)
        state.engine = nil
        // The observer may hold the download itself (Download.data does): let both go.
        state.observer = { _ in }
        let ended = Ended(outcome: outcome, waiters: state.waiters, subscribers: Array(state.subscribers.values),
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
                if case let .ended(outcome, _) = state.phase { return outcome }
                state.waiters.append(continuation)
                return nil
            }
            if let ended { continuation.resume(returning: ended) }
        }
    }

    // MARK: - Events

    /// Tells the observer and every subscriber, the event's URLs and messages
    /// cleaned (`OutgoingText`); `finished` is the last event subscribers see.
    func emit(_ event: DownloadEvent) {
        let event = event.cleaned
        state.withLock { $0.observer }(event)
        // Yielding under the lock keeps one order for all subscribers and
        // keeps a late event (a background checkpoint) from following `finished`.
        let closing: [AsyncStream<DownloadEvent>.Continuation] = state.withLock { state in
            for subscriber in state.subscribers.values { subscriber.yield(event) }
            guard case .finished = event else { return [] }
            let closing = Array(state.subscribers.values)
            state.subscribers = [:]
            state.eventsClosed = true
            return closing
        }
        for subscriber in closing { subscriber.finish() }
    }

    /// A new stream of the events from now on; already finished when the download has ended.
    func subscribe() -> AsyncStream<DownloadEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(Self.eventBuffer))
        let id = state.withLock { state in
            defer { state.nextSubscriber += 1 }
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        let closed = state.withLock { state in
            if !state.eventsClosed { state.subscribers[id] = continuation }
            return state.eventsClosed
        }
        if closed { continuation.finish() }
        return stream
    }
}
