// A download read in order while several connections fetch ahead:
// `rangeget -o - URL | tar x`, and `Download.bytes(from:)`, the parallel
// counterpart of URLSession's `bytes(from:)`. The same engine as for a file,
// with a StreamWindow for its sink: pieces are planned in file order inside
// the window, and the reader takes the bytes as soon as they are contiguous.
// Mirrors, retries and validators work as for a file; a checksum is computed
// as the bytes are read and decides the outcome at the end. A stream keeps
// nothing on disk, so a later run cannot resume it, and bytes the reader has
// taken are never taken back: a file that changes after that fails the
// download instead of starting over.
import FoundationEssentials
import Synchronization
import SystemSupport

/// The bytes of a download in file order, as chunks, while its connections
/// fetch ahead inside a window of `DownloadOptions.streamWindow` bytes.
///
/// Iterating starts the download. The sequence ends after the last byte when
/// the download succeeded (its checksum too, when one was given) and throws
/// the `DownloadError` otherwise. Cancelling the iterating task, ending the
/// iteration early (a `break` or a `throw` out of `for try await`: the
/// iterator is dropped before the end), or dropping the sequence before its
/// end cancels the download at once and frees its window, as URLSession's
/// `AsyncBytes` does. `download` gives its events, state, pause and resume.
///
/// Read it once: chunks are handed out once, to the first iterator made.
/// Any later iterator of the same stream (a second `for try await` loop)
/// throws `DownloadError.usage` at its first `next()` and changes nothing;
/// `Download.bytes(from:)` makes a new stream to read the file again.
public final class DownloadStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    /// What iterating throws: `for try await` over a stream compiles inside
    /// a `throws(DownloadError)` function.
    public typealias Failure = DownloadError

    /// The download behind the bytes.
    public let download: Download
    let window: StreamWindow
    /// True once an iterator was made: the bytes go to that one alone.
    private let iterated = Atomic<Bool>(false)

    /// The most bytes in one chunk.
    public static let chunkSize = 256 << 10

    init(mirrors: [String], options: DownloadOptions, session: DownloadSession?) {
        window = StreamWindow(capacity: options.streamWindow, digest: options.checksum?.algorithm.digest)
        download = Download(mirrors: mirrors, window: window, options: options, session: session)
    }

    deinit {
        cancel()
    }

    /// Stops the download and the reading, and frees the window; the
    /// sequence then throws `.interrupted`. Safe from any thread.
    public func cancel() {
        window.abandon()
        download.cancel()
    }

    /// The next chunk in file order; nil after the last one.
    func next() async throws(DownloadError) -> [UInt8]? {
        download.start()
        let result: Result<[UInt8]?, DownloadError> = await withTaskCancellationHandler {
            do throws(DownloadError) {
                return .success(try await window.next(atMost: Self.chunkSize))
            } catch {
                return .failure(error)
            }
        } onCancel: {
            cancel()
        }
        return try result.get()
    }

    /// Waits for the next bytes in file order and lends them to `body`,
    /// which must be done with them when it returns (no copy is made); false
    /// after the last byte of a download that succeeded, and throws how it
    /// ended otherwise. For a thread that writes the bytes on (a pipe, a
    /// socket) while another runs the download (`download.run(onEvent:)`).
    @available(*, noasync, message: "blocks the calling thread; iterate the sequence instead")
    public func read(atMost limit: Int = 1 << 20, _ body: (UnsafeRawBufferPointer) -> Void) throws(DownloadError)
        -> Bool
    {
        try window.read(atMost: limit, body)
    }

    /// The most bytes the window held at once: written ahead of the reader and not yet read.
    public var peakBytesHeld: Int64 { window.peakBytesHeld }

    /// Bytes the reader has finished with.
    public var bytesRead: Int64 { window.bytesRead }

    /// Reads the chunks in order; dropped before the end, it cancels the download.
    public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
        /// The stream's one reading; nil for a later iterator, which only throws.
        private let reading: Reading?

        fileprivate init(reading: Reading?) {
            self.reading = reading
        }

        /// The next chunk in file order; nil after the last one.
        public mutating func next() async throws(DownloadError) -> [UInt8]? {
            try await read()
        }

        /// The same, as `for try await` calls it (on the caller's actor).
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(DownloadError) -> [UInt8]? {
            try await read()
        }

        private func read() async throws(DownloadError) -> [UInt8]? {
            guard let reading else {
                throw DownloadError.usage(
                    "a DownloadStream is read once, by its first iterator; "
                        + "Download.bytes(from:) makes a new one")
            }
            return try await reading.next()
        }
    }

    /// The iterator of the chunks: the first one made reads them; any later one throws `.usage`.
    public func makeAsyncIterator() -> AsyncIterator {
        let first = !iterated.exchange(true, ordering: .relaxed)
        return AsyncIterator(reading: first ? Reading(self) : nil)
    }

    /// What the first iterator and its copies share: when the last of them
    /// goes before the sequence ended, the iteration was left early, and the
    /// download is cancelled (the sequence itself may live on).
    fileprivate final class Reading: Sendable {
        let stream: DownloadStream
        /// True once the sequence ended: after its last chunk, or by throwing.
        let ended = Atomic<Bool>(false)

        init(_ stream: DownloadStream) {
            self.stream = stream
        }

        deinit {
            if !ended.load(ordering: .relaxed) { stream.cancel() }
        }

        func next() async throws(DownloadError) -> [UInt8]? {
            do {
                let chunk = try await stream.next()
                if chunk == nil { ended.store(true, ordering: .relaxed) }
                return chunk
            } catch {
                ended.store(true, ordering: .relaxed)
                throw error
            }
        }
    }
}

