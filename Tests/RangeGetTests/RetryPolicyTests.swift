// RetryPolicy: what follows a failed transfer, one row per rule (in the
// policy's order), and the typed causes the failures are given.
import CCurl
import XCTest

@testable import RangeGet

final class RetryPolicyTests: XCTestCase {
    private let url = "http://127.0.0.1/f"

    /// A failure that got nowhere on the only mirror, its first: each row changes what it is about.
    private func failure(_ change: (inout RetryPolicy.Failure) -> Void = { _ in }) -> RetryPolicy.Failure {
        var failure = RetryPolicy.Failure(
            cause: .cut, reason: "transfer closed", rejection: nil, curlError: nil, progressed: false, plain: false,
            plainRestarts: 0, pieceFailures: 0, mirrorFailuresInARow: 1, mirrorUsable: true, otherMirrors: 0,
            mirrorHasOtherTransfers: false, partnerBusy: false, redirected: false, refreshable: false,
            mirrorServed: 0, sizeDisagreementsReached: false)
        change(&failure)
        return failure
    }

    private func decision(
        _ verdict: RetryPolicy.Decision.Verdict, drop: String? = nil, fewer: Bool = false,
        restart: Bool = false
    ) -> RetryPolicy.Decision {
        RetryPolicy.Decision(dropMirror: drop, fewerConnections: fewer, restartCounted: restart, verdict: verdict)
    }

