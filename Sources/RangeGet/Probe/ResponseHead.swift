// ResponseHead: the status line and headers of one HTTP response, as
// HeaderCollector gathers them from libcurl's header callback; the typed
// readings of the fields rangeget uses.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The status and headers of one response.
struct ResponseHead: Sendable {
    /// The HTTP status code, 0 before a status line arrived.
    let status: Int
    /// Header values by lowercased name; repeated headers are joined with ", ".
    let fields: [String: String]
    /// True once the blank line that ends the head arrived.
    let isComplete: Bool

    /// True for a complete head that is not an interim answer (1xx) or a
    /// redirect (3xx): the answer a transfer that follows redirects ends with.
    var isFinal: Bool {
        isComplete && !(100..<200).contains(status) && !(300..<400).contains(status)
    }

    subscript(name: String) -> String? { fields[name] }

    /// `Content-Length`, when present and valid.
    var contentLength: Int64? {
        self["content-length"].flatMap { Int64($0) }.flatMap { $0 >= 0 ? $0 : nil }
    }

    /// `Content-Range`, when present and valid.
    var contentRange: ContentRange? { self["content-range"].flatMap(ContentRange.init) }

    /// The strong or weak entity tag, as sent.
    var etag: String? { self["etag"] }

    /// `Last-Modified`, as sent.
    var lastModified: String? { self["last-modified"] }

    /// `Retry-After` in seconds: delta-seconds, or an HTTP date counted from now
    /// (RFC 9110 10.2.3), at most `longestRetryAfter`; nil when absent or
    /// unreadable. A server controls the number: any length of digits, any year.
    var retryAfter: Double? {
        guard let value = self["retry-after"], !value.isEmpty else { return nil }
        let seconds: Double
        if value.allSatisfy({ $0.isASCII && $0.isNumber }) {
            // Twenty digits or more are more than the cap anyway (and than Int64).
            seconds = value.count < 20 ? Double(value) ?? Self.longestRetryAfter : Self.longestRetryAfter
        } else {
            guard let date = HTTPDate.seconds(value) else { return nil }
            seconds = date - Double(time(nil))
        }
        return min(max(0, seconds), Self.longestRetryAfter)
    }

    /// The longest wait a `Retry-After` is read as, in seconds (about 31
    /// years: every count in seconds stays well inside an Int); whether to
    /// wait that long is the download's decision (`longestRetryAfter`).
    static let longestRetryAfter: Double = 1e9

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
            let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the date form HTTP sends.
enum HTTPDate {
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Seconds since the epoch, nil unless `text` is an IMF-fixdate: a
    /// two-digit day, a four-digit year (RFC 9110 5.6.7), so every field fits
    /// `tm` whatever a server sends.
    static func seconds(_ text: String) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = digits(parts[1], count: 2),
            let month = months.firstIndex(of: String(parts[2])), let year = digits(parts[3], count: 4)
        else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false).map { digits($0, count: 2) }
        guard clock.count == 3, let hour = clock[0], let minute = clock[1], let second = clock[2],
            (1...31).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(hour)
        fields.tm_min = Int32(minute)
        fields.tm_sec = Int32(second)
        return Double(timegm(&fields))
    }

    /// The value of exactly `count` ASCII digits, else nil.
    private static func digits(_ text: Substring, count: Int) -> Int? {
        guard text.utf8.count == count, text.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return Int(text)
    }
}
