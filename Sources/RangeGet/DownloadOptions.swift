// The settings of a download (DownloadOptions) and where it is saved
// (Destination): plain values the library's user fills in.
import FoundationEssentials

/// Where a download is saved.
public enum Destination: Sendable, Equatable {
    /// Exactly this path.
    case file(String)
    /// A file in this directory, named from Content-Disposition or the URL.
    case directory(String)
}

/// Settings of a download.
public struct DownloadOptions: Sendable {
    /// Connections to use at once (without `automaticConnections`).
    public var connections = 8
    /// Learn the connection count while the download runs, starting at
    /// `maxPerHost` (every connection added later costs a round trip) and
    /// never above it: more while each added connection adds at least a
    /// quarter of what the others average, fewer while the total holds, again
    /// whenever the total moves by a third; never more than a server accepted
    /// (it refused one with 503 or 429). ``DownloadResult/connectionCount``
    /// says what it settled at and why. Applies to a download from one URL to
    /// a file, run on its own (not a list's shared connections, a stream or
    /// several mirrors, which keep `connections`). The command line turns it
    /// on unless given `-n N`; here it stays a choice, so that setting
    /// `connections` alone keeps meaning that many.
    public var automaticConnections = false
    /// Record the download into this trace (docs/TRACE.md): every transfer
    /// on the lane of its TCP connection, steals, races, retries, the rates.
    /// Several downloads may share one (a list's); ``DownloadTrace/write()``
    /// writes it. Nil (the default): nothing is recorded.
    public var trace: DownloadTrace?
    /// No piece is split below this many bytes.
    public var minimumSplit: Int64 = 1 << 20
    /// Attempts at one piece that end with no byte written before giving up.
    public var retries = 5
    /// First retry delay in seconds; it doubles per failure, and a 429 (too
    /// many requests) without `Retry-After` waits four times as long.
    /// Finite and at least 0.
    public var retryWait = 0.5
    /// The longest retry delay in seconds. Finite and at least 0.
    public var retryWaitLimit = 30.0
    /// The longest wait a server's `Retry-After` is granted, in seconds.
    /// Asked to wait longer, with no other connection of that mirror
    /// running, the download drops the mirror, or fails when it was the last
    /// one (the partial download stays resumable); on an extra connection the
    /// wait is cut to this. Finite and at least 0.
    public var longestRetryAfter = 60.0

