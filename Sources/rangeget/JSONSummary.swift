import FoundationEssentials
import RangeGet

// `--json`: one object on stdout when the run ends, for scripts and
// benchmarks. Field names are stable; see docs/DESIGN.md ("Machine-readable output").
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct JSONSummary: Encodable {
    var outcome: String
    var exitCode: Int32
    var error: String?
    /// The HTTP error status the download failed on (404, ...).
    var httpStatus: Int?
    /// The kind of network failure the download failed on (`TransportFailure`: "tls", "timeout", ...).
    var failure: String?
    var file: String?
    var size: Int64?
    var seconds: Double?
    var averageBytesPerSecond: Double?
    var bytesFetched: Int64?
    var bytesReused: Int64?
    var retries: Int?
    var connectionsUsed: Int?
    /// How many connections ran and why (`-n auto` or a fixed count).
    var connectionCount: ConnectionCount?
    var tcpConnections: Int?
    /// True when the file was there already and still the server's: nothing fetched.
    var alreadyComplete: Bool?
    var mirrors: [Mirror]
    /// The line of `-i LIST` the file (or the bad line) is on; null for a single download.
    var line: Int?

    struct ConnectionCount: Encodable {
        /// "auto" or "fixed".
        var mode: String
        var settled: Int
        var peak: Int
        var reason: String
    }

    struct Mirror: Encodable {
        var url: String
        var bytes: Int64
        var bytesPerSecondPerConnection: Double
        var errors: Int
        var dropped: String?
        var tcpConnections: Int
        var httpVersion: String?
        /// The pieces it wrote that failed their checks (Metalink pieces), by index.
        var badPieces: [Int] = []
        /// `"Link: rel=duplicate"` for a mirror the first URL's response listed; nil for one the user named.
        var discoveredIn: String?

        private enum CodingKeys: String, CodingKey {
            case url, bytes, bytesPerSecondPerConnection, errors, dropped, tcpConnections, httpVersion, badPieces,
                discoveredIn
        }

        /// Every key, `null` when unknown (`dropped` for a mirror kept,
        /// `httpVersion` for one that never answered, `discoveredIn` for
        /// one the user named), as in the summary.
        func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(url, forKey: .url)
            try container.encode(bytes, forKey: .bytes)
            try container.encode(bytesPerSecondPerConnection, forKey: .bytesPerSecondPerConnection)
            try container.encode(errors, forKey: .errors)
            try container.encode(dropped, forKey: .dropped)
            try container.encode(tcpConnections, forKey: .tcpConnections)
            try container.encode(httpVersion, forKey: .httpVersion)
            try container.encode(badPieces, forKey: .badPieces)
            try container.encode(discoveredIn, forKey: .discoveredIn)
        }
    }

    init(result: DownloadResult, line: Int? = nil) {
        self.line = line
        outcome = "complete"
        exitCode = ExitCode.success.rawValue
        file = result.path
        size = result.size
        seconds = result.seconds
        averageBytesPerSecond = result.seconds > 0 ? Double(result.bytesFetched) / result.seconds : 0
        bytesFetched = result.bytesFetched
        bytesReused = result.bytesReused
        retries = result.retries
        connectionsUsed = result.connectionsUsed
        connectionCount = result.connectionCount.map {
            ConnectionCount(
                mode: $0.automatic ? "auto" : "fixed", settled: $0.settled, peak: $0.peak, reason: $0.reason)
        }
        tcpConnections = result.tcpConnections
        alreadyComplete = result.alreadyComplete
        mirrors = result.mirrors.map {
            Mirror(
                url: $0.url, bytes: $0.bytes, bytesPerSecondPerConnection: $0.bytesPerSecond,
                errors: $0.errors, dropped: $0.dropped, tcpConnections: $0.tcpConnections,
                httpVersion: $0.httpVersion, badPieces: $0.badPieces ?? [], discoveredIn: $0.discoveredIn)
        }
    }

    /// A run that failed with `error`; `file` is the output when the command
    /// line named it (otherwise the server would have, and it did not get to).
    /// The mirror the error names counts that error.
    init(urls: [String], error: DownloadError, code: ExitCode, file: String? = nil, line: Int? = nil) {
        self.line = line
        outcome = code == .interrupted ? "interrupted" : "failed"
        exitCode = code.rawValue
        self.error = error.commandLineText
        httpStatus = error.httpStatus
        failure = error.transportFailure?.rawValue
        self.file = file
        mirrors = urls.map {
            let url = OutgoingText.withoutUserinfo($0)
            return Mirror(
                url: url, bytes: 0, bytesPerSecondPerConnection: 0, errors: error.url == url ? 1 : 0, dropped: nil,
                tcpConnections: 0, httpVersion: nil)
        }
    }

    private enum CodingKeys: String, CodingKey {
        case outcome, exitCode, error, httpStatus, failure, file, size, seconds, averageBytesPerSecond, bytesFetched,
            bytesReused,
            retries, connectionsUsed, connectionCount, tcpConnections, alreadyComplete, mirrors, line
    }

    /// Every field, null when it does not apply, so that a script finds each
    /// key in every object; `alreadyComplete` only on success, as documented.
    func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(outcome, forKey: .outcome)
        try container.encode(exitCode, forKey: .exitCode)
        try container.encode(error, forKey: .error)
        try container.encode(httpStatus, forKey: .httpStatus)
        try container.encode(failure, forKey: .failure)
        try container.encode(file, forKey: .file)
        try container.encode(size, forKey: .size)
        try container.encode(seconds, forKey: .seconds)
        try container.encode(averageBytesPerSecond, forKey: .averageBytesPerSecond)
        try container.encode(bytesFetched, forKey: .bytesFetched)
        try container.encode(bytesReused, forKey: .bytesReused)
        try container.encode(retries, forKey: .retries)
        try container.encode(connectionsUsed, forKey: .connectionsUsed)
        try container.encode(connectionCount, forKey: .connectionCount)
        try container.encode(tcpConnections, forKey: .tcpConnections)
        try container.encodeIfPresent(alreadyComplete, forKey: .alreadyComplete)
        try container.encode(mirrors, forKey: .mirrors)
        try container.encode(line, forKey: .line)
    }

    func encoded() -> String { Self.encode(self) }

    /// One line of JSON with sorted keys (indented lines with `pretty`),
    /// safe to print on a terminal (`TerminalText.json`).
    static func encode(_ value: some Encodable, pretty: Bool = false) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { TerminalText.json(String(decoding: $0, as: UTF8.self)) } ?? "{}"
    }
}
