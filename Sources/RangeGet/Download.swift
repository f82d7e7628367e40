// Download: one file from one URL, end to end. Probe, open and lock the
// `.part` file, load or start the manifest, run the engine, and on success
// verify the size, make the data durable and rename it into place. A changed
// remote file restarts from zero; a server without working ranges gets one
// plain stream. The public entry point of the library; the async API, pause,
// resume and cancel are in Download+Async.swift, their state machine in
// DownloadController.swift.
import Dispatch
import FoundationEssentials
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A download of one remote file, from one URL or several mirrors, to a
/// local path, resumable across runs.
public final class Download: Sendable {
    /// The URL of the file; the manifest is tied to it.
    public let url: String
    /// Every URL of the file: `url` first, then the other mirrors.
    public let mirrors: [String]
    /// Where it goes.
    public let destination: Destination
    /// How it is fetched.
    public let options: DownloadOptions

    /// The session whose connections the download shares; nil: it runs alone.
    public let session: DownloadSession?

    /// The life cycle shared by every thread and task that touches this download.
    let controller: DownloadController
    /// Where a download read in order puts its bytes instead of a file (`bytes(from:)`).
    let window: StreamWindow?

    /// A download of `url` to `destination` that runs alone: its own
    /// connections, its transfers on the thread that runs it. To share
    /// connections with other downloads, make it from a ``DownloadSession``.
    public convenience init(url: String, destination: Destination, options: DownloadOptions = DownloadOptions()) {
        self.init(mirrors: [url], destination: destination, options: options)
    }

    /// A download of `url` to `destination` that runs alone (see ``init(url:destination:options:)-(String,_,_)``).
    public convenience init(url: URL, destination: Destination, options: DownloadOptions = DownloadOptions()) {
        self.init(mirrors: [url.absoluteString], destination: destination, options: options)
    }

    /// A download of the file behind `mirrors` (at least one URL; the first
    /// names the download) to `destination`, running alone.
    public convenience init(mirrors: [String], destination: Destination, options: DownloadOptions = DownloadOptions()) {
        self.init(mirrors: mirrors, destination: destination, window: nil, options: options, session: nil)
    }

    /// A download of the file behind `mirrors` into `window`, read in order.
    convenience init(mirrors: [String], window: StreamWindow, options: DownloadOptions, session: DownloadSession?) {
        self.init(mirrors: mirrors, destination: .file("-"), window: window, options: options, session: session)
    }

    init(
        mirrors: [String], destination: Destination, window: StreamWindow?, options: DownloadOptions,
        session: DownloadSession?
    ) {
        precondition(!mirrors.isEmpty, "a download needs a URL")
        url = mirrors[0]
        self.mirrors = mirrors
        self.destination = destination
        var options = options
        if options.transfer.rateLimit == nil { options.transfer.rateLimit = session?.rateLimit }
        self.options = options
        self.session = session
        self.window = window
        controller = DownloadController(
            keepsResumeState: window == nil,
            trace: options.trace?.recorder(named: Self.traceName(destination, url: mirrors[0]), mirrors: mirrors))
    }

    /// The download's name in a trace: its file, else its URL's.
    static func traceName(_ destination: Destination, url: String) -> String {
        switch destination {
        case let .file(path): path == "-" ? "stdout (\(url))" : path
        case .directory: url
        }
    }

    /// Stops the download soon, saving its resume state; safe from any thread.
    /// The same as `cancel(keepingResumeState: true)`, also before the start.
    /// Returns false when no transfer was running (nothing needed saving).
    @discardableResult
    public func stop() -> Bool {
        let running = controller.isTransferring
        // Through `cancel`, which ends a paused download no thread drives on this thread.
        cancel(keepingResumeState: true)
        return running
    }

    /// Downloads the file on the calling thread, reporting to `onEvent` from
    /// the transfer thread; returns when the file is complete or throws why not.
    /// While paused (`pause()`), the calling thread waits for `resume()` or
    /// `cancel()`. A download that has ended returns or throws its outcome
    /// again; one already running elsewhere (`start()`) throws `.usage`.
    /// From async code use `run()` instead, which keeps the thread free.
    @available(*, noasync, message: "blocks the calling thread; use 'try await run()' and 'events'")
    public func run(onEvent: @escaping @Sendable (DownloadEvent) -> Void) throws(DownloadError) -> DownloadResult {
        switch controller.claim(threaded: false, observer: onEvent) {
        case .claimed:
            // The attempts run as a task on this thread, which waits while they wait.
            guard let outcome = ThreadExecutor.run({ await self.drive() }) else {
                preconditionFailure("a blocking run parks while paused")
            }
            return try outcome.get()
        case let .ended(outcome):
            return try outcome.get()
        case .busy:
            throw .usage("this download is already running")
        }
    }

    /// Downloads the file on the calling thread until every byte is fetched
    /// and verified, then hands its commit (the flush, the final name) to
    /// `options.syncGroup`'s committer and returns, so this thread can take
    /// up the next file of a list meanwhile. `ended` hears the outcome once:
    /// on this thread when the download ends here (failed, interrupted,
    /// already complete, or without a group), else on the committer's, after
    /// the `finished` event. A download that has ended gives its outcome
    /// again; one running elsewhere gives `.usage`. No pause: a paused
    /// download waits on this thread, as with `run(onEvent:)`.
    package func runHandingOffCommit(
        onEvent: @escaping @Sendable (DownloadEvent) -> Void,
        ended: @escaping @Sendable (Result<DownloadResult, DownloadError>) -> Void
    ) {
        switch controller.claim(threaded: false, observer: onEvent, whenEnded: ended) {
        case .claimed:
            _ = ThreadExecutor.run { await self.drive() }
        case let .ended(outcome):
            ended(outcome)
        case .busy:
            ended(.failure(.usage("this download is already running")))
        }
    }

    /// Runs attempts until the download ends, and returns its outcome; nil
    /// when a `start()`ed download is paused and its driver leaves, or when
    /// the commit was handed off (`runHandingOffCommit`).
    func drive() async -> DownloadOutcome? {
        await controller.drive(
            attempt: { (tally: inout Tally, onEvent) async throws(DownloadError) in
                try await attempt(tally: &tally, onEvent: onEvent)
            },
            end: { outcome, partPath in end(outcome, discarding: partPath) })
    }

    /// Ends the download with `outcome`, first removing the partial download at `partPath` if given.
    func end(_ outcome: DownloadOutcome, discarding partPath: String?) -> DownloadOutcome {
        var outcome = outcome
        if let partPath {
            do {
                try PartialFile.discard(at: partPath, calls: options.systemCalls)
            } catch {
                outcome = .failure(error)
            }
        }
        // As recorded: an interruption says whether the partial download was kept.
        let ended = controller.finish(outcome)
        window?.end(ended.map { _ in })
        return ended
    }
}
