import CCurl
import XCTest
@testable import RangeGet

/// The retry policy for curl errors (`CurlError.isTransient`), one row per decision.
final class CurlErrorTests: XCTestCase {
    func testTransientAndPermanentCurlErrors() {
        let cases: [(code: CURLcode, transient: Bool)] = [
            // The network or the server had a bad moment: retried.
            (CURLE_COULDNT_CONNECT, true),
            (CURLE_COULDNT_RESOLVE_HOST, true),
            (CURLE_COULDNT_RESOLVE_PROXY, true),
            (CURLE_OPERATION_TIMEDOUT, true),
            (CURLE_PARTIAL_FILE, true),
            (CURLE_RECV_ERROR, true),
            (CURLE_SEND_ERROR, true),
            (CURLE_GOT_NOTHING, true),
            (CURLE_WEIRD_SERVER_REPLY, true),
            (CURLE_HTTP2, true),
            (CURLE_HTTP2_STREAM, true),
            (CURLE_HTTP3, true),
            (CURLE_QUIC_CONNECT_ERROR, true),
            (CURLE_SSL_CONNECT_ERROR, true),
            // The certificate or the TLS setup was refused: never retried.
            (CURLE_PEER_FAILED_VERIFICATION, false),
            (CURLE_SSL_CACERT_BADFILE, false),
            (CURLE_SSL_CRL_BADFILE, false),
            (CURLE_SSL_ISSUER_ERROR, false),
            (CURLE_SSL_PINNEDPUBKEYNOTMATCH, false),
            (CURLE_SSL_INVALIDCERTSTATUS, false),
            (CURLE_SSL_CIPHER, false),
            (CURLE_SSL_CERTPROBLEM, false),
            (CURLE_SSL_CLIENTCERT, false),
            (CURLE_USE_SSL_FAILED, false),
            // The request cannot be made.
            (CURLE_UNSUPPORTED_PROTOCOL, false),
            (CURLE_URL_MALFORMAT, false),
            (CURLE_NOT_BUILT_IN, false),
            (CURLE_FAILED_INIT, false),
            (CURLE_BAD_FUNCTION_ARGUMENT, false),
            (CURLE_UNKNOWN_OPTION, false),
            (CURLE_INTERFACE_FAILED, false),
            // The server said no, and would again.
            (CURLE_TOO_MANY_REDIRECTS, false),
            (CURLE_LOGIN_DENIED, false),
            (CURLE_REMOTE_ACCESS_DENIED, false),
            (CURLE_AUTH_ERROR, false),
            // Local failures.
            (CURLE_OUT_OF_MEMORY, false),
            (CURLE_WRITE_ERROR, false),
            (CURLE_READ_ERROR, false),
            (CURLE_BAD_CONTENT_ENCODING, false),
            (CURLE_FILESIZE_EXCEEDED, false),
            // Codes the table does not name (other protocols, newer codes): retried.
            (CURLE_FTP_ACCEPT_FAILED, true),
            (CURLE_ABORTED_BY_CALLBACK, true),
            (CURLcode(999), true),
        ]
        for (code, transient) in cases {
            let error = CurlError(code)
            XCTAssertEqual(error.isTransient, transient, "CURLcode \(code.rawValue): \(error.message)")
        }
    }

    /// The failures rangeget makes itself (following a redirect by hand) classify like libcurl's.
    func testRefusedRedirectsArePermanent() {
        XCTAssertFalse(CurlError(CURLE_UNSUPPORTED_PROTOCOL, message: "refused a redirect from https to http://h/").isTransient)
        XCTAssertFalse(CurlError(CURLE_TOO_MANY_REDIRECTS, message: "Maximum (5) redirects followed").isTransient)
    }
}