extension Download {
    /// The file at `url` (and its `mirrors`, which must serve the same
    /// file), read in order as it arrives over several connections.
    ///
    ///     for try await chunk in Download.bytes(from: url) { consume(chunk) }
    ///
    /// Memory stays within `options.streamWindow` (64 MiB by default)
    /// however slow the reader: the connections wait while it is behind.
    public static func bytes(from url: String, mirrors: [String] = [], options: DownloadOptions = DownloadOptions())
        -> DownloadStream
    {
        DownloadStream(mirrors: [url] + mirrors, options: options, session: nil)
    }

    /// `bytes(from:mirrors:options:)` for `URL`s.
    public static func bytes(from url: URL, mirrors: [URL] = [], options: DownloadOptions = DownloadOptions())
        -> DownloadStream
    {
        DownloadStream(mirrors: ([url] + mirrors).map(\.absoluteString), options: options, session: nil)
    }
}

extension DownloadSession {
    /// The file at `url` (and its `mirrors`) read in order as it arrives, on
    /// this session's connections (see ``Download/bytes(from:mirrors:options:)-(String,_,_)``).
    public func bytes(from url: String, mirrors: [String] = [], options: DownloadOptions = DownloadOptions())
        -> DownloadStream
    {
        DownloadStream(mirrors: [url] + mirrors, options: options, session: self)
    }

    /// The file at `url` (and its `mirrors`) read in order as it arrives, on this session's connections.
    public func bytes(from url: URL, mirrors: [URL] = [], options: DownloadOptions = DownloadOptions())
        -> DownloadStream
    {
        DownloadStream(mirrors: ([url] + mirrors).map(\.absoluteString), options: options, session: self)
    }
}

extension Download {
    /// One attempt of a download read in order: probe, then transfer into
    /// `window` until every byte is read, the download fails or it is stopped.
    func stream(
        into window: StreamWindow, tally: inout Tally, onEvent: @escaping @Sendable (DownloadEvent) -> Void
    ) async throws(DownloadError) -> DownloadResult {
        for mirror in mirrors { try RemoteURL.check(mirror) }
        let started = MonotonicClock.now()
        defer { tally.seconds += MonotonicClock.now() - started }
        tally.attempts += 1
        let loop = try transferLoop()
        let prober = Prober(options: options.transfer, loop: loop)
        defer { tally.tcpConnections += prober.connectionsOpened.total }
        // The opening request fetches the first bytes: only while none are written.
        var (sources, probeReports, opening) = try await probeMirrors(
            prober, opening: window.done.isEmpty ? loop : nil, onEvent: onEvent)
        var remote = sources[0]
        let first = window.record(remote)
        if let problem = first.differs(from: remote) ?? Self.disagreement(remote, with: first) {
            throw .verification(
                "\(url) \(problem) now, after \(window.bytesRead) bytes were passed on; a stream "
                    + "cannot take them back")
        }
        onEvent(.probed(remote))
        var policy = OutcomePolicy()
        while true {
            if controller.isStopRequested { throw .stopped }
            let plain = !remote.acceptsRanges || remote.size == nil
            if plain { sources = [remote] }
            let engine = Engine(
                mirrors: sources, sink: .stream(window), manifest: nil, manifestPath: nil, settings: options,
                plain: plain, loop: loop, opening: opening, onEvent: onEvent)
            opening = nil
            let fetchedBefore = tally.fetched
            let outcome = await run(engine, tally: &tally)
            let step = policy.next(
                after: outcome, url: url, mirrors: sources.map(\.url), unprobed: false,
                progressed: tally.fetched > fetchedBefore)
            switch step {
            case let .finish(size):
                try await window.finishWriting(size: size)
                if let checksum = options.checksum, let actual = window.finishDigest(), actual != checksum.hex {
                    throw .verification(
                        "\(checksum.algorithm.rawValue) of the stream is \(actual), expected "
                            + "\(checksum.hex); every byte was passed on already")
                }
                return finished(
                    path: "-", size: size, remote: remote, tally: tally, since: started, probed: probeReports,
                    prober: prober, onEvent: onEvent)
            case let .fail(error):
                throw error
            case .probe:
                preconditionFailure("a stream always probes first")
            case let .startOver(reason):
                guard window.restart() else {
                    throw .verification(
                        "the remote file changed (\(reason)) after \(window.bytesRead) bytes were "
                            + "passed on; a stream cannot take them back")
                }
                onEvent(.restarting(reason: "the remote file changed (\(reason)); starting over"))
                (sources, probeReports, _) = try await probeMirrors(prober, skipHead: true, onEvent: onEvent)
                remote = window.record(sources[0])
            case let .renew(index):
                try await renew(&sources, index: index, prober: prober, onEvent: onEvent)
                if index == 0 { remote = sources[0] }
            case let .singleStream(reason):
                // One stream from byte 0: the bytes the reader has are skipped as they come again.
                onEvent(.restarting(reason: "\(reason); downloading as one stream from the start"))
                remote.acceptsRanges = false
            }
        }
    }
}
