// DownloadSession: what several downloads share, as URLSession is for
// requests. One transfer loop (one curl multi handle on one thread: its
// connection cache, its DNS cache and the connection budget of every
// download made from the session, probes included), one worker thread on
// which every download's attempts run as tasks, and one group commit for
// the files of its lists. A download made without a session (`Download(url:destination:)`)
// runs alone: its own multi handle, driven on the thread that runs it, its
// own `connections`. That is the command line's single file, and the
// fastest way to fetch one file; a program with many files makes a session,
// or uses `DownloadSession.shared`.
import FoundationEssentials
import Synchronization
import SystemSupport

/// Downloads that share connections: one multi handle and one connection
/// budget for all of them.
///
/// Make one per group of downloads that should share connections and a
/// limit, or use ``shared``. Each ``Download`` made from a session keeps to
/// its own ``DownloadOptions/connections`` as well as to the session's
/// ``Configuration/connections``. A session lives as long as its downloads.
/// It runs on two threads whatever the number of its downloads: one moves
/// the bytes, one runs the downloads' steps between transfers (a download
/// waiting for the network holds neither); both end after a second with
/// nothing to do.
public final class DownloadSession: Sendable {
    /// What a session shares among its downloads.
    public struct Configuration: Sendable, Equatable {
        /// The most transfers at once over every download of the session
        /// (connections, or HTTP/2 streams when multiplexing). At least 1.
        public var connections = 16
        /// Let transfers to one HTTP/2 server share a connection as streams.
        public var multiplex = false
        /// The most bytes per second over every download of the session;
        /// nil: no limit.
        public var maxBytesPerSecond: Int64?

        /// The defaults: 16 connections, no multiplexing, no rate limit.
        public init() {}

        /// A configuration of `connections` transfers at once.
        public init(connections: Int, multiplex: Bool = false, maxBytesPerSecond: Int64? = nil) {
            self.connections = connections
            self.multiplex = multiplex
            self.maxBytesPerSecond = maxBytesPerSecond
        }
    }

    /// The session for code that never makes one: 16 connections at once.
    public static let shared = DownloadSession()

    /// What the session shares.
    public let configuration: Configuration

    /// The loop, made at the first download that needs it (making a multi
    /// handle can fail, and a failure belongs to a download, not to `init`).
    private let madeLoop = Mutex<TransferLoop?>(nil)
    /// The group commit of the files of the session's lists.
    let syncGroup = SyncGroup()
    /// The thread every download of the session runs its attempts on, as
    /// tasks that wait for their transfers and probes without holding it
    /// (named so it can be counted; it ends after a second with no work).
    let worker = ThreadExecutor.startingThreads(named: "rangeget worker")
    /// The rate limit every download of the session shares, if any.
    let rateLimit: RateLimit?

    /// A session sharing what `configuration` says among its downloads.
    public init(configuration: Configuration = Configuration()) {
        precondition(configuration.connections > 0, "a session needs a connection")
        self.configuration = configuration
        rateLimit = configuration.maxBytesPerSecond.map { RateLimit(bytesPerSecond: $0) }
    }

    /// The session's transfer loop, made on first use.
    package func transferLoop() throws(DownloadError) -> TransferLoop {
        let made = madeLoop.withLock { made -> Result<TransferLoop, CurlError> in
            if let made { return .success(made) }
            do throws(CurlError) {
                let loop = try TransferLoop(
                    threaded: true, multiplex: configuration.multiplex,
                    connections: configuration.connections, limit: configuration.connections)
                made = loop
                return .success(loop)
            } catch {
                return .failure(error)
            }
        }
        switch made {
        case let .success(loop): return loop
        case let .failure(error):
            throw .network(url: "", message: "cannot set up libcurl: \(error.message)", failure: error.failure)
        }
    }

    /// The loop, if one was made: for the figures, and for a list that recycles connections.
    package var loopIfMade: TransferLoop? { madeLoop.withLock { $0 } }

    /// Transfers running now over every download of the session.
    public var connectionsInUse: Int { loopIfMade?.connectionsInUse ?? 0 }

    /// The most transfers that ran at once so far over the session.
    public var peakConnectionsInUse: Int { loopIfMade?.peakConnectionsInUse ?? 0 }

    /// A download of `url` to `destination` that shares this session's connections.
    public func download(
        from url: String, to destination: Destination,
        options: DownloadOptions = DownloadOptions()
    ) -> Download {
        download(mirrors: [url], to: destination, options: options)
    }

    /// A download of `url` to `destination` that shares this session's connections.
    public func download(
        from url: URL, to destination: Destination,
        options: DownloadOptions = DownloadOptions()
    ) -> Download {
        download(mirrors: [url.absoluteString], to: destination, options: options)
    }

    /// A download of the file behind `mirrors` (at least one URL; the first
    /// names the download) that shares this session's connections.
    public func download(
        mirrors: [String], to destination: Destination,
        options: DownloadOptions = DownloadOptions()
    ) -> Download {
        Download(mirrors: mirrors, destination: destination, window: nil, options: options, session: self)
    }

    /// A download of the file behind `mirrors` (at least one URL; the first
    /// names the download) that shares this session's connections.
    public func download(
        mirrors: [URL], to destination: Destination,
        options: DownloadOptions = DownloadOptions()
    ) -> Download {
        download(mirrors: mirrors.map(\.absoluteString), to: destination, options: options)
    }
}

extension DownloadSession {
    /// Downloads a small resource into memory on this session's connections
    /// (see ``Download/data(from:limit:options:)-(String,_,_)``).
    public func data(
        from url: String, limit: Int64 = Download.defaultDataLimit,
        options: DownloadOptions = DownloadOptions()
    ) async throws(DownloadError) -> Data {
        try await Download.data(from: url, limit: limit, options: options, session: self)
    }

    /// Downloads a small resource into memory on this session's connections.
    public func data(
        from url: URL, limit: Int64 = Download.defaultDataLimit,
        options: DownloadOptions = DownloadOptions()
    ) async throws(DownloadError) -> Data {
        try await Download.data(from: url.absoluteString, limit: limit, options: options, session: self)
    }
}

extension DownloadSession {
    /// A list of files to fetch into `directory`, at most `jobs` at once
    /// (nil: `options.connections`), sharing this session's connections.
    /// An entry's ``DownloadList/Entry/output`` names its file in
    /// `directory`; otherwise the server or the URL does. A checksum list
    /// (``DownloadOptions/checksumList``, read with
    /// ``Checksum/list(parsing:)``) is looked up by each file's saved name.
    public func list(
        _ entries: [DownloadList.Entry], into directory: String = ".",
        options: DownloadOptions = DownloadOptions(), jobs: Int? = nil
    ) -> DownloadList {
        DownloadList(
            entries: entries, directory: directory, options: options, jobs: jobs, session: self,
            ownsSession: false)
    }

    /// A list on a session of its own whose every connection is the
    /// list's, so a finished opening's connection serves the next file
    /// (the command line's `-i`).
    package func exclusiveList(
        _ entries: [DownloadList.Entry], into directory: String, options: DownloadOptions,
        jobs: Int?
    ) -> DownloadList {
        DownloadList(
            entries: entries, directory: directory, options: options, jobs: jobs, session: self,
            ownsSession: true)
    }
}
