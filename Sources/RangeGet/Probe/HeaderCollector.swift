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

    /// Consumes one raw header line, as bytes. Read byte by byte over the
    /// buffer, not as Characters nor through generic slices: every response
    /// of a list of small files passes here (ten lines each), and a head is
    /// ASCII by the protocol (a field value may carry other bytes, kept as
    /// UTF-8 with any invalid sequence replaced).
    func consume(_ raw: UnsafeRawBufferPointer) {
        let bytes = raw.assumingMemoryBound(to: UInt8.self)
        var start = 0
        var end = bytes.count
        while start < end, bytes[start].isASCIIWhitespace { start += 1 }
        while end > start, bytes[end - 1].isASCIIWhitespace { end -= 1 }
        let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
        if line.starts(with: "HTTP/".utf8) {
            reset()
            // "HTTP/1.1 206 Partial Content": a status is the second word, three digits (RFC 9110 15).
            guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return }
            let code = line[space...].drop { $0 == UInt8(ascii: " ") }.prefix { $0 != UInt8(ascii: " ") }
            if code.count == 3, code.allSatisfy(\.isASCIIDigit) {
                status = code.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            }
            return
        }
        if line.isEmpty {
            isComplete = status != 0
            return
        }
        guard !isComplete, let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        // Field names are tokens (ASCII): lowercased byte by byte.
        let name = String(unsafeUninitializedCapacity: colon) { name in
            for index in 0..<colon { name[index] = line[index].asciiLowercased }
            return colon
        }
        var valueStart = colon + 1
        while valueStart < line.count, line[valueStart].isASCIIWhitespace { valueStart += 1 }
        let value = String(decoding: UnsafeBufferPointer(rebasing: line[valueStart...]), as: UTF8.self)
        // A head has about ten fields: room for them at once, not four regrowths.
        if fields.isEmpty { fields.reserveCapacity(16) }
        if let existing = fields[name] {
            fields[name] = existing + ", " + value
        } else {
            fields[name] = value
        }
    }
}
