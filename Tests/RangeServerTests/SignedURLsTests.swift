import XCTest

@testable import RangeServer

/// The bookkeeping of signed URLs and the bodiless answers, without a server.
final class SignedURLsTests: XCTestCase {
    func testTokenQueryParameter() {
        let cases: [(String, String?)] = [
            ("/f.bin", nil), ("/f.bin?", nil), ("/f.bin?token=ab12", "ab12"), ("/f.bin?x=1&token=ab&y=2", "ab"),
            ("/f.bin?tokens=ab", nil), ("/f.bin?token=", "")
        ]
        for (target, token) in cases {
            XCTAssertEqual(SignedURLs.token(inTarget: target), token, target)
        }
    }

    func testATokenAdmitsItsPathUntilItsDeadline() {
        var urls = SignedURLs()
        let token = urls.issue(for: "f.bin", lifetime: 2, now: 100)
        XCTAssertEqual(token.count, 32)
        XCTAssertTrue(urls.admits(token: token, path: "f.bin", now: 100))
        XCTAssertTrue(urls.admits(token: token, path: "f.bin", now: 101.999))
        XCTAssertFalse(urls.admits(token: token, path: "f.bin", now: 102))
        XCTAssertFalse(urls.admits(token: token, path: "g.bin", now: 100))
        XCTAssertFalse(urls.admits(token: nil, path: "f.bin", now: 100))
        XCTAssertFalse(urls.admits(token: "0123", path: "f.bin", now: 100))
        XCTAssertNotEqual(urls.issue(for: "f.bin", lifetime: 2, now: 100), token)
    }

    func testExpiredTokensAreForgottenWhenAnotherIsIssued() {
        var urls = SignedURLs()
        let old = urls.issue(for: "f.bin", lifetime: 1, now: 0)
        _ = urls.issue(for: "f.bin", lifetime: 1, now: 5)
        // Even a clock that went back would not bring the old token back.
        XCTAssertFalse(urls.admits(token: old, path: "f.bin", now: 0.5))
    }

    func testOverLimitAnswerClosesWithRetryAfter() {
        let context = ResponsePlan.Context(method: "GET", date: "Mon, 07 Dec 2026 00:00:00 GMT")
        let plan = ResponsePlan.overLimit(context)
        XCTAssertEqual(plan.status, 503)
        XCTAssertEqual(plan.field("Retry-After"), "1")
        XCTAssertEqual(plan.field("Content-Length"), "0")
        XCTAssertEqual(plan.field("Connection"), "close")
        XCTAssertEqual(plan.ending, .close)
        XCTAssertTrue(plan.body.isEmpty)
    }
}
