// `--json`: one object on stdout when the run ends, for scripts and
// benchmarks. Field names are stable; see README.md ("Machine-readable output").
import Glibc
import FoundationEssentials
import RangeGet

struct JSONSummary: Encodable {
    var outcome: String
    var exitCode: Int32
    var error: String?
    var file: String?
    var size: Int64?
    var seconds: Double?
    var averageBytesPerSecond: Double?
    var bytesFetched: Int64?
    var bytesReused: Int64?
    var retries: Int?
    var connectionsUsed: Int?
    var tcpConnections: Int?
    /// True when the file was there already and still the server's: nothing fetched.
    var alreadyComplete: Bool?
    var mirrors: [Mirror]

    struct Mirror: Encodable {
        var url: String
        var bytes: Int64
        var bytesPerSecondPerConnection: Double
        var errors: Int
        var dropped: String?
        var tcpConnections: Int
        var httpVersion: String?
    }

    init(result: DownloadResult) {
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
        tcpConnections = result.tcpConnections
        alreadyComplete = result.alreadyComplete
        mirrors = result.mirrors.map {
            Mirror(url: $0.url, bytes: $0.bytes, bytesPerSecondPerConnection: $0.bytesPerSecond,
                   errors: $0.errors, dropped: $0.dropped, tcpConnections: $0.tcpConnections,
                   httpVersion: $0.httpVersion)
        }
    }

    init(urls: [String], error: DownloadError, code: ExitCode) {
        outcome = code == .interrupted ? "interrupted" : "failed"
        exitCode = code.rawValue
        self.error = error.description
        mirrors = urls.map {
            Mirror(url: Manifest.redacting($0), bytes: 0, bytesPerSecondPerConnection: 0, errors: 0, dropped: nil, tcpConnections: 0,
                   httpVersion: nil)
        }
    }

    func encoded() -> String { Self.encode(self) }

    /// One line of JSON with sorted keys (indented lines with `pretty`),
    /// safe to print on a terminal (`TerminalText.json`).
    static func encode(_ value: some Encodable, pretty: Bool = false) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { TerminalText.json(String(decoding: $0, as: UTF8.self)) } ?? "{}"
    }
}
