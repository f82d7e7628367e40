// Mirror: one URL of the file and how it is doing. The engine spreads
// connections over the mirrors still in use, and drops a mirror that keeps
// failing or serves something else; its ranges go to the others.

/// A source of the file and its running figures.
final class Mirror {
    let index: Int
    let remote: RemoteFile
    let expectation: Expectation
    /// `scheme://host:port`, the key of `--max-per-host`: parsed when the
    /// engine first places a connection (a small file one response brought
    /// whole never needs it).
    private(set) lazy var host = HeaderPolicy.origin(of: remote.effectiveURL)
    /// The key of the loop's first-byte delays (`TransferLoop.server(of:)`):
    /// of the URL asked for, as a later file's opening request is.
    private(set) lazy var server = TransferLoop.server(of: remote.url)
    /// Why it was dropped; nil while in use.
    var droppedBecause: String?
    /// Failures in a row without a byte of progress.
    var consecutiveFailures = 0
    /// Refusals beyond the server's connection limit in a row (`RetryPolicy.Failure.beyondLimit`).
    var refusalsInARow = 0
    var errors = 0
    /// The pieces it wrote (alone or with others) that failed their checks.
    var badPieces: [Int] = []
    /// True once a piece it wrote alone matched its digest (false again
    /// after a bad one): until then, with piece hashes and another mirror,
    /// it is on trial (`Engine.onTrial`).
    var proven = false
    /// True while a whole piece it wrote waits for its check: a mirror on
    /// trial gets no other transfer meanwhile.
    var awaitingVerdict = false
    var bytes: Int64 = 0
    /// Bytes it served this download before this run (`Engine.credit`).
    var servedBefore: Int64 = 0
    var activeConnections = 0
    /// Seconds a transfer of this mirror was running, summed over its connections.
    var busySeconds = 0.0
    /// TCP connections its transfers opened.
    var tcpConnections = 0
    /// The HTTP version of its last response.
    var httpVersion: String?
    /// The shortest wait for a first byte of this run's requests to it: how
    /// near it is, whatever else the loop was busy with at the time.
    var fastestFirstByte: Double?
    /// Its total bytes (finished transfers plus running ones) over the placement's longest window.
    var meter = RateMeter(window: Engine.longestPlacementWindow)
    /// The longest silence of its delivering transfers lately.
    var pause = RecentPause(memory: Engine.longestPlacementWindow)
    /// Since when the same number of connections deliver data from it.
    var steadySince = 0.0
    /// Its connections at the last measurement.
    var measuredConnections = 0

    init(index: Int, remote: RemoteFile) {
        self.index = index
        self.remote = remote
        expectation = Expectation(remote)
    }

    var isUsable: Bool { droppedBecause == nil }

    /// Throughput per connection so far, nil before any byte.
    var ratePerConnection: Double? {
        busySeconds > 0.2 && bytes > 0 ? Double(bytes) / busySeconds : nil
    }

    /// The figures for the final report.
    var report: MirrorReport {
        MirrorReport(
            url: remote.url, bytes: bytes, seconds: busySeconds, errors: errors, dropped: droppedBecause,
            tcpConnections: tcpConnections, httpVersion: httpVersion, badPieces: badPieces.isEmpty ? nil : badPieces)
    }
}
