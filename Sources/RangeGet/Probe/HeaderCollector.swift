// HeaderCollector: the one place libcurl's header callback lands, for every
// transfer rangeget makes (the probes, the opening request, the engine's
// connections, small in-memory fetches). A transfer may receive several
// responses: interim ones (100 Continue, 103 Early Hints), the redirects
// libcurl follows, then the final one, and after a chunked body possibly
// trailers. Each status line starts a new head, so the last response's fields
// win and none of an earlier one's leak into it; a field line after the blank
// line that ended a head is a trailer, never merged into it (RFC 9110 6.5.1).
// Pure (the fuzz targets build it without libcurl); the callback that feeds
// it is in Curl/HeaderCollector+Curl.swift.

/// Gathers the header lines an easy handle receives into the head of its last response.
final class HeaderCollector {
    private var status = 0
    private var fields: [String: String] = [:]
    private var isComplete = false

    /// The head of the last response received so far (complete once its blank line arrived).
    var head: ResponseHead { ResponseHead(status: status, fields: fields, isComplete: isComplete) }

    /// Forgets what the previous request received, before the next one is sent.
    func reset() {
        (status, fields, isComplete) = (0, [:], false)
    }

    /// Consumes one raw header line as libcurl delivers it (CRLF included).
    func consume(_ rawLine: String) {
        let line = rawLine.trimmingWhitespace()
        if line.hasPrefix("HTTP/") {
            reset()
            let parts = line.split(separator: " ", maxSplits: 2)
            // A status is three digits (RFC 9110 15); anything else is no status.
            if parts.count > 1, parts[1].count == 3, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }) {
                status = Int(parts[1]) ?? 0
            }
            return
        }
        if line.isEmpty {
            isComplete = status != 0
            return
        }
        guard !isComplete, let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        let value = String(line[line.index(after: colon)...]).trimmingWhitespace()
        if let existing = fields[name] {
            fields[name] = existing + ", " + value
        } else {
            fields[name] = value
        }
    }
}
