// DownloadEvent: what a running download reports, in order, to whoever
// watches it (the CLI's display, a library user's UI).

/// Live figures of a running download.
public struct DownloadProgress: Sendable, Equatable {
    /// Bytes of the file on disk and valid, including those from earlier runs.
    public var bytesDone: Int64
    /// The file's length, nil while unknown.
    public var totalBytes: Int64?
    /// Recent throughput in bytes per second.
    public var bytesPerSecond: Double
    /// Transfers running now.
    public var activeConnections: Int
    /// The bytes on disk, for a map of the file.
    public var completed: RangeSet
    /// The bytes the running transfers are still fetching.
    public var inFlight: [ByteRange]
    /// Each running transfer's bytes so far, for a graph per connection.
    public var transfers: [TransferProgress]

    /// Figures as given.
    public init(
        bytesDone: Int64, totalBytes: Int64?, bytesPerSecond: Double, activeConnections: Int,
        completed: RangeSet = RangeSet(), inFlight: [ByteRange] = [], transfers: [TransferProgress] = []
    ) {
        self.bytesDone = bytesDone
        self.totalBytes = totalBytes
        self.bytesPerSecond = bytesPerSecond
        self.activeConnections = activeConnections
        self.completed = completed
        self.inFlight = inFlight
        self.transfers = transfers
    }

    /// Seconds left at the current rate, nil when unknown; never negative,
    /// and computed in Double, so no size a server claims can overflow it.
    public var secondsLeft: Double? {
        guard let totalBytes, bytesPerSecond > 0 else { return nil }
        return max(0, Double(totalBytes) - Double(bytesDone)) / bytesPerSecond
    }
}

/// One thing that happened during a download.
public enum DownloadEvent: Sendable {
    /// The probe learned the file's size, validators and range support.
    case probed(RemoteFile)
    /// The download goes on from a partial download an earlier run (or an
    /// earlier `Download`) left: `bytesDone` bytes of it are reused from
    /// disk. Not the same as ``resumed``, which follows a ``Download/pause()``.
    case reusing(bytesDone: Int64)
    /// The partial download is discarded and started again, and why.
    case restarting(reason: String)
    /// Periodic progress, at most about ten times a second.
    case progress(DownloadProgress)
    /// The transfer on `connection` failed, for `cause` (told in words in
    /// `reason`), and its remaining bytes will be fetched again after
    /// `delay` seconds (by whichever connection is free then): the
    /// `attempt`th of at most `attempts` at them that got nowhere (a cut
    /// that made progress starts the count again). A probe's retry is on
    /// connection 0.
    case retry(connection: Int, cause: RetryCause, reason: String, delay: Double, attempt: Int, attempts: Int)
    /// Something worth telling the user that changes nothing in the outcome.
    case notice(String)
    /// A mirror is no longer used, and why.
    case mirrorDropped(url: String, reason: String)
    /// What the engine did with the file's pieces and connections, for a
    /// map of the transfers or a log; a progress bar or a status line needs
    /// none of it (``progress(_:)`` carries the figures).
    case transfer(TransferEvent)
    /// `pause()` took effect: every transfer stopped and the manifest is
    /// saved; `state` becomes `.paused` next, unless a `resume()` that came
    /// meanwhile continues at once (then `resumed` follows) or a `cancel()`
    /// ends the download.
    case paused
    /// A paused download goes on after `resume()`: it fetches only what is
    /// missing, with `If-Range` (or after a new probe), so a changed file restarts.
    case resumed
    /// Every byte of the file is fetched and written: it is verified (its
    /// length, and its checksum when one is expected), made durable and
    /// moved to its name next, and `finished` follows (or, when that fails,
    /// the download's error). A list starts its next file here: the commit
    /// no longer needs the network.
    case fetched(bytes: Int64)
    /// The file is complete and in place.
    case finished(DownloadResult)
}

/// One running transfer in a progress report (``DownloadProgress/transfers``).
public struct TransferProgress: Sendable, Equatable {
    /// The connection (as in ``TransferEvent/pieceStarted(connection:range:url:)``).
    public var connection: Int
    /// Bytes it received so far.
    public var bytes: Int64

    /// A transfer's progress, for tests and for events a program makes itself.
    public init(connection: Int, bytes: Int64) {
        self.connection = connection
        self.bytes = bytes
    }
}

/// How one transfer's request went, from libcurl's clock
/// (``TransferEvent/transferTimed(connection:timing:)``).
public struct TransferTiming: Sendable, Equatable {
    /// The local port of its TCP connection, which names that connection
    /// (keep-alive reuse keeps it; HTTP/2 streams share it); nil when none was made.
    public var localPort: Int?
    /// True when this request opened its TCP connection; false when it reused one.
    public var newConnection: Bool
    /// Seconds from the request until the TCP connection was made (0 when reused).
    public var connect: Double
    /// Seconds from the request until the TLS handshake was done (0 without TLS, or when reused).
    public var tls: Double
    /// Seconds from the request until its first byte; nil when none came.
    public var firstByte: Double?
    /// Bytes of the body it received and accepted (a mirror's
    /// ``MirrorReport/bytes`` are the sum of its transfers').
    public var bytes: Int64
    /// The response's HTTP status; 0 when none came.
    public var status: Int
    /// The response's HTTP version ("1.1", "2"); nil when none came.
    public var httpVersion: String?
    /// Why it ended early; nil when it fetched all it was asked for.
    public var endedEarly: String?

