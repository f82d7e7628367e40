// Tables of hostile values for the pure parts (issue 12): Retry-After and
// HTTP dates a server controls, text that leaves the library (secrets in
// URLs, control characters from headers), and which `-H` headers may follow
// a redirect to another origin. The end-to-end side is
// Tests/EndToEndTests/ReliabilityHostileServerTests.swift.
import XCTest

@testable import RangeGet

final class RetryAfterTests: XCTestCase {
    private func retryAfter(_ value: String) -> Double? {
        ResponseHead.collected(["HTTP/1.1 503 Busy\r\n", "Retry-After: \(value)\r\n", "\r\n"]).retryAfter
    }

    func testEveryValueIsAWaitOfAtMostABillionSecondsOrNone() {
        let now = Double(time(nil))
        let cases: [(String, ClosedRange<Double>?)] = [
            ("7", 7...7),
            ("0", 0...0),
            ("300", 300...300),
            ("301", 301...301),
            ("9223372036854775807", 1e9...1e9),
            ("9223372036854775808", 1e9...1e9),
            (String(repeating: "9", count: 1000), 1e9...1e9),
            ("-5", nil),
            ("1e999", nil),
            ("", nil),
            ("Sun, 06 Nov 1994 08:49:37 GMT", 0...0),
            ("Fri, 31 Dec 9999 23:59:59 GMT", 1e9...1e9),
            ("Sun, 06 Nov 99999999999 08:49:37 GMT", nil),
            ("Sun, 06 Nov -2147483648 08:49:37 GMT", nil),
            ("Sun, 99999999999999999999 Nov 1994 08:49:37 GMT", nil),
            ("Sun, 06 Nov 1994 99999999999999999999:49:37 GMT", nil),
            ("Sun, 6 Nov 1994 08:49:37 GMT", nil),
            // Found by the http-date fuzz target: fields that are not two digits were skipped.
            ("Sun, 06 Nov 1994 08:xx:49:37 GMT", nil)
        ]
        for (value, expected) in cases {
            let wait = retryAfter(value)
            if let expected {
                XCTAssertTrue(wait.map(expected.contains) == true, "\(value.prefix(40)): \(String(describing: wait))")
            } else {
                XCTAssertNil(wait, String(value.prefix(40)))
            }
        }
        let soon = HTTPDateFixture.format(now + 20)
        XCTAssertEqual(retryAfter(soon) ?? 0, 20, accuracy: 2, soon)
    }

    func testTheRejectionSaysHowLongItWaits() {
        let head = ResponseHead.collected(["HTTP/1.1 503 Busy\r\n", "Retry-After: 9223372036854775807\r\n", "\r\n"])
        let rejection = ResponseCheck.check(
            head, requested: ByteRange(0, 1), expected: Expectation(size: 1, etag: nil, lastModified: nil))
        XCTAssertEqual(rejection?.description, "HTTP 503 (retry after over 31 years)")
    }

    func testAnOverlongAnswerIsABadAnswerNotAChangedFile() {
        let rejection = Rejection.overlong(ByteRange(100, 200))
        XCTAssertTrue(rejection.isTransient)
        XCTAssertEqual(
            rejection.description, "the answer for bytes 100-199 ran past its Content-Range (none of it kept)")
    }
}

/// IMF-fixdates for a number of seconds since 1970, for the tables.
private enum HTTPDateFixture {
    static func format(_ seconds: Double) -> String {
        var value = time_t(seconds)
        var fields = tm()
        gmtime_r(&value, &fields)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &fields)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

final class OutgoingTextTests: XCTestCase {
    func testURLsLoseTheirCredentialsAndControlCharactersBecomeQuestionMarks() {
        let cases: [(String, String)] = [
            ("http://alice:S3CR3T@example.org/f", "http://example.org/f"),
            ("https://tok@example.org:8443/f?sig=1", "https://example.org:8443/f?sig=1"),
            ("http://a@b:p@w@host/x", "http://host/x"),
            ("http://u:p;w,(x)@host", "http://host"),
            ("http://u:p@[::1]:80/", "http://[::1]:80/"),
            ("http://u:p@host: HTTP 404", "http://host: HTTP 404"),
            (
                "its size differs from http://u:p@a/f (10) and https://v:q@b/g",
                "its size differs from http://a/f (10) and https://b/g"
            ),
            ("http://host/path@not-userinfo", "http://host/path@not-userinfo"),
            ("mail me@example.org", "mail me@example.org"),
            ("ETag \"v\u{1B}]0;owned\u{7}\"", "ETag \"v\\u{1B}]0;owned\\u{7}\""),
            ("a\u{9B}31mb\u{0}c\u{7F}d\r\ne\tf", "a\\u{9B}31mb\\u{0}c\\u{7F}d\\u{D}\\u{A}e\\u{9}f"),
            ("right\u{202E}txt.exe\u{2066}\u{2028}", "right\\u{202E}txt.exe\\u{2066}\\u{2028}"),
            ("http://u:p\u{1B}@host/", "http://host/"),
            ("ünïcödé ✓", "ünïcödé ✓"),
            ("", "")
        ]
        for (text, expected) in cases {
            XCTAssertEqual(OutgoingText.clean(text), expected, text.debugDescription)
        }
    }

