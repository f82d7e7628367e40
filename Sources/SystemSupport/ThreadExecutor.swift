// ThreadExecutor: Swift tasks on one POSIX thread, for work that may block
// now and then (opening and syncing files) and must never block the
// cooperative pool. Two ways to run it:
// - `startingThreads(named:)`: a thread of its own, started when the first
//   job arrives and ended after a second with nothing to run (a
//   DownloadSession's worker: every download of the session runs its
//   attempts there, and waits for its transfers without holding it);
// - `run(_:)`: the calling thread runs one task and its children until it
//   returns (a blocking call such as `Download.run(onEvent:)`).
// Jobs run in the order they arrive, one at a time.
import Dispatch
import Synchronization

/// An executor that runs its jobs on one thread, one at a time.
package final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // `@unchecked`: every mutable field is under `state`.
    private struct State {
        var jobs: [UnownedJob] = []
        var threadRunning = false
        /// True once `run`'s task has returned: the calling thread stops draining.
        var done = false
    }

    private let state = Mutex(State())
    /// One signal per job queued, and one for `done`.
    private let arrived = DispatchSemaphore(value: 0)
    /// The name of the thread to start; nil: a caller's thread drains (`run`).
    private let threadName: String?
    /// How long a thread of its own waits for work before it ends.
    private let idleSeconds: Double

    /// An executor that starts a thread named `name` when work arrives, which
    /// ends after `idleSeconds` with nothing to run.
    package static func startingThreads(named name: String, idleSeconds: Double = 1) -> ThreadExecutor {
        ThreadExecutor(threadName: name, idleSeconds: idleSeconds)
    }

    private init(threadName: String?, idleSeconds: Double) {
        self.threadName = threadName
        self.idleSeconds = idleSeconds
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let starts = state.withLock { state -> Bool in
            state.jobs.append(job)
            guard threadName != nil, !state.threadRunning else { return false }
            state.threadRunning = true
            return true
        }
        if starts, let threadName {
            startThread(threadName) { [self] in threadBody() }
        } else {
            arrived.signal()
        }
    }

    /// Runs `body` as a task on the calling thread, with its child tasks,
    /// and returns what it returns. Blocks the thread until then: a call from
    /// synchronous code only.
    package static func run<Value: Sendable>(_ body: @escaping @Sendable () async -> Value) -> Value {
        let executor = ThreadExecutor(threadName: nil, idleSeconds: 0)
        let result = Mutex<Value?>(nil)
        Task(executorPreference: executor) {
            let value = await body()
            result.withLock { $0 = value }
            executor.state.withLock { $0.done = true }
            executor.arrived.signal()
        }
        executor.drain()
        return result.withLock { $0! }
    }

    /// `run` for a body that throws a typed error.
    package static func run<Value: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () async throws(Failure) -> Value
    ) throws(Failure) -> Value {
        try run { () async -> Result<Value, Failure> in
            do throws(Failure) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// Runs jobs on the calling thread until `run`'s task is done.
    private func drain() {
        while true {
            arrived.wait()
            let (job, done) = state.withLock { state -> (UnownedJob?, Bool) in
                state.jobs.isEmpty ? (nil, state.done) : (state.jobs.removeFirst(), false)
            }
            if let job { job.runSynchronously(on: asUnownedTaskExecutor()) } else if done { return }
        }
    }

    /// A thread of its own: runs jobs as they come; ends when none came for `idleSeconds`.
    private func threadBody() {
        while true {
            let job = state.withLock { state in state.jobs.isEmpty ? nil : state.jobs.removeFirst() }
            if let job {
                job.runSynchronously(on: asUnownedTaskExecutor())
                continue
            }
            if arrived.wait(timeout: .now() + idleSeconds) == .success { continue }
            let ends = state.withLock { state -> Bool in
                guard state.jobs.isEmpty else { return false }
                state.threadRunning = false
                return true
            }
            if ends { return }
        }
    }
}
