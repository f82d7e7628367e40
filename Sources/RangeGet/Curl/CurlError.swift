// Typed errors from libcurl, carrying the text of the handle's error buffer,
// and the one table that says what each libcurl code means to rangeget.
import CCurl

/// A libcurl failure: the `CURLcode`, the most specific message libcurl
/// gave, and what kind of failure it is (from `classification`).
struct CurlError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The raw `CURLcode` (or `CURLMcode`, for a multi-handle failure).
    let code: Int
    /// The handle's error-buffer text, or `curl_easy_strerror` when that was empty.
    let message: String
    /// What failed, as a `DownloadError.network` reports it.
    let failure: TransportFailure
    /// True for failures worth retrying on a fresh connection; false for
    /// those another attempt would only repeat (see `classification`).
    let isTransient: Bool

    init(_ code: CURLcode, buffer: UnsafePointer<CChar>? = nil) {
        let detail = buffer.map { String(cString: $0) } ?? ""
        self.init(code, message: detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail)
    }

    /// A failure rangeget itself finds while doing what libcurl would
    /// (following a redirect, giving up on a stalled transfer).
    init(_ code: CURLcode, message: String) {
        self.code = Int(code.rawValue)
        self.message = message
        (failure, isTransient) = Self.classification(code)
    }

    /// A failure of the multi handle itself: no transfer's doing, and no
    /// code of the table (`CURLMcode` values overlap `CURLcode` ones).
    init(multi code: CURLMcode) {
        self.code = Int(code.rawValue)
        self.message = String(cString: curl_multi_strerror(code))
        failure = .other
        isTransient = false
    }

    var description: String { message }

    /// What kind of failure `code` is, and whether another attempt may
    /// succeed: the one table of libcurl's codes (issue 16).
    ///
    /// The retry policy:
    ///
    /// - **Transient**, retried with backoff up to `--retries`: the network or
    ///   the server had a bad moment. Refused or reset connections, timeouts
    ///   (a stall is one), a body cut short, send and receive errors, an empty
    ///   or garbled reply, HTTP/2 and HTTP/3 stream and connection errors, a
    ///   name or proxy that did not resolve (resolvers time out too), and a
    ///   TLS handshake that broke off (`CURLE_SSL_CONNECT_ERROR` is what a
    ///   reset during the handshake gives).
    /// - **Permanent**, never retried: the engine drops the mirror when others
    ///   remain and fails the download at once otherwise. The certificate or
    ///   the TLS setup was refused (peer verification, a bad CA file, a pinned
    ///   key or OCSP status that does not match, no shared cipher, a client
    ///   certificate problem); the request cannot be made (malformed URL, an
    ///   option or feature libcurl lacks); a redirect that cannot be followed
    ///   (too many, https to http, another scheme); the server said no in a
    ///   way it will say again (login or access denied, an authentication
    ///   failure); or the failure is local (out of memory, write and read
    ///   errors, a body whose content encoding cannot be decoded, a file
    ///   above the size limit).
    /// - Any other code (FTP, TFTP, LDAP and other protocols rangeget does not
    ///   speak, and codes newer than this table) is `.other` and transient: a
    ///   wrong "transient" costs a few retries, a wrong "permanent" a download.
    ///
    /// Every URL is checked to be http or https before a request
    /// (`RemoteURL`), so `CURLE_UNSUPPORTED_PROTOCOL` is a redirect refused
    /// (`CURLOPT_REDIR_PROTOCOLS_STR`, or rangeget's own https-to-http check).
    static func classification(_ code: CURLcode) -> (failure: TransportFailure, transient: Bool) {
        switch code {
        case CURLE_COULDNT_RESOLVE_HOST:
            return (.dnsResolution, true)
        case CURLE_COULDNT_RESOLVE_PROXY, CURLE_PROXY:
            return (.proxy, true)
        case CURLE_COULDNT_CONNECT:
            return (.connectFailed, true)
        case CURLE_OPERATION_TIMEDOUT:
            return (.timeout, true)
        case CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR:
            return (.connectionLost, true)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR:
            return (.protocolError, true)
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_SHUTDOWN_FAILED:
            return (.tls, true)
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
            CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            return (.certificate, false)
        case CURLE_SSL_CIPHER, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CLIENTCERT, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED:
            return (.tls, false)
        case CURLE_TOO_MANY_REDIRECTS, CURLE_UNSUPPORTED_PROTOCOL:
            return (.redirect, false)
        case CURLE_BAD_CONTENT_ENCODING:
            return (.protocolError, false)
        case CURLE_FAILED_INIT, CURLE_URL_MALFORMAT, CURLE_NOT_BUILT_IN, CURLE_BAD_FUNCTION_ARGUMENT,
            CURLE_UNKNOWN_OPTION,
            CURLE_SETOPT_OPTION_SYNTAX, CURLE_INTERFACE_FAILED, CURLE_RECURSIVE_API_CALL, CURLE_UNRECOVERABLE_POLL:
            return (.other, false)
        case CURLE_LOGIN_DENIED, CURLE_REMOTE_ACCESS_DENIED, CURLE_AUTH_ERROR, CURLE_REMOTE_FILE_NOT_FOUND:
            return (.other, false)
        case CURLE_OUT_OF_MEMORY, CURLE_WRITE_ERROR, CURLE_READ_ERROR, CURLE_FILESIZE_EXCEEDED:
            return (.other, false)
        default:
            return (.other, true)
        }
    }
}

/// Runs `curl_global_init` exactly once, before the first handle is made.
enum CurlGlobal {
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}
