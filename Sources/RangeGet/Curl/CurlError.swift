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

    /// True for failures worth retrying on a fresh connection; false for
    /// those another attempt would only repeat.
    ///
    /// The retry policy for curl errors, decided once here (issue 16):
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
    ///   certificate problem); the request cannot be made (unsupported
    ///   protocol, malformed URL, an option or feature libcurl lacks, an
    ///   https-to-http redirect refused); the server said no in a way it will
    ///   say again (too many redirects, login or access denied, an
    ///   authentication failure); or the failure is local (out of memory,
    ///   write and read errors, a body whose content encoding cannot be
    ///   decoded, a file above the size limit).
    /// - Any other code (FTP, TFTP, LDAP and other protocols rangeget does not
    ///   speak, and codes newer than this table) counts as transient: a wrong
    ///   "transient" costs a few retries, a wrong "permanent" a download.
    var isTransient: Bool {
        switch CURLcode(UInt32(code)) {
        case CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT,
             CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP2, CURLE_PARTIAL_FILE, CURLE_OPERATION_TIMEDOUT,
             CURLE_SSL_CONNECT_ERROR, CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR,
             CURLE_HTTP2_STREAM, CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR:
            return true
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CRL_BADFILE,
             CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
             CURLE_SSL_CIPHER, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CLIENTCERT, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED:
            return false
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_FAILED_INIT, CURLE_URL_MALFORMAT, CURLE_NOT_BUILT_IN,
             CURLE_BAD_FUNCTION_ARGUMENT, CURLE_UNKNOWN_OPTION, CURLE_SETOPT_OPTION_SYNTAX,
             CURLE_INTERFACE_FAILED, CURLE_RECURSIVE_API_CALL, CURLE_UNRECOVERABLE_POLL:
            return false
        case CURLE_TOO_MANY_REDIRECTS, CURLE_LOGIN_DENIED, CURLE_REMOTE_ACCESS_DENIED, CURLE_AUTH_ERROR,
             CURLE_REMOTE_FILE_NOT_FOUND:
            return false
        case CURLE_OUT_OF_MEMORY, CURLE_WRITE_ERROR, CURLE_READ_ERROR, CURLE_BAD_CONTENT_ENCODING,
             CURLE_FILESIZE_EXCEEDED:
            return false
        default:
            return true
        }
    }
}

/// Runs `curl_global_init` exactly once, before the first handle is made.
enum CurlGlobal {
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}