    /// The wait before the next try after `failures` tries in a row that got
    /// nowhere: `retryWait`, doubling each time, at most `retryWaitLimit`.
    func backoff(failures: Int) -> Double {
        min(retryWait * Double(1 << min(max(failures, 1) - 1, 16)), retryWaitLimit)
    }
    /// Seconds between manifest checkpoints.
    public var checkpointInterval = 1.0
    /// Discard any partial download and start over.
    public var restart = false
    /// Replace an existing complete file at the destination.
    public var overwrite = false
    /// Record the URL on the finished file as the extended attribute
    /// `user.xdg.origin.url`, as `curl --xattr` and `wget --xattr` do. Off by
    /// default, as theirs: rangeget needs only the validators it always keeps
    /// there, and with the URL most small files' attributes outgrow the inode
    /// (ext4 keeps about 90 bytes of them inside it), costing a 4 KiB block
    /// each, twice the disk of a 4 KiB file, and a tenth of a list's CPU.
    public var recordOriginURL = false
    /// A digest the finished file must have; checked before it is renamed into place.
    public var checksum: Checksum?
    /// Digests by file name (a SHA256SUMS list), when `checksum` is nil: the
    /// file is checked against the entry for the name it is saved under, and
    /// one the list has no entry for fails verification, so nothing a list
    /// was meant to cover gets its final name unchecked.
    public var checksumList: [String: Checksum]?
    /// The digest of each piece of the file (a Metalink's `<pieces>`): each
    /// piece is checked once all its bytes are written, a bad one is fetched
    /// again (from another mirror when there is one), and a mirror that
    /// serves bad pieces is dropped. Checked on a download to a file with
    /// ranged requests; a stream or a single plain stream (a server without
    /// ranges) is checked by `checksum` alone. Nil: none.
    public var pieces: PieceHashes?
    /// The size the file must have (a Metalink's `<size>`): a server that
    /// reports another size fails the download before a byte is written.
    /// Nil: whatever the server says.
    public var expectedSize: Int64?
    /// Use what the server publishes about the file beyond its bytes: the
    /// whole file's digest in a `Repr-Digest` (RFC 9530) or `Digest` (RFC
    /// 3230) header of the probe's response, SHA-256 or SHA-512, is checked
    /// as `checksum` would be when neither `checksum` nor `checksumList`
    /// gives one; the mirrors the first URL's response lists in `Link: <URL>;
    /// rel=duplicate` headers (RFC 6249) join the download after the ones
    /// given, each probed and compared with them as a given mirror is, and
    /// reported with ``MirrorReport/discoveredIn``; and the Metalink a
    /// `Link: <URL>; rel=describedby; type="application/metalink4+xml"`
    /// names lends the download its size and piece hashes (or whole-file
    /// hash) when the caller gave none. False: such headers are ignored
    /// (`--no-discovery`).
    public var discovery = true
    /// The most connections to one `scheme://host:port` (mirrors on one host share it).
    public var maxPerHost = 16
    /// Probe with HEAD (then `GET Range: bytes=0-0` where HEAD fails) before
    /// any data moves: one round trip more. By default the first request is
    /// for the first `minimumSplit` bytes, and its head is the probe and its
    /// body the start of the first piece (the zero-round-trip start); the
    /// classic probe runs only when that answer is not a usable 206, and when
    /// resuming.
    public var probeWithHead = false
    /// Downloads that finish together (the files of a list) make their data
    /// and their directory durable together, one sync for a batch instead
    /// of two per file (a group commit). Nil: this download syncs alone.
    package var syncGroup: SyncGroup?
    /// The directory several downloads save into (the files of a list), as
    /// it was when they began: a file none of whose names it held, and that
    /// no other of them took, is not looked for before its opening request,
    /// nor after it when that request brought the whole file. Nil: every
    /// name is looked up.
    package var sharedDirectory: SharedDirectory?
    /// A download read in order (`Download.bytes(from:)`, `-o -`): the most
    /// bytes kept in memory, written ahead of the reader and not yet read
    /// (at least 1 MiB). The connections fetch inside this window, in file
    /// order, and wait while the reader is behind.
    public var streamWindow: Int64 = 64 << 20
    /// The most bytes the opening request asks for (it asks for
    /// `minimumSplit`, or the whole file: `filesTakeFreeSlots`).
    var openingLimit: Int64 = .max
    /// For a file of a list fetched from one URL: asked on the loop's thread
    /// as its opening request is sent, with the slots the loop has left free
    /// then, whether the list's other files still to send their first
    /// request will take them all. Then no other connection can join this
    /// file before it ends (a file's first transfer takes a freed slot
    /// before another file's extra), and its opening asks for the whole file
    /// (`bytes=0-`): a file of 2 MiB costs one request instead of two, a
    /// round trip less on a distant server. Another connection may still
    /// take over the end of a large one later: its transfer then ends at the
    /// cut, and its connection with it, as a piece's does. Only where a
    /// request to the file's server waits at least `Opening.distantFirstByte`
    /// for its first byte (a moving average per `scheme://host[:port]`), and
    /// for a file from one URL.
    /// Nil: the opening asks for `minimumSplit`.
    package var filesTakeFreeSlots: (@Sendable (_ freeSlots: Int) -> Bool)?
    /// Renews a signed link that expired (S3, a model hub, a CDN): given
    /// the URL a mirror was fetched from (``RemoteFile/effectiveURL``) when
    /// it answers 401, 403 or 410 after serving bytes, returns a new http or
    /// https URL of the same file. Called once per expiry, however many
    /// connections were refused. The new URL must show the same size and
    /// validators before a byte of it is written, else the download fails
    /// and keeps its partial file; bytes already written are kept and not
    /// fetched again. The mirror keeps the URL it was given as its identity
    /// (``RemoteFile/url``, ``MirrorReport/url``). An error it throws fails
    /// the download, its partial file kept. After three renewals in a row
    /// that brought no byte, the download fails. Nil: a URL reached through
    /// a redirect is resolved again from the URL given, and any other mirror
    /// refused after serving bytes is dropped (or, the last one, fails the
    /// download, its partial file kept).
    public var refreshURL: (@Sendable (_ expiredURL: String) async throws -> String)?
    /// How requests are made.
    public var transfer = TransferOptions()
    /// The disk calls used; tests inject faults here.
    package var systemCalls = SystemCalls.live
    /// What makes these settings unusable, nil when nothing does. The
    /// command line refuses such values itself; from the library, a run
    /// with no connection, no connection per host or an empty minimum
    /// split would never end (a stream planned empty pieces for good), nor
    /// would one whose retry delay is NaN, negative or infinite (a failed
    /// piece is never ready again); a timeout out of range traps
    /// (`TransferOptions.timeoutRange`).
    var problem: String? {
        if connections < 1 { return "connections must be at least 1, not \(connections)" }
        if maxPerHost < 1 { return "maxPerHost must be at least 1, not \(maxPerHost)" }
        if minimumSplit < 1 { return "minimumSplit must be at least 1 byte, not \(minimumSplit)" }
        for (name, value) in [
            ("retryWait", retryWait), ("retryWaitLimit", retryWaitLimit),
            ("longestRetryAfter", longestRetryAfter)
        ]
        where !(value.isFinite && value >= 0) {
            return "\(name) must be a finite number of seconds, at least 0, not \(value)"
        }
        return transfer.problem
    }
    /// True when the caller already checked every URL (`RemoteURL`): the
    /// rangeget command checks each line of a list as it reads it, and a
    /// second parse per file (URLComponents) was 4% of a small file's CPU.
    package var urlsChecked = false

    /// The defaults.
    public init() {}
}