    func testErrorsAndEventsHandOutCleanText() {
        let url = "http://alice:S3CR3T@127.0.0.1:8080/f"
        XCTAssertEqual(
            DownloadError.server(url: url, message: "unexpected Content-Range bytes\u{1B}[2J").description,
            "http://127.0.0.1:8080/f: unexpected Content-Range bytes\\u{1B}[2J")
        XCTAssertEqual(
            DownloadError.network(url: url, message: "refused", failure: .connectFailed).description,
            "http://127.0.0.1:8080/f: refused")
        guard
            case let .mirrorDropped(dropped, reason) = DownloadEvent.mirrorDropped(url: url, reason: "ETag \"\u{7}\"")
                .cleaned
        else {
            return XCTFail("another event")
        }
        XCTAssertEqual(dropped, "http://127.0.0.1:8080/f")
        XCTAssertEqual(reason, "ETag \"\\u{7}\"")
        let remote = RemoteFile(
            url: url, effectiveURL: url, size: 1, etag: nil, lastModified: nil, acceptsRanges: true,
            contentDisposition: nil)
        guard case let .probed(probed) = DownloadEvent.probed(remote).cleaned else { return XCTFail("another event") }
        XCTAssertEqual([probed.url, probed.effectiveURL], ["http://127.0.0.1:8080/f", "http://127.0.0.1:8080/f"])
        XCTAssertEqual(
            MirrorReport(url: url, bytes: 1, seconds: 1, errors: 0, dropped: nil).cleaned.url, "http://127.0.0.1:8080/f"
        )
    }
}

final class HeaderPolicyTests: XCTestCase {
    private let given = [
        "Authorization: Bearer A", "Cookie: c=1", "PRIVATE-TOKEN: t", "X-Api-Key: k",
        "Proxy-Authorization: Basic p", "X-Amz-Security-Token: s", "accept: */*", "Accept-Language: de",
        "Cache-Control: no-cache", "User-Agent: mine", "If-Range: \"e\""
    ]

    func testOnlyHarmlessHeadersGoToAnotherOrigin() {
        let harmless = [
            "accept: */*", "Accept-Language: de", "Cache-Control: no-cache", "User-Agent: mine", "If-Range: \"e\""
        ]
        let cases: [(String, String, [String])] = [
            ("http://a.example/f", "http://a.example/g?x=1", given),
            ("http://a.example/f", "http://A.EXAMPLE:80/g", given),
            ("https://a.example/f", "https://a.example:443/f", given),
            ("http://a.example/f", "http://b.example/f", harmless),
            ("http://a.example/f", "http://a.example:8080/f", harmless),
            ("http://a.example/f", "https://a.example/f", harmless),
            ("http://127.0.0.1:1/f", "http://127.0.0.1:2/f", harmless),
            // Hosts URLComponents cannot read (with ICU, as in this process: punycode that does not
            // decode) never make one origin: they were all "http://:80".
            ("http://xn--a.example/f", "http://xn--zz.evil.example/steal", harmless)
        ]
        for (origin, target, expected) in cases {
            XCTAssertEqual(
                HeaderPolicy.headers(given, givenFor: origin, sentTo: target), expected, "\(origin) -> \(target)")
        }
        let remote = RemoteFile(
            url: "http://a.example/f", effectiveURL: "http://cdn.example/f", size: 1, etag: nil,
            lastModified: nil, acceptsRanges: true, contentDisposition: nil)
        XCTAssertEqual(remote.headers(from: given), harmless)
    }

    func testLibcurlFollowsRedirectsOnlyWithoutCredentialHeaders() throws {
        let easy = try EasyHandle()
        try easy.setHeaders(["Accept: */*", "User-Agent: x", "If-Range: \"e\""])
        XCTAssertTrue(easy.followsRedirects)
        for line in given.prefix(6) {
            try easy.setHeaders(["Accept: */*", line])
            XCTAssertFalse(easy.followsRedirects, line)
        }
        try easy.setHeaders([])
        XCTAssertTrue(easy.followsRedirects)
    }

    func testURLCredentialsFollowOnlyWithinTheOrigin() {
        let origin = "http://al%20ice:p%40ss@a.example/f"
        XCTAssertEqual(
            HeaderPolicy.carryingUserinfo(of: origin, to: "http://a.example/g"), "http://al%20ice:p%40ss@a.example/g")
        XCTAssertEqual(HeaderPolicy.carryingUserinfo(of: origin, to: "http://b.example/g"), "http://b.example/g")
        XCTAssertEqual(
            HeaderPolicy.carryingUserinfo(of: origin, to: "http://bob@a.example/g"), "http://bob@a.example/g")
        XCTAssertEqual(
            HeaderPolicy.carryingUserinfo(of: "http://a.example/f", to: "http://a.example/g"), "http://a.example/g")
    }
}