    func testEachRuleDecides() {
        var settings = DownloadOptions()
        settings.retries = 4
        settings.retryWait = 0.5
        settings.retryWaitLimit = 30
        settings.longestRetryAfter = 60
        let refused = CurlError(CURLE_COULDNT_CONNECT, message: "Connection refused")
        let badCertificate = CurlError(CURLE_PEER_FAILED_VERIFICATION, message: "certificate has expired")
        let table: [(String, RetryPolicy.Failure, RetryPolicy.Decision)] = [
            // 1. The same other size again, and no other mirror.
            (
                "size changed",
                failure {
                    $0.rejection = .otherTotal(99)
                    $0.sizeDisagreementsReached = true
                },
                decision(.remoteChanged("the server reports 99 bytes in all, not 1000"))
            ),
            (
                "one other size is retried",
                failure {
                    $0.rejection = .otherTotal(99)
                    $0.cause = .badAnswer
                },
                decision(.requeue(delay: 0.5, failures: 1))
            ),
            // 2. Another version, or no ranges: the run ends, or the mirror goes.
            ("changed, alone", failure { $0.rejection = .changed("new ETag") }, decision(.remoteChanged("new ETag"))),
            (
                "changed, with others",
                failure {
                    $0.rejection = .changed("new ETag")
                    $0.otherMirrors = 1
                },
                decision(.requeue(delay: 0, failures: 0), drop: "it serves another version of the file (new ETag)")
            ),
            (
                "range ignored, alone", failure { $0.rejection = .rangeIgnored },
                decision(.rangesUnsupported(Rejection.rangeIgnored.description))
            ),
            (
                "encoded, with others",
                failure {
                    $0.rejection = .encoded("gzip")
                    $0.otherMirrors = 2
                },
                decision(.requeue(delay: 0, failures: 0), drop: Rejection.encoded("gzip").description)
            ),
            // 3. Throttled: fewer connections, and the backoff (503) or its own wait (429, rule 9).
            (
                "503",
                failure {
                    $0.rejection = .status(503, retryAfter: nil)
                    $0.cause = .status(503)
                },
                decision(.requeue(delay: 0.5, failures: 1), fewer: true)
            ),
            // 4. An expired URL.
            (
                "403 after a redirect",
                failure {
                    $0.rejection = .status(403, retryAfter: nil)
                    $0.redirected = true
                },
                decision(.expired)
            ),
            (
                "a redirect libcurl may not follow", failure { $0.rejection = .status(302, retryAfter: nil) },
                decision(.expired)
            ),
            (
                "403 at the URL itself", failure { $0.rejection = .status(403, retryAfter: nil) },
                decision(.requeue(delay: 0.5, failures: 1))
            ),
            // Issue 41: a signed link's expiry.
            (
                "401 after bytes, refreshable",
                failure {
                    $0.rejection = .status(401, retryAfter: nil)
                    $0.refreshable = true
                    $0.mirrorServed = 5000
                    $0.mirrorHasOtherTransfers = true
                },
                decision(.expired)
            ),
            (
                "410 before any byte, refreshable: no expiry",
                failure {
                    $0.rejection = .status(410, retryAfter: nil)
                    $0.refreshable = true
                },
                decision(.requeue(delay: 0.5, failures: 1))
            ),
            (
                "403 after bytes, a race's duplicate: it loses the race",
                failure {
                    $0.rejection = .status(403, retryAfter: nil)
                    $0.refreshable = true
                    $0.mirrorServed = 5000
                    $0.partnerBusy = true
                },
                decision(.none)
            ),
            (
                "403 after a redirect, a race's duplicate",
                failure {
                    $0.rejection = .status(403, retryAfter: nil)
                    $0.redirected = true
                    $0.partnerBusy = true
                },
                decision(.none)
            ),
            (
                "403 after bytes, nothing to refresh it, alone",
                failure {
                    $0.rejection = .status(403, retryAfter: nil)
                    $0.mirrorServed = 5000
                },
                decision(.fail(.server(url: url, message: RetryPolicy.expiry(403, served: 5000), status: 403)))
            ),
            (
                "403 after bytes, nothing to refresh it, with others",
                failure {
                    $0.rejection = .status(403, retryAfter: nil)
                    $0.mirrorServed = 5000
                    $0.otherMirrors = 1
                },
                decision(.requeue(delay: 0, failures: 0), drop: RetryPolicy.expiry(403, served: 5000))
            ),
            (
                "403 after bytes beside working transfers, nothing to refresh it: an extra connection refused",
                failure {
                    $0.rejection = .status(403, retryAfter: nil)
                    $0.mirrorServed = 5000
                    $0.mirrorHasOtherTransfers = true
                },
                decision(.requeue(delay: 0.5, failures: 1))
            ),
            // 5. Failing in a row, with others: the mirror goes, the piece waits for nobody.
            (
                "three in a row",
                failure {
                    $0.mirrorFailuresInARow = 3
                    $0.otherMirrors = 1
                },
                decision(.requeue(delay: 0, failures: 0), drop: "transfer closed")
            ),
            (
                "three in a row, alone",
                failure {
                    $0.mirrorFailuresInARow = 3
                    $0.pieceFailures = 2
                },
                decision(.requeue(delay: 2, failures: 3))
            ),
            // 6. Permanent: the run fails on the only mirror, the mirror goes with others.
            (
                "certificate, alone",
                failure {
                    $0.curlError = badCertificate
                    $0.reason = "certificate has expired"
                },
                decision(
                    .fail(
                        .network(
                            url: url,
                            message: "certificate has expired (not retried: another attempt would "
                                + "fail the same way)", failure: .certificate)))
            ),
            (
                "certificate, with others",
                failure {
                    $0.curlError = badCertificate
                    $0.otherMirrors = 1
                },
                decision(.requeue(delay: 0, failures: 0), drop: "transfer closed")
            ),
            // 7. A race partner goes on.
            ("partner busy", failure { $0.partnerBusy = true }, decision(.none)),
            // 8. Attempts used up.
            (
                "used up",
                failure {
                    $0.pieceFailures = 4
                    $0.curlError = refused
                    $0.reason = "Connection refused"
                },
                decision(
                    .fail(
                        .network(
                            url: url, message: "giving up after 5 attempts: Connection refused",
                            failure: .connectFailed)))
            ),
            (
                "used up on an answer",
                failure {
                    $0.pieceFailures = 4
                    $0.rejection = .status(500, retryAfter: nil)
                    $0.reason = "HTTP 500"
                },
                decision(.fail(.server(url: url, message: "giving up after 5 attempts: HTTP 500", status: 500)))
            ),
            (
                "used up, with others",
                failure {
                    $0.pieceFailures = 4
                    $0.otherMirrors = 1
                },
                decision(.requeue(delay: 0, failures: 0), drop: "transfer closed")
            ),
            (
                "a plain stream's restarts",
                failure {
                    $0.plain = true
                    $0.progressed = true
                    $0.plainRestarts = 4
                },
                decision(
                    .fail(
                        .server(
                            url: url,
                            message: "giving up after 5 attempts of one stream from byte 0 (the "
                                + "server serves no ranges): transfer closed")), restart: true)
            ),
            // 9. The wait.
            (
                "a cut with progress",
                failure {
                    $0.progressed = true
                    $0.pieceFailures = 3
                },
                decision(.requeue(delay: 0, failures: 1))
            ),
            ("backoff doubles", failure { $0.pieceFailures = 2 }, decision(.requeue(delay: 2, failures: 3))),
            (
                "a plain stream waits even after progress",
                failure {
                    $0.plain = true
                    $0.progressed = true
                },
                decision(.requeue(delay: 0.5, failures: 1), restart: true)
            ),
            (
                "429 without Retry-After waits four backoffs",
                failure {
                    $0.rejection = .status(429, retryAfter: nil)
                    $0.cause = .status(429)
                    $0.pieceFailures = 1
                }, decision(.requeue(delay: 4, failures: 2), fewer: true)
            ),
            (
                "Retry-After within the limit", failure { $0.rejection = .status(503, retryAfter: 7) },
                decision(.requeue(delay: 7, failures: 1), fewer: true)
            ),
            (
                "Retry-After past the limit, alone", failure { $0.rejection = .status(503, retryAfter: 3600) },
                decision(
                    .fail(
                        .server(
                            url: url, message: "the server " + Rejection.overlongWait(3600, status: 503, longest: 60),
                            status: 503)), fewer: true)
            ),
            (
                "Retry-After past the limit, with others",
                failure {
                    $0.rejection = .status(503, retryAfter: 3600)
                    $0.otherMirrors = 1
                },
                decision(
                    .requeue(delay: 0, failures: 1),
                    drop: "it " + Rejection.overlongWait(3600, status: 503, longest: 60),
                    fewer: true)
            ),
            (
                "Retry-After past the limit on an extra connection",
                failure {
                    $0.rejection = .status(503, retryAfter: 3600)
                    $0.mirrorHasOtherTransfers = true
                }, decision(.requeue(delay: 0, failures: 0), fewer: true)
            ),
            // The server's limit is not the piece's fault: uncounted, it goes
            // to the connections the server took (the extra one is not sent
            // again: the count came down).
            (
                "Retry-After on an extra connection",
                failure {
                    $0.rejection = .status(503, retryAfter: 1)
                    $0.mirrorHasOtherTransfers = true
                    $0.pieceFailures = 2
                    $0.refusalsInARow = 1
                }, decision(.requeue(delay: 0, failures: 2), fewer: true)
            ),
            (
                "refused beyond the limit, beside another mirror, after many in a row: kept",
                failure {
                    $0.rejection = .status(503, retryAfter: 1)
                    $0.mirrorHasOtherTransfers = true
                    $0.otherMirrors = 1
                    $0.refusalsInARow = 12
                }, decision(.requeue(delay: 0, failures: 0), fewer: true)
            ),
            // Sent within the limit the server had shown: a place not yet
            // given back. A grace, doubled for each refusal in a row, at
            // most what the server asked.
            (
                "a place not yet given back",
                failure {
                    $0.rejection = .status(503, retryAfter: 1)
                    $0.mirrorHasOtherTransfers = true
                    $0.sentWithinLimit = true
                    $0.refusalsInARow = 1
                }, decision(.requeue(delay: 0.1, failures: 0), fewer: true)
            ),
            (
                "a place not yet given back, the fourth refusal in a row",
                failure {
                    $0.rejection = .status(503, retryAfter: 1)
                    $0.mirrorHasOtherTransfers = true
                    $0.sentWithinLimit = true
                    $0.refusalsInARow = 4
                }, decision(.requeue(delay: 0.8, failures: 0), fewer: true)
            ),
            (
                "a place not yet given back, the sixth refusal in a row: the server's wait",
                failure {
                    $0.rejection = .status(503, retryAfter: 1)
                    $0.mirrorHasOtherTransfers = true
                    $0.sentWithinLimit = true
                    $0.refusalsInARow = 6
                }, decision(.requeue(delay: 1, failures: 0), fewer: true)
            ),
            (
                "a place not yet given back, 429 without Retry-After",
                failure {
                    $0.rejection = .status(429, retryAfter: nil)
                    $0.cause = .status(429)
                    $0.mirrorHasOtherTransfers = true
                    $0.sentWithinLimit = true
                    $0.refusalsInARow = 2
                }, decision(.requeue(delay: 0.2, failures: 0), fewer: true)
            ),
            (
                "sent within the limit but alone: the server is busy, not full",
                failure {
                    $0.rejection = .status(503, retryAfter: 1)
                    $0.sentWithinLimit = true
                }, decision(.requeue(delay: 1, failures: 1), fewer: true)
            ),
            (
                "a mirror dropped before",
                failure {
                    $0.mirrorUsable = false
                    $0.otherMirrors = 1
                },
                decision(.requeue(delay: 0, failures: 0))
            )
        ]
        let policy = RetryPolicy(settings: settings, url: url, size: 1000)
        for (name, failure, expected) in table {
            XCTAssertEqual(policy.decide(failure), expected, name)
        }
    }

