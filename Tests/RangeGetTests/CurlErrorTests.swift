import CCurl
import XCTest

@testable import RangeGet

/// What each libcurl code means to rangeget (`CurlError.classification`):
/// the kind of failure a `DownloadError.network` reports, and whether it is
/// retried. One row per decision.
final class CurlErrorTests: XCTestCase {
    func testEveryCodeHasItsKindAndRetryPolicy() {
        let cases: [(code: CURLcode, failure: TransportFailure, transient: Bool)] = [
            // The network or the server had a bad moment: retried.
            (CURLE_COULDNT_RESOLVE_HOST, .dnsResolution, true),
            (CURLE_COULDNT_RESOLVE_PROXY, .proxy, true),
            (CURLE_PROXY, .proxy, true),
            (CURLE_COULDNT_CONNECT, .connectFailed, true),
            (CURLE_OPERATION_TIMEDOUT, .timeout, true),
            (CURLE_PARTIAL_FILE, .connectionLost, true),
            (CURLE_RECV_ERROR, .connectionLost, true),
            (CURLE_SEND_ERROR, .connectionLost, true),
            (CURLE_GOT_NOTHING, .connectionLost, true),
            (CURLE_WEIRD_SERVER_REPLY, .protocolError, true),
            (CURLE_HTTP2, .protocolError, true),
            (CURLE_HTTP2_STREAM, .protocolError, true),
            (CURLE_HTTP3, .protocolError, true),
            (CURLE_QUIC_CONNECT_ERROR, .protocolError, true),
            (CURLE_SSL_CONNECT_ERROR, .tls, true),
            (CURLE_SSL_SHUTDOWN_FAILED, .tls, true),
            // The certificate or the TLS setup was refused: never retried.
            (CURLE_PEER_FAILED_VERIFICATION, .certificate, false),
            (CURLE_SSL_CACERT_BADFILE, .certificate, false),
            (CURLE_SSL_CRL_BADFILE, .certificate, false),
            (CURLE_SSL_ISSUER_ERROR, .certificate, false),
            (CURLE_SSL_PINNEDPUBKEYNOTMATCH, .certificate, false),
            (CURLE_SSL_INVALIDCERTSTATUS, .certificate, false),
            (CURLE_SSL_CIPHER, .tls, false),
            (CURLE_SSL_CERTPROBLEM, .tls, false),
            (CURLE_SSL_CLIENTCERT, .tls, false),
            (CURLE_SSL_ENGINE_NOTFOUND, .tls, false),
            (CURLE_USE_SSL_FAILED, .tls, false),
            // A redirect that cannot be followed (URLs are http or https, so an
            // unsupported protocol is a redirect's).
            (CURLE_TOO_MANY_REDIRECTS, .redirect, false),
            (CURLE_UNSUPPORTED_PROTOCOL, .redirect, false),
            // The request cannot be made.
            (CURLE_URL_MALFORMAT, .other, false),
            (CURLE_NOT_BUILT_IN, .other, false),
            (CURLE_FAILED_INIT, .other, false),
            (CURLE_BAD_FUNCTION_ARGUMENT, .other, false),
            (CURLE_UNKNOWN_OPTION, .other, false),
            (CURLE_INTERFACE_FAILED, .other, false),
            // The server said no, and would again.
            (CURLE_LOGIN_DENIED, .other, false),
            (CURLE_REMOTE_ACCESS_DENIED, .other, false),
            (CURLE_AUTH_ERROR, .other, false),
            (CURLE_BAD_CONTENT_ENCODING, .protocolError, false),
            // Local failures.
            (CURLE_OUT_OF_MEMORY, .other, false),
            (CURLE_WRITE_ERROR, .other, false),
            (CURLE_READ_ERROR, .other, false),
            (CURLE_FILESIZE_EXCEEDED, .other, false),
            // Codes the table does not name (other protocols, newer codes): retried.
            (CURLE_FTP_ACCEPT_FAILED, .other, true),
            (CURLE_ABORTED_BY_CALLBACK, .other, true),
            (CURLcode(999), .other, true)
        ]
        for (code, failure, transient) in cases {
            let error = CurlError(code)
            XCTAssertEqual(error.failure, failure, "CURLcode \(code.rawValue): \(error.message)")
            XCTAssertEqual(error.isTransient, transient, "CURLcode \(code.rawValue): \(error.message)")
        }
        let named = Set(cases.map(\.failure))
        XCTAssertEqual(named, Set(TransportFailure.allCases), "every kind is some code's")
    }

    /// The failures rangeget makes itself classify like libcurl's: a refused
    /// redirect is permanent, a stall is a timeout and retried.
    func testFailuresRangegetFindsItselfClassifyLikeLibcurls() {
        let downgrade = CurlError(CURLE_UNSUPPORTED_PROTOCOL, message: "refused a redirect from https to http://h/")
        XCTAssertEqual(downgrade.failure, .redirect)
        XCTAssertFalse(downgrade.isTransient)
        let redirects = CurlError(CURLE_TOO_MANY_REDIRECTS, message: "Maximum (5) redirects followed")
        XCTAssertEqual(redirects.failure, .redirect)
        XCTAssertFalse(redirects.isTransient)
        let stall = CurlError(CURLE_OPERATION_TIMEDOUT, message: "no data for 5 s (stalled)")
        XCTAssertEqual(stall.failure, .timeout)
        XCTAssertTrue(stall.isTransient)
        XCTAssertEqual(stall.message, "no data for 5 s (stalled)")
    }

    /// A multi-handle code is not a `CURLcode` (the numbers overlap): it is
    /// no transfer's failure, so it is not read through the table.
    func testMultiHandleFailuresAreOther() {
        let error = CurlError(multi: CURLM_OUT_OF_MEMORY)
        XCTAssertEqual(error.code, Int(CURLE_URL_MALFORMAT.rawValue), "the overlap this guards against")
        XCTAssertEqual(error.failure, .other)
        XCTAssertFalse(error.isTransient)
    }

    /// `DownloadError` hands the kind out for network failures only, beside
    /// the HTTP status of server failures; the raw values are `--json`'s.
    func testDownloadErrorCarriesTheKindOfANetworkFailure() {
        let url = "https://127.0.0.1:1/f"
        let refused = DownloadError.network(url: url, message: "Connection refused", failure: .connectFailed)
        XCTAssertEqual(refused.transportFailure, .connectFailed)
        XCTAssertNil(refused.httpStatus)
        XCTAssertNotEqual(refused, .network(url: url, message: "Connection refused", failure: .timeout))
        let missing = DownloadError.server(url: url, message: "404", status: 404)
        XCTAssertNil(missing.transportFailure)
        XCTAssertEqual(missing.httpStatus, 404)
        XCTAssertNil(DownloadError.interrupted(keptResumeState: true).transportFailure)
        XCTAssertEqual(
            TransportFailure.allCases.map(\.rawValue),
            [
                "dnsResolution", "proxy", "connectFailed", "tls", "certificate", "timeout", "connectionLost",
                "redirect",
                "protocolError", "other"
            ])
    }
}
