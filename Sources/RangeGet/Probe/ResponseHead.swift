// ResponseHead: the status line and headers of one HTTP response, collected
// line by line from libcurl's header callback. A new status line (after a
// redirect or a 100 Continue) starts a new head.
import Glibc

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

    /// `Retry-After` in seconds: delta-seconds, or an HTTP date counted from now
    /// (RFC 9110 10.2.3); nil when absent or unreadable.
    var retryAfter: Double? {
        guard let value = self["retry-after"] else { return nil }
        if value.allSatisfy({ $0.isASCII && $0.isNumber }), let seconds = Double(value) { return seconds }
        guard let date = HTTPDate.seconds(value) else { return nil }
        return max(0, date - Double(time(nil)))
    }

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

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the date form HTTP sends.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the epoch, nil unless `text` is an IMF-fixdate.
    static func seconds(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let month = months.firstIndex(of: String(parts[2])),
              let year = Int(parts[3]) else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...31).contains(day), (0...23).contains(clock[0]), (0...59).contains(clock[1]),
              (0...60).contains(clock[2]) else { return nil }
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(clock[0])
        fields.tm_min = Int32(clock[1])
        fields.tm_sec = Int32(clock[2])
        return Double(timegm(&fields))
    }
}
