// Download: one file from one URL, end to end. Probe, open and lock the
// `.part` file, load or start the manifest, run the engine, and on success
// verify the size, make the data durable and rename it into place. A changed
// remote file restarts from zero; a server without working ranges gets one
// plain stream. The public entry point of the library; the async API, pause,
// resume and cancel are in Download+Async.swift, their state machine in
// DownloadController.swift.
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// Where a download is saved.
public enum Destination: Sendable, Equatable {
    /// Exactly this path.
    case file(String)
    /// A file in this directory, named from Content-Disposition or the URL.
    case directory(String)
}

/// Settings of a download.
public struct DownloadOptions: Sendable {
    /// Connections to use at once.
    public var connections = 8
    /// No piece is split below this many bytes.
    public var minimumSplit: Int64 = 1 << 20
    /// Attempts at one piece that end with no byte written before giving up.
    public var retries = 5
    /// First retry delay in seconds; it doubles per failure.
    public var retryWait = 0.5
    /// The longest retry delay in seconds.
    public var retryWaitLimit = 30.0
    /// Seconds between manifest checkpoints.
    public var checkpointInterval = 1.0
    /// Discard any partial download and start over.
    public var restart = false
    /// Replace an existing complete file at the destination.
    public var overwrite = false
    /// A digest the finished file must have; checked before it is renamed into place.
    public var checksum: Checksum?
    /// Digests by file name (a SHA256SUMS list), when `checksum` is nil: the
    /// file is checked against the entry for the name it is saved under, and
    /// one the list has no entry for fails verification, so nothing a list
    /// was meant to cover gets its final name unchecked.
    public var checksumList: [String: Checksum]?
    /// The most connections to one `scheme://host:port` (mirrors on one host share it).
    public var maxPerHost = 16
    /// Probe with HEAD (then `GET Range: bytes=0-0` where HEAD fails) before
    /// any data moves: one round trip more. By default the first request is
    /// for the first `minimumSplit` bytes, and its head is the probe and its
    /// body the start of the first piece (the zero-round-trip start); the
    /// classic probe runs only when that answer is not a usable 206, and when
    /// resuming.
    public var probeWithHead = false
    /// The loop, with its multi handle, that runs the transfers: one shared
    /// by several downloads (the files of a list) lets each reuse the
    /// connections the others opened, and bounds their connections together
    /// (`TransferLoop(connections:)`; each still keeps to `connections`).
    /// Nil: the download makes its own, driven on the thread that runs it.
    public var transferLoop: TransferLoop?
    /// Downloads that finish together (the files of a list) make their data
    /// and their directory durable together, one sync for a batch instead
    /// of two per file (a group commit). Nil: this download syncs alone.
    public var syncGroup: SyncGroup?
    /// A download read in order (`Download.bytes(from:)`, `-o -`): the most
    /// bytes kept in memory, written ahead of the reader and not yet read
    /// (at least 1 MiB). The connections fetch inside this window, in file
    /// order, and wait while the reader is behind.
    public var streamWindow: Int64 = 64 << 20
    /// The most bytes the opening request asks for (it asks for `minimumSplit`).
    var openingLimit: Int64 = .max
    /// How requests are made.
    public var transfer = TransferOptions()
    /// The disk calls used; tests inject faults here.
    package var systemCalls = SystemCalls.live