    func testFailuresHaveTypedCauses() {
        XCTAssertEqual(RetryCause(CurlError(CURLE_RECV_ERROR, message: "reset"), delivered: true), .cut)
        XCTAssertEqual(RetryCause(CurlError(CURLE_OPERATION_TIMEDOUT, message: "too slow"), delivered: true), .stall)
        XCTAssertEqual(
            RetryCause(CurlError(CURLE_OPERATION_TIMEDOUT, message: "timed out"), delivered: false),
            .transport(.timeout))
        XCTAssertEqual(
            RetryCause(CurlError(CURLE_COULDNT_CONNECT, message: "refused"), delivered: false),
            .transport(.connectFailed))
        XCTAssertEqual(RetryCause(Rejection.status(503, retryAfter: 1)), .status(503))
        XCTAssertEqual(RetryCause(Rejection.overlong(ByteRange(0, 10))), .cut)
        XCTAssertEqual(RetryCause(Rejection.contentRange("bytes 0-1/2")), .badAnswer)
        XCTAssertEqual(RetryCause(DownloadError.server(url: url, message: "HTTP 502", status: 502)), .status(502))
        XCTAssertEqual(
            RetryCause(DownloadError.network(url: url, message: "x", failure: .dnsResolution)),
            .transport(.dnsResolution))
    }
}
