// Tally: what a download did, summed over its attempts, for its result.

/// Figures of one download summed over its attempts (a resumed pause is a new attempt).
struct Tally: Sendable {
    /// Attempts started.
    var attempts = 0
    /// Seconds spent in finished attempts (time paused is not counted).
    var seconds = 0.0
    /// Bytes the first attempt found on disk from earlier runs.
    var reused: Int64?
    /// Bytes fetched over the network.
    var fetched: Int64 = 0
    /// Transfers retried.
    var retries = 0
    /// The most connections that carried a transfer in one engine run.
    var connectionsUsed = 0
    /// How the last engine run chose its connection count.
    var connectionCount: ConnectionCountReport?
    /// TCP connections opened, probes included.
    var tcpConnections = 0
    /// Per URL: engine figures added up over every engine run.
    var mirrors: [String: MirrorReport] = [:]

    /// Adds one engine run's figures.
    mutating func add(_ reports: [MirrorReport]) {
        for report in reports {
            tcpConnections += report.tcpConnections
            guard var total = mirrors[report.url] else {
                mirrors[report.url] = report
                continue
            }
            total.bytes += report.bytes
            total.seconds += report.seconds
            total.errors += report.errors
            total.dropped = report.dropped
            total.tcpConnections += report.tcpConnections
            total.httpVersion = report.httpVersion ?? total.httpVersion
            if let bad = report.badPieces { total.badPieces = (total.badPieces ?? []) + bad }
            mirrors[report.url] = total
        }
    }
}
