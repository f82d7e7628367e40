// ResponseHead: the status line and headers of one HTTP response, collected
// line by line from libcurl's header callback. A new status line (after a
// redirect or a 100 Continue) starts a new head.

/// The status and headers of the last response a transfer received.
struct ResponseHead: Sendable {
    /// The HTTP status code, 0 before a status line arrived.
    private(set) var status = 0
    /// Header values by lowercased name; repeated headers are joined with ", ".
    private(set) var fields: [String: String] = [:]
    /// True once the blank line that ends the head arrived.
    private(set) var isComplete = false

    /// Consumes one raw header line as libcurl delivers it (CRLF included).
    mutating func consume(_ rawLine: String) {
        let line = rawLine.trimmingWhitespace()
        if line.hasPrefix("HTTP/") {
            self = ResponseHead()
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
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].lowercased()
        let value = String(line[line.index(after: colon)...]).trimmingWhitespace()
        if let existing = fields[name] {
            fields[name] = existing + ", " + value
        } else {
            fields[name] = value
        }
    }

    subscript(name: String) -> String? { fields[name] }

    /// `Content-Length`, when present and valid.
    var contentLength: Int64? {
        self["content-length"].flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil }
    }

    /// The strong or weak entity tag, as sent.
    var etag: String? { self["etag"] }

    /// `Last-Modified`, as sent.
    var lastModified: String? { self["last-modified"] }

    /// `Retry-After` in seconds (delta-seconds form only; dates are ignored).
    var retryAfter: Double? { self["retry-after"].flatMap { Double($0) }.flatMap { $0 >= 0 ? $0 : nil } }

    /// The content coding, nil for identity.
    var contentEncoding: String? {
        guard let value = self["content-encoding"]?.lowercased(), !value.isEmpty, value != "identity" else {
            return nil
        }
        return value
    }
}

extension StringProtocol {
    /// The string without leading and trailing white space (CRLF is one Character).
    func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
              let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
