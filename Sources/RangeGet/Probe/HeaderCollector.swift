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
        var line = rawLine
        line.withUTF8 { consume(UnsafeRawBufferPointer($0)) }
    }

    /// Consumes one raw header line, as bytes. Read byte by byte, not as
    /// Characters: every response of a list of small files passes here, and
    /// a head is ASCII by the protocol (a field value may carry other bytes,
    /// kept as UTF-8 with any invalid sequence replaced).
    func consume(_ raw: UnsafeRawBufferPointer) {
        let line = raw.trimmingASCIIWhitespace()
        if line.starts(with: "HTTP/".utf8) {
            reset()
            // "HTTP/1.1 206 Partial Content": a status is the second word, three digits (RFC 9110 15).
            let words = line.split(separator: UInt8(ascii: " "), maxSplits: 2)
            if words.count > 1, words[1].count == 3, words[1].allSatisfy(\.isASCIIDigit) {
                status = words[1].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            }
            return
        }
        if line.isEmpty {
            isComplete = status != 0
            return
        }
        guard !isComplete, let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        // Field names are tokens (ASCII): lowercased byte by byte.
        let name = String(decoding: line[..<colon].lazy.map(\.asciiLowercased), as: UTF8.self)
        let value = String(decoding: line[(colon + 1)...].trimmingASCIIWhitespace(), as: UTF8.self)
        if let existing = fields[name] {
            fields[name] = existing + ", " + value
        } else {
            fields[name] = value
        }
    }
}