    /// The defaults.
    public init() {}
}

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

    /// The life cycle shared by every thread and task that touches this download.
    let controller = DownloadController()
    /// Where a download read in order puts its bytes instead of a file (`bytes(from:)`).
    let window: StreamWindow?

    /// A download of `url` to `destination`.
    public convenience init(url: String, destination: Destination, options: DownloadOptions = DownloadOptions()) {
        self.init(mirrors: [url], destination: destination, options: options)
    }

    /// A download of the file behind `mirrors` (at least one URL; the first
    /// names the download) to `destination`.
    public init(mirrors: [String], destination: Destination, options: DownloadOptions = DownloadOptions()) {
        precondition(!mirrors.isEmpty, "a download needs a URL")
        url = mirrors[0]
        self.mirrors = mirrors
        self.destination = destination
        self.options = options
        window = nil
    }

    /// A download of the file behind `mirrors` into `window`, read in order.
    init(mirrors: [String], window: StreamWindow, options: DownloadOptions) {
        precondition(!mirrors.isEmpty, "a download needs a URL")
        url = mirrors[0]
        self.mirrors = mirrors
        destination = .file("-")
        self.options = options
        self.window = window
    }

    /// Stops the download soon, saving its resume state; safe from any thread.
    /// The same as `cancel(keepingResumeState: true)`, also before the start.
    /// Returns false when no transfer was running (nothing needed saving).
    @discardableResult
    public func stop() -> Bool {
        controller.stop()
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
            guard let outcome = drive() else { preconditionFailure("a blocking run parks while paused") }
            return try outcome.get()
        case let .ended(outcome):
            return try outcome.get()
        case .busy:
            throw .usage("this download is already running")
        }
    }

    /// Runs attempts until the download ends, and returns its outcome; nil
    /// when a `start()`ed download is paused and this thread leaves.
    func drive() -> DownloadOutcome? {
        var step = DownloadController.Step.attempt
        while true {
            switch step {
            case .attempt:
                if controller.announcesResume() { controller.emit(.resumed) }
                var tally = controller.tally
                let outcome = DownloadOutcome { () throws(DownloadError) in
                    try attempt(tally: &tally, onEvent: { [controller] event in controller.emit(event) })
                }
                controller.tally = tally
                if controller.announcesPause(after: outcome) { controller.emit(.paused) }
                step = controller.settle(outcome)
            case let .park(signal):
                signal.wait()
                step = controller.unpark()
            case .leave:
                return nil
            case let .end(outcome, discarding):
                return end(outcome, discarding: discarding)
            }
        }
    }

    /// Ends the download with `outcome`, first removing the partial download at `partPath` if given.
    func end(_ outcome: DownloadOutcome, discarding partPath: String?) -> DownloadOutcome {
        var outcome = outcome
        if let partPath {
            do {
                try Self.discardPartial(at: partPath)
            } catch {
                outcome = .failure(error)
            }
        }
        window?.end(outcome.map { _ in })
        controller.finish(outcome)
        return outcome
    }

    /// One attempt: probe, then transfer until the file is complete, the
    /// download fails or a pause or cancel stops it (`.interrupted`).
    /// `tally` carries the figures of earlier attempts and gains this one's.
    private func attempt(
        tally: inout Tally, onEvent: @escaping @Sendable (DownloadEvent) -> Void
    ) throws(DownloadError) -> DownloadResult {
        if let window { return try stream(into: window, tally: &tally, onEvent: onEvent) }
        for mirror in mirrors { try RemoteURL.check(mirror) }
        let started = MonotonicClock.now()
        defer { tally.seconds += MonotonicClock.now() - started }
        tally.attempts += 1
        // A restart discards what was there before this download, not what its own earlier attempts fetched.
        let restart = options.restart && tally.attempts == 1
        // An output that exists already: done when it is still the server's file.
        var existing = false
        if case let .file(path) = destination { existing = try checkWritable(output: path) }
        let prober = Prober(options: options.transfer)
        defer { tally.tcpConnections += prober.connectionsOpened.total }
        let loop = try transferLoop()
        var sources: [RemoteFile]
        var probeReports: [MirrorReport]
        var opening: Opening?
        // True while the file is known only from the manifest (a resume that sent no probe).
        var unprobed = false
        // Where the file goes unless Content-Disposition names it, and whether a partial download is there.
        let guessed = outputPath(url: url, contentDisposition: nil)
        let partial = Self.partialDownloadExists(at: guessed)
        if !restart, partial, let known = resumableWithoutProbe(at: guessed) {
            (sources, probeReports, opening) = ([known], [MirrorReport(url: url, bytes: 0, seconds: 0, errors: 0)], nil)
            unprobed = true
        } else {
            // A partial download's first bytes are usually on disk already (the
            // opening request, from byte 0, would fetch them again), or another
            // run holds it and this one is about to be refused.
            // An output that exists is probed with HEAD: no byte of it is needed.
            let opens = !options.probeWithHead && !partial && !existing && access(guessed, F_OK) != 0
            (sources, probeReports, opening) = try probeMirrors(prober, opening: opens ? loop : nil, onEvent: onEvent)
        }
        var remote = sources[0]
        onEvent(.probed(remote))
        // Named as guessed unless the server named it (choosing a name parses the URL).
        let output = remote.contentDisposition == nil && remote.url == url
            ? guessed : outputPath(url: remote.url, contentDisposition: remote.contentDisposition)
        if case .directory = destination { existing = try checkWritable(output: output) }
        if existing {
            opening?.cancel()
            let result = try alreadyComplete(output, remote: remote, reports: probeReports,
                                             seconds: tally.seconds + MonotonicClock.now() - started,
                                             tcpConnections: tally.tcpConnections + prober.connectionsOpened.total)
            onEvent(.finished(result))
            return result
        }

        let files = PartialFiles(output: output)
        let manifestPath = files.manifest
        controller.setPartPath(files.data)
        let file: OutputFile
        do {
            file = try OutputFile.claim(files, replacingOthers: restart, calls: options.systemCalls)
        } catch {
            switch error {
            case .busy: throw .busy("another rangeget is downloading to \(files.data)")
            case let .notOurs(problem):
                throw .usage("\(files.data) \(problem) (move it away to keep it)", remedy: .restart)
            case let .io(error): throw .io(error)
            }
        }

        var manifest = try resumeState(
            file: file, manifestPath: manifestPath, sources: sources, restart: restart, onEvent: onEvent)
        if tally.reused == nil { tally.reused = manifest?.done.byteCount ?? 0 }
        var restarts = 0
        var resolves = 0
        while true {
            if controller.isStopRequested { throw .interrupted }
            let plain = !remote.acceptsRanges || remote.size == nil
            if plain { sources = [remote] }
            // A file the opening request fetches whole (one of at most the
            // minimum split) needs no plan: no manifest, no journal, no
            // preallocation. A run killed in the middle of it finds
            // rangeget's marked .part without a manifest, and starts it over.
            let whole = !plain && manifest == nil && opening?.isUsable == true
                && opening?.served == remote.size.map { ByteRange(0, $0) }
            if manifest == nil, !whole, let size = remote.size {
                do {
                    // A size the server chose must fit before a byte is written.
                    if plain { try file.checkFreeSpace(for: size) } else { try file.preallocate(size: size) }
                } catch {
                    // The data file is empty here: nothing of it is worth keeping.
                    file.unmark()
                    for path in [files.data, manifestPath] { try? StateFile.remove(path) }
                    throw .io(error)
                }
            }
            // A single stream of known length keeps a manifest too: the bytes
            // from 0 it has, which a later run resumes if the server then
            // serves ranges (and starts over, saying why, if it still does not).
            if manifest == nil, !whole, let size = remote.size {
                var fresh = Manifest(remote: remote, size: size)
                fresh.record(sources.map(\.url))
                do {
                    // Not fsynced: it lists nothing done yet, and a manifest lost
                    // to a power cut only means the empty .part is started afresh.
                    try fresh.save(to: manifestPath, calls: options.systemCalls, durable: false)
                } catch {
                    throw .io(error)
                }
                manifest = fresh
            }
            let engine = Engine(
                mirrors: sources, sink: .file(file), manifest: manifest, manifestPath: manifestPath, settings: options,
                plain: plain, loop: loop, opening: opening, onEvent: onEvent)
            opening = nil
            let outcome = run(engine, tally: &tally)

            if unprobed, case .remoteChanged = outcome {
                // The requests went out on the manifest's word alone: a probe
                // now tells a changed file (start over, saying why) from a
                // manifest that cannot describe this one (damage, reported).
                unprobed = false
                (sources, probeReports, _) = try probeMirrors(prober, onEvent: onEvent)
                remote = sources[0]
                manifest = try resumeState(file: file, manifestPath: manifestPath, sources: sources, restart: false,
                                           onEvent: onEvent)
                continue
            }
            switch outcome {
            case let .complete(size):
                try finish(file: file, size: size, output: output, files: files, manifest: manifest, remote: remote,
                           onEvent: onEvent)
                let result = result(path: output, size: size, tally: tally, since: started, probed: probeReports,
                                    prober: prober)
                onEvent(.finished(result))
                return result
            case .stopped:
                throw .interrupted
            case let .failed(error):
                throw error
            case let .remoteChanged(reason):
                restarts += 1
                guard restarts <= 2 else {
                    throw .verification("\(url) keeps changing during the download (\(reason))")
                }
                onEvent(.restarting(reason: "the remote file changed (\(reason)); starting over"))
                // A lying HEAD is the usual culprit: the ranged GET decides now.
                (sources, probeReports, _) = try probeMirrors(prober, skipHead: true, onEvent: onEvent)
                remote = sources[0]
                manifest = nil
                try discard(file: file, manifestPath: manifestPath)
            case let .expired(index, reason):
                // A signed URL a redirect led to has expired: ask the original
                // URL again and go on from the manifest with where it leads now.
                resolves += 1
                try resolveAnew(&sources, index: index, reason: reason, attempt: resolves, prober: prober)
                if index == 0 { remote = sources[0] }
                do {
                    manifest = try Manifest.load(from: manifestPath)
                } catch {
                    throw .manifest(error)
                }
            case let .rangesUnsupported(reason):
                onEvent(.restarting(reason: "\(reason); downloading as one stream from the start"))
                remote.acceptsRanges = false
                manifest = nil
                try discard(file: file, manifestPath: manifestPath)
            }
        }
    }

    // MARK: - Steps

    /// The loop to run the transfers on: the shared one of the options, else one of this download's own.
    func transferLoop() throws(DownloadError) -> TransferLoop {
        if let shared = options.transferLoop { return shared }
        do {
            return try TransferLoop(threaded: false, multiplex: options.transfer.multiplex, connections: options.connections)
        } catch {
            throw .network(url: url, message: "cannot set up libcurl: \(error.message)", failure: error.failure)
        }
    }

    /// Runs `engine` until it ends, stoppable through the controller, and adds its figures to `tally`.
    func run(_ engine: Engine, tally: inout Tally) -> EngineOutcome {
        if controller.register(engine.stop) { engine.stop.request() }
        let outcome = engine.run()
        _ = controller.register(nil)
        tally.fetched += engine.bytesFetched
        tally.retries += engine.retries
        tally.connectionsUsed = max(tally.connectionsUsed, engine.connectionsUsed)
        tally.add(engine.mirrorReports)
        return outcome
    }

    /// What a download that completed did: `tally` of its earlier attempts,
    /// this one's since `started`, with the figures of the probes.
    func result(path: String, size: Int64, tally: Tally, since started: Double, probed: [MirrorReport],
                prober: Prober) -> DownloadResult {
        DownloadResult(
            path: path, size: size, seconds: tally.seconds + MonotonicClock.now() - started,
            bytesFetched: tally.fetched, bytesReused: tally.reused ?? 0, retries: tally.retries,
            mirrors: merge(probed, tally.mirrors), connectionsUsed: tally.connectionsUsed,
            tcpConnections: tally.tcpConnections + prober.connectionsOpened.total)
    }

    /// A signed URL a redirect led to has expired (the `attempt`th time):
    /// asks mirror `index`'s original URL again, which must still lead to the same file.
    func resolveAnew(_ sources: inout [RemoteFile], index: Int, reason: String, attempt: Int,
                     prober: Prober) throws(DownloadError) {
        guard attempt <= 3 else {
            throw .server(url: sources[index].url, message: "\(reason), again after resolving it anew")
        }
        let fresh = try prober.probe(sources[index].url)
        if let problem = Self.disagreement(fresh, with: sources[0]) ?? sources[index].differs(from: fresh) {
            throw .server(url: fresh.url, message: "resolved anew, it now \(problem)")
        }
        sources[index] = fresh
    }

    /// Probes every mirror at once. The first that answers (in the order
    /// given) sets size and validators; a mirror that disagrees on the size,
    /// or on a strong ETag where both give one, is left out with a message.
    /// With `opening`, the first mirror is probed by the opening request of
    /// the zero-round-trip start, sent on that loop and returned running when
    /// its answer was usable.
    func probeMirrors(
        _ prober: Prober, skipHead: Bool = false, opening loop: TransferLoop? = nil,
        onEvent: @Sendable (DownloadEvent) -> Void
    ) throws(DownloadError) -> ([RemoteFile], [MirrorReport], Opening?) {
        let results = Mutex<[Int: Result<RemoteFile, DownloadError>]>([:])
        let finished = DispatchGroup()
        for (index, url) in mirrors.enumerated() where !(loop != nil && index == 0) {
            finished.enter()
            startThread {
                let result = Result { () throws(DownloadError) in try prober.probe(url, skipHead: skipHead) }
                results.withLock { $0[index] = result }
                finished.leave()
            }
        }
        var opened: Opening?
        if let loop {
            let transfer = options.transfer
            let request = try? Opening(url: url, length: min(options.minimumSplit, options.openingLimit), options: transfer,
                                       loop: loop)
            // With other mirrors, one that ignores ranges is dropped rather than
            // making the whole download one stream (the classic probe and the
            // engine see to that).
            let timeout = transfer.connectTimeout + transfer.stallTimeout
            if let request, let remote = request.probe(url: url, timeout: timeout, wholeFile: mirrors.count == 1) {
                opened = request
                results.withLock { $0[0] = .success(remote) }
            } else {
                prober.connectionsOpened.add(request?.connectionsOpened ?? 0)
                let result = Result { () throws(DownloadError) in try prober.probe(url) }
                results.withLock { $0[0] = result }
            }
        }
        finished.wait()
        let outcomes = results.withLock { $0 }
        var usable: [RemoteFile] = []
        var reports: [MirrorReport] = []
        var firstError: DownloadError?
        for index in mirrors.indices {
            var report = MirrorReport(url: mirrors[index], bytes: 0, seconds: 0, errors: 0, dropped: nil)
            switch outcomes[index]! {
            case let .failure(error):
                firstError = firstError ?? error
                report.errors = 1
                report.dropped = "probe failed: \(error)"
            case let .success(remote):
                if let reference = usable.first, let problem = Self.disagreement(remote, with: reference) {
                    report.dropped = problem
                } else {
                    usable.append(remote)
                }
            }
            if let dropped = report.dropped, mirrors.count > 1 {
                onEvent(.mirrorDropped(url: mirrors[index], reason: dropped))
            }
            reports.append(report)
        }
        guard !usable.isEmpty else { throw firstError! }
        return (usable, reports, opened)
    }

    /// Why `remote` cannot be a mirror of `reference`, or nil.
    static func disagreement(_ remote: RemoteFile, with reference: RemoteFile) -> String? {
        if remote.size != reference.size {
            return "its size (\(remote.size.map(String.init) ?? "unknown")) differs from \(reference.url) (\(reference.size.map(String.init) ?? "unknown"))"
        }
        if let mine = remote.strongETag, let theirs = reference.strongETag, mine != theirs {
            return "its ETag \(mine) differs from \(reference.url)'s \(theirs)"
        }
        return nil
    }

    /// Probe-time reports, each used mirror's replaced by its engine figures
    /// (summed over engine runs), cleaned for the result (`OutgoingText`).
    func merge(_ probed: [MirrorReport], _ engine: [String: MirrorReport]) -> [MirrorReport] {
        probed.map { report in
            guard report.dropped == nil, let used = engine[report.url] else { return report.cleaned }
            return used.cleaned
        }
    }

    /// The file as the manifest of a partial download of `url` describes it,
    /// when that manifest holds a validator `If-Range` can carry (a strong
    /// ETag, else Last-Modified when there is no ETag): the resume then sends
    /// its first ranged requests at once, each with `If-Range`, instead of
    /// probing first, and a changed file is still caught (its server answers
    /// 200, with the new validator). Nil with several mirrors (the others
    /// must be probed to be compared), with `probeWithHead`, or when no such
    /// manifest is there (for the output `guessed`).
    private func resumableWithoutProbe(at guessed: String) -> RemoteFile? {
        guard mirrors.count == 1, !options.probeWithHead,
              let stored = try? Manifest.load(from: PartialFiles(output: guessed).manifest),
              stored.knownURLs.contains(Manifest.redacting(url)) else { return nil }
        let remote = RemoteFile(url: url, effectiveURL: url, size: stored.size, etag: stored.etag,
                                lastModified: stored.lastModified, acceptsRanges: true, contentDisposition: nil)
        return remote.ifRange == nil ? nil : remote
    }

    /// True when a manifest or a data file lies beside `output` (where this
    /// download writes without a Content-Disposition name): a partial
    /// download to resume (or a file of another program's that the download
    /// will refuse).
    private static func partialDownloadExists(at output: String) -> Bool {
        let files = PartialFiles(output: output)
        var info = stat()
        return lstat(files.manifest, &info) == 0 || lstat(files.data, &info) == 0
    }

    /// The output path, named (for a directory) from `contentDisposition` or `url`.
    private func outputPath(url: String, contentDisposition: String?) -> String {
        switch destination {
        case let .file(path):
            return path
        case let .directory(directory):
            let name = FileName.choose(url: url, contentDisposition: contentDisposition)
            return directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }

    /// Refuses to overwrite a finished file without `overwrite`, and fails early on an unusable directory.
    /// Returns true when a finished file is there already (and `overwrite`
    /// is off): the download then only checks it is still the server's.
    private func checkWritable(output: String) throws(DownloadError) -> Bool {
        var info = stat()
        var exists = false
        if lstat(output, &info) == 0 {
            if (info.st_mode & S_IFMT) == S_IFDIR { throw .usage("\(output) is a directory") }
            if !options.overwrite {
                guard (info.st_mode & S_IFMT) == S_IFREG else {
                    throw .usage("\(output) already exists and is not a regular file", remedy: .overwrite)
                }
                exists = true
            }
        }
        let folder = StateFile.directory(of: output)
        var folderInfo = stat()
        guard stat(folder, &folderInfo) == 0, (folderInfo.st_mode & S_IFMT) == S_IFDIR else {
            throw .usage("\(folder) is not a directory")
        }
        guard access(folder, W_OK) == 0 else {
            throw .usage("cannot write to directory \(folder): \(String(cString: strerror(errno)))")
        }
        return exists
    }

    /// The result for a finished file already at `output` that is still what
    /// `remote` serves (same size, and the same validators where its origin
    /// recorded them); a usage error naming the difference when it is not.
    private func alreadyComplete(_ output: String, remote: RemoteFile, reports: [MirrorReport], seconds: Double,
                                 tcpConnections: Int) throws(DownloadError) -> DownloadResult {
        var info = stat()
        guard lstat(output, &info) == 0 else { throw .io(IOError("examine", output)) }
        if let why = FileOrigin.difference(size: Int64(info.st_size), origin: FileOrigin(path: output), remote: remote) {
            throw .usage("\(output) already exists and is not the server's file now (\(why))", remedy: .overwrite)
        }
        return DownloadResult(path: output, size: Int64(info.st_size), seconds: seconds, bytesFetched: 0,
                              bytesReused: Int64(info.st_size), retries: 0, mirrors: reports, connectionsUsed: 0,
                              tcpConnections: tcpConnections, alreadyComplete: true)
    }

    /// The manifest to resume from, or nil to start from zero (then the data file is emptied).
    private func resumeState(
        file: OutputFile, manifestPath: String, sources: [RemoteFile], restart: Bool,
        onEvent: @Sendable (DownloadEvent) -> Void
    ) throws(DownloadError) -> Manifest? {
        if restart {
            try discard(file: file, manifestPath: manifestPath)
            return nil
        }
        let loaded: Manifest?
        do {
            loaded = try Manifest.load(from: manifestPath)
        } catch {
            throw .manifest(error)
        }
        guard var stored = loaded else {
            // Rangeget's own data file without a manifest (a single stream):
            // empty it, and drop any journal a lost manifest left behind (a
            // file just created is empty already, and no manifest is there).
            if file.isNew {
                do { try StateFile.remove(PartialFiles(data: file.path).journal) } catch { throw .io(error) }
            } else {
                try discard(file: file, manifestPath: manifestPath)
            }
            return nil
        }
        // The manifest belongs to the file, not to one URL: a URL it records
        // is compared as usual; any other must prove it serves the same file.
        let known = stored.knownURLs
        guard let remote = sources.first(where: { known.contains(Manifest.redacting($0.url)) }) else {
            try checkSameFile(stored, served: sources[0], by: file, manifestPath: manifestPath)
            stored.record(sources.map(\.url))
            onEvent(.resuming(bytesDone: stored.done.byteCount))
            return stored
        }
        stored.record(sources.map(\.url))
        if let etag = stored.etag, etag == remote.etag, let size = remote.size, size != stored.size {
            // Same version of the file, other size: the manifest cannot describe it.
            throw .manifest(ManifestError(
                path: manifestPath, problem: "records a size of \(stored.size) bytes, but the file (same ETag) has \(size)"))
        }
        var reason = stored.mismatch(with: remote).map { "the remote file changed since the last run: \($0)" }
        if reason == nil, !remote.acceptsRanges { reason = "the server does not serve the byte ranges a resume needs" }
        if reason == nil, file.currentSize() < (stored.done.ranges.last?.end ?? 0) {
            reason = "\(file.path) is shorter than its manifest says"
        }
        if reason == nil, stored.etag == nil, stored.lastModified == nil {
            // Nothing to send as If-Range: compare a few stored bytes with the server's.
            var random = SystemRandomNumberGenerator()
            let samples = SpotCheck.samples(of: stored.done, count: SpotCheck.sampleCount,
                                            length: SpotCheck.sampleLength, using: &random)
            if let differing = try SpotCheck.firstDifference(in: file, url: remote.effectiveURL, size: stored.size,
                                                             samples: samples, options: options.transfer) {
                reason = "the remote file changed since the last run: its bytes \(differing) differ from the partial "
                    + "download (the server sends no ETag or Last-Modified to tell)"
            }
        }
        if let reason {
            onEvent(.restarting(reason: reason + "; starting over"))
            try discard(file: file, manifestPath: manifestPath)
            return nil
        }
        onEvent(.resuming(bytesDone: stored.done.byteCount))
        return stored
    }

    /// Accepts a URL the manifest does not record as a source of its file
    /// only when it serves that file: the same size and strong ETag, or (with
    /// no strong ETag on either side) the same bytes at a few random places
    /// of those on disk. Anything else is someone else's file: refused (exit
    /// 4), never spliced, and the partial download is kept for its own URLs.
    private func checkSameFile(_ stored: Manifest, served remote: RemoteFile, by file: OutputFile,
                               manifestPath: String) throws(DownloadError) {
        let known = stored.knownURLs.joined(separator: ", ")
        func refuse(_ why: String) -> DownloadError {
            .manifest(ManifestError(path: manifestPath, problem: "was started from \(known), and \(Manifest.redacting(remote.url)) "
                + "\(why) (one of those URLs resumes it)"))
        }
        guard remote.size == stored.size else {
            throw refuse("serves \(remote.size.map { "\($0) bytes" } ?? "a file of unknown length"), not \(stored.size)")
        }
        let storedTag = stored.etag.flatMap { $0.hasPrefix("W/") ? nil : $0 }
        if let storedTag, let theirs = remote.strongETag {
            guard storedTag == theirs else { throw refuse("serves ETag \(theirs), not \(storedTag)") }
            return
        }
        var random = SystemRandomNumberGenerator()
        let samples = SpotCheck.samples(of: stored.done, count: SpotCheck.sampleCount, length: SpotCheck.sampleLength,
                                        using: &random)
        if let differing = try SpotCheck.firstDifference(in: file, url: remote.effectiveURL, size: stored.size,
                                                         samples: samples, options: options.transfer) {
            throw refuse("serves other bytes at \(differing)")
        }
    }

    /// Empties the data file and removes the manifest and the write journal
    /// (first: its bytes must never be added to a new manifest).
    private func discard(file: OutputFile, manifestPath: String) throws(DownloadError) {
        do {
            try StateFile.remove(PartialFiles(data: file.path).journal)
            try file.truncate(to: 0)
            try StateFile.remove(manifestPath)
        } catch {
            throw .io(error)
        }
    }

    /// Removes the `.part` file at `partPath`, its manifest, journal and
    /// mark, unless another download holds the lock on it (then it is theirs
    /// to keep) or it is not rangeget's (a link, another program's file).
    static func discardPartial(at partPath: String) throws(DownloadError) {
        let files = PartialFiles(data: partPath)
        let file: OutputFile
        do {
            file = try OutputFile(existing: partPath)
            guard try file.lockExclusively(), file.ownershipProblem(manifest: files.manifest) == nil else { return }
        } catch {
            if error.code == ENOENT || error.code == ELOOP { return }
            throw .io(error)
        }
        do {
            file.unmark()
            for path in [files.journal, partPath, files.manifest] { try StateFile.remove(path) }
        } catch {
            throw .io(error)
        }
    }

    /// Saves `manifest` as complete, durably (a new one for a file fetched in one response).
    private func keepAsComplete(_ manifest: Manifest?, remote: RemoteFile, size: Int64, at path: String,
                                problem: String? = nil) throws(IOError) {
        // A file fetched in one response has none yet: `status` and the next run need one now.
        var complete = manifest ?? Manifest(remote: remote, size: size)
        if manifest == nil { complete.record([remote.url]) }
        complete.done = RangeSet([ByteRange(0, size)])
        complete.problem = problem
        try complete.save(to: path, calls: options.systemCalls)
    }

    /// Verifies the length, makes the data durable and moves it into place:
    /// never over a file that appeared at `output` since the start, unless
    /// `overwrite`; then the data stays, recorded as complete in `manifest`.
    private func finish(file: OutputFile, size: Int64, output: String, files: PartialFiles, manifest: Manifest?,
                        remote: RemoteFile, onEvent: @Sendable (DownloadEvent) -> Void) throws(DownloadError) {
        do {
            if file.currentSize() > size { try file.truncate(to: size) }
            let actual = file.currentSize()
            guard actual == size else {
                throw DownloadError.verification("\(file.path) has \(actual) bytes, expected \(size)")
            }
            if let checksum = try options.expectedChecksum(savingAs: output, data: file.path) {
                let actual = try Checksum.digest(of: file.path, algorithm: checksum.algorithm)
                guard actual == checksum.hex else {
                    let problem = "\(checksum.algorithm.rawValue) is \(actual), expected \(checksum.hex)"
                    // Complete, but not what was expected: `status` says so, and
                    // a rerun checks again without fetching a byte.
                    try keepAsComplete(manifest, remote: remote, size: size, at: files.manifest, problem: problem)
                    throw DownloadError.verification(
                        "\(checksum.algorithm.rawValue) of the download is \(actual), expected \(checksum.hex); "
                            + "the data stays in \(file.path)", remedy: .restart)
                }
            }
            let origin = FileOrigin(url: Manifest.redacting(remote.url), etag: remote.etag,
                                    lastModified: remote.lastModified)
            if try !origin.record(on: file.descriptor) {
                onEvent(.notice("the file system of \(output) keeps no extended attributes: a later run can compare "
                                + "only its size with the server's, not its ETag"))
            }
            // Once the data is durable: the final name, then the directory made durable.
            let commit = SyncGroup.Commit(file: file, directory: StateFile.directory(of: output)) { [self] in
                do {
                    try file.move(to: output, replacing: options.overwrite)
                } catch let error as IOError where error.code == EEXIST {
                    try keepAsComplete(manifest, remote: remote, size: size, at: files.manifest)
                    throw DownloadError.usage("\(output) appeared during the download (the data stays in \(file.path))",
                                              remedy: .overwrite)
                }
                file.unmark()
                // Without a manifest there is no journal either (the engine keeps one only beside a manifest).
                if manifest != nil {
                    for path in [files.journal, files.manifest] { try StateFile.remove(path) }
                }
            }
            if let group = options.syncGroup {
                try group.commit(commit, calls: options.systemCalls)
            } else {
                SyncGroup.run([commit], calls: options.systemCalls)
                if let failure = commit.failure { throw failure }
            }
        } catch let error as IOError {
            throw .io(error)
        } catch {
            throw error as! DownloadError
        }
    }
}
