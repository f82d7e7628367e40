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
    /// Read in one mutating call per line: a class's stored properties are
    /// checked for exclusive access at every touch (26 checks a line before).
    private var reading = Reading()

    /// The head of the last response received so far (complete once its blank line arrived).
    var head: ResponseHead {
        ResponseHead(status: reading.status, fields: reading.fields, isComplete: reading.isComplete)
    }

    /// Forgets what the previous request received, before the next one is sent.
    func reset() {
        reading = Reading()
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
        reading.consume(raw.assumingMemoryBound(to: UInt8.self))
    }
}

/// The head being read: the last response's status, fields and whether its blank line came.
private struct Reading {
    var status = 0
    var fields: [String: String] = [:]
    var isComplete = false

    mutating func consume(_ bytes: UnsafeBufferPointer<UInt8>) {
        var start = 0
        var end = bytes.count
        while start < end, bytes[start].isASCIIWhitespace { start += 1 }
        while end > start, bytes[end - 1].isASCIIWhitespace { end -= 1 }
        let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
        if line.count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"),
            line[3] == UInt8(ascii: "P"), line[4] == UInt8(ascii: "/")
        {
            self = Reading()
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
        if fields.isEmpty { fields.reserveCapacity(12) }
        if let existing = fields[name] {
            fields[name] = existing + ", " + value
        } else {
            fields[name] = value
        }
    }
}
