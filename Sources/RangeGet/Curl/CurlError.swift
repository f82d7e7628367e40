// Typed errors from libcurl, carrying the text of the handle's error buffer.
import CCurl

/// A libcurl failure: the `CURLcode` and the most specific message libcurl gave.
public struct CurlError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The raw `CURLcode` value.
    public let code: Int
    /// The handle's error-buffer text, or `curl_easy_strerror` when that was empty.
    public let message: String

    init(_ code: CURLcode, buffer: UnsafePointer<CChar>? = nil) {
        self.code = Int(code.rawValue)
        let detail = buffer.map { String(cString: $0) } ?? ""
        self.message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
    }

    /// A failure rangeget itself finds while doing what libcurl would (following a redirect).
    init(_ code: CURLcode, message: String) {
        self.code = Int(code.rawValue)
        self.message = message
    }

    init(multi code: CURLMcode) {
        self.code = Int(code.rawValue)
        self.message = String(cString: curl_multi_strerror(code))
    }

    public var description: String { message }

    /// True for failures worth retrying on a fresh connection (timeouts, resets, short bodies).
    var isTransient: Bool {
        switch CURLcode(UInt32(code)) {
        case CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT, CURLE_RECV_ERROR, CURLE_SEND_ERROR,
             CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM,
             CURLE_COULDNT_RESOLVE_HOST, CURLE_SSL_CONNECT_ERROR, CURLE_WEIRD_SERVER_REPLY:
            return true
        default:
            return false
        }
    }
}

/// Runs `curl_global_init` exactly once, before the first handle is made.
enum CurlGlobal {
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}
