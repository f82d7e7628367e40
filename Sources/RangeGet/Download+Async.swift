import SystemSupport

// Download's API for Swift concurrency: start and await, events as an async
// sequence, pause, resume and cancel from any thread or task. The attempts
// never run on the cooperative pool: a session's downloads run as tasks on
// the session's worker thread (waiting for transfers and probes without
// holding it), a download alone on a thread of its own. DownloadController
// keeps the life cycle consistent between callers.

extension Download {
    /// Where the download stands now.
    public var state: DownloadState {
        controller.publicState
    }

    /// The download's events from now on, in order. A download that
    /// fetches bytes ends with a `progress` whose `bytesDone` is the size,
    /// then `fetched`, then `finished`; one whose file was already complete
    /// sends `probed` then `finished` (nothing is fetched); a download that
    /// fails or is cancelled sends no `finished`, and its sequence just ends.
    ///
    /// Every access returns a new sequence that receives every event from
    /// then on, so several consumers can each iterate their own. Take it
    /// before `start()` or `run()` to see `probed` and everything after it.
    /// The sequence ends when the download ends (finished, failed or
    /// cancelled); taken after that, it is empty. A consumer that falls more
    /// than 4096 events behind loses the oldest ones.
    public var events: AsyncStream<DownloadEvent> {
        controller.subscribe()
    }

    /// Starts the download and returns at once: on its session's worker
    /// thread, or on a thread of its own for a download that runs alone.
    /// Does nothing when it has already started (or ended).
    public func start() {
        start(observer: { _ in })
    }

    /// Starts the download, calling `observer` with each event on the
    /// download's threads before any subscriber sees it.
    func start(observer: @escaping @Sendable (DownloadEvent) -> Void) {
        guard case .claimed = controller.claim(threaded: true, observer: observer) else { return }
        startDriver()
    }

    /// Starts the download if needed and waits until it ends; returns what
    /// it did, or throws why it did not complete.
    ///
    /// While the download is paused this keeps waiting. `cancel()` makes it
    /// throw `DownloadError.interrupted`, saying whether the partial
    /// download was kept. Cancelling the task that awaits it cancels the
    /// download, keeping its resume state. Once the download has ended,
    /// every call returns (or throws) the same outcome.
    public func run() async throws(DownloadError) -> DownloadResult {
        // An already cancelled task cancels before the start: nothing is probed.
        let outcome = await withTaskCancellationHandler {
            start()
            return await controller.outcome()
        } onCancel: {
            cancel(keepingResumeState: true)
        }
        return try outcome.get()
    }

    /// Pauses a running download: the transfers stop, every connection is
    /// closed and the manifest saved, then `state` becomes `.paused`.
    /// `resume()` continues it in this process; the state on disk also lets
    /// a new `Download` (in any process) continue once this one is cancelled
    /// with `keepingResumeState`. Does nothing unless the download is running;
    /// returns at once; safe from any thread.
    public func pause() {
        controller.pause()
    }

    /// Continues a paused (or pausing) download from the bytes already on
    /// disk; the file is probed again first, so a remote file that changed
    /// meanwhile restarts from zero. Does nothing in any other state; safe
    /// from any thread.
    public func resume() {
        if controller.resume() { startDriver() }
    }

    /// Ends the download soon; safe from any thread, and also before the start.
    ///
    /// With `keepingResumeState` false (the default) the `.part` file and its
    /// manifest are deleted; when true they stay, and a new `Download` of the
    /// same file and destination, in this process or another, fetches only
    /// the missing bytes. Either way `run()` then throws
    /// `DownloadError.interrupted` and `state` becomes `.cancelled`, both
    /// saying whether they stayed (never for a stream, which keeps nothing). A
    /// download that has already finished or failed is left as it is.
    public func cancel(keepingResumeState: Bool = false) {
        guard case let .endHere(partPath) = controller.cancel(discard: !keepingResumeState) else { return }
        _ = end(.failure(.stopped), discarding: partPath)
    }

    /// Runs `drive()` as a task on the session's worker, or on a new
    /// thread for a download alone; it ends with the download or leaves
    /// when it is paused.
    private func startDriver() {
        if let session {
            Task(executorPreference: session.worker) { _ = await self.drive() }
        } else {
            startThread("rangeget start") { [self] in _ = ThreadExecutor.run { await self.drive() } }
        }
    }
}