    /// A timing, for tests and for events a program makes itself.
    public init(
        localPort: Int?, newConnection: Bool, connect: Double, tls: Double, firstByte: Double?, bytes: Int64,
        status: Int, httpVersion: String?, endedEarly: String?
    ) {
        self.localPort = localPort
        self.newConnection = newConnection
        self.connect = connect
        self.tls = tls
        self.firstByte = firstByte
        self.bytes = bytes
        self.status = status
        self.httpVersion = httpVersion
        self.endedEarly = endedEarly
    }
}

/// What the engine did with a download's pieces and connections
/// (``DownloadEvent/transfer(_:)``).
public enum TransferEvent: Sendable {
    /// A connection started fetching `range` from the mirror at `url`.
    case pieceStarted(connection: Int, range: ByteRange, url: String)
    /// A connection's transfer ended; `written` is what it put on disk.
    case pieceFinished(connection: Int, written: ByteRange, complete: Bool)
    /// How the transfer that ends next on `connection` went (it comes just
    /// before that transfer's `pieceFinished`).
    case transferTimed(connection: Int, timing: TransferTiming)
    /// A free connection took over `range`, the end of connection `from`'s piece.
    case stolen(from: Int, range: ByteRange)
    /// The placement moved `count` connections from the mirror at `from`
    /// to the one at `to`, where they add more (their ranges go back to the queue).
    case connectionsMoved(from: String, to: String, count: Int)
    /// The learned connection count (``DownloadOptions/automaticConnections``)
    /// changed to `count`; `reason` says what the measurements showed.
    case connectionCountChanged(count: Int, reason: String)
    /// A free connection fetches the rest of a slow connection's piece too; the first to finish wins.
    case raced(connection: Int, range: ByteRange)
    /// The manifest now records this many durable bytes.
    case checkpoint(bytesDurable: Int64)
    /// Piece `index` (``DownloadOptions/pieces``), all of whose bytes were
    /// written, was hashed: `matches` says whether it has its published
    /// digest. `urls` are the mirrors that wrote it. A piece that does not
    /// match is fetched again.
    case pieceChecked(index: Int, range: ByteRange, matches: Bool, urls: [String])
}

/// What a finished download did.
public struct DownloadResult: Sendable, Equatable {
    /// Where the file is.
    public var path: String
    /// Its length in bytes.
    public var size: Int64
    /// Seconds the download ran, on the monotonic clock: every attempt,
    /// probes included, summed; time spent paused is not counted.
    public var seconds: Double
    /// Bytes fetched over the network by this run.
    public var bytesFetched: Int64
    /// Bytes kept from earlier runs.
    public var bytesReused: Int64
    /// Transfers that failed and were retried.
    public var retries: Int
    /// Figures per mirror, in the order the URLs were given (probe failures
    /// included), then the mirrors the first URL's response listed
    /// (``MirrorReport/discoveredIn``).
    public var mirrors: [MirrorReport]
    /// Connections that carried at least one transfer.
    public var connectionsUsed: Int
    /// TCP connections opened, probes included (keep-alive reuse opens none).
    public var tcpConnections: Int
    /// How many connections ran and why: learned or fixed. Nil when no
    /// transfer ran (the file was complete, or one response brought it).
    public var connectionCount: ConnectionCountReport?
    /// True when the file was there already, complete and still the
    /// server's (same size and validators): nothing was fetched.
    public var alreadyComplete = false
    /// What the last probe learned of the file: its final URL after
    /// redirects (``RemoteFile/effectiveURL``), the response's headers
    /// (``RemoteFile/headers``, ``RemoteFile/contentType``) and validators.
    /// Nil only for a result made by hand.
    public var remoteFile: RemoteFile?
}

/// How many connections a download ran, and why.
public struct ConnectionCountReport: Sendable, Equatable, Codable {
    /// True when the count was learned (``DownloadOptions/automaticConnections``).
    public var automatic: Bool
    /// The count the download settled at: its last learned count, or the fixed one
    /// (less when the server refused more).
    public var settled: Int
    /// The most connections it asked for at once.
    public var peak: Int
    /// What the measurements showed, e.g. "settled at 16; 16 added 96%".
    public var reason: String
}

/// What one mirror contributed to a download.
public struct MirrorReport: Sendable, Equatable, Codable {
    /// The URL as given.
    public var url: String
    /// Bytes written from this mirror in this run.
    public var bytes: Int64
    /// Connection-seconds spent on it: the time each connection to it was
    /// busy, summed over the connections, so 8 connections busy for 12 s make
    /// 96, not 12 (`connectionSeconds` names it so). Not wall-clock time: that
    /// is `DownloadResult.seconds`.
    public var seconds: Double
    /// Failed transfers.
    public var errors: Int
    /// Why it was dropped, nil if it stayed in use.
    public var dropped: String?
    /// TCP connections the transfers opened to it (probes not included).
    public var tcpConnections = 0
    /// The HTTP version of its last response ("1.1", "2"), nil before one.
    public var httpVersion: String?
    /// The pieces it wrote bytes of that failed their checks
    /// (``DownloadOptions/pieces``), by index; nil when none did.
    public var badPieces: [Int]?
    /// Where the mirror was found when the caller did not name it:
    /// `"Link: rel=duplicate"` for one the first URL's response listed
    /// (RFC 6249; ``DownloadOptions/discovery``). Nil for a URL the caller gave.
    public var discoveredIn: String?

    /// The time its connections were busy, summed over them (`seconds`, under the name that says what it is).
    public var connectionSeconds: Double { seconds }

    /// Bytes per second per connection: `bytes / connectionSeconds`.
    public var bytesPerSecond: Double { seconds > 0 ? Double(bytes) / seconds : 0 }
}
