// HeaderCollector: the header lines of every response of one transfer, as
// libcurl delivers them, into the head of the last one.
import XCTest

@testable import RangeGet

extension ResponseHead {
    /// The head a `HeaderCollector` makes of `lines`, each delivered as libcurl
    /// delivers one (with its own line ending, the blank line included).
    static func collected(_ lines: [String]) -> ResponseHead {
        let collector = HeaderCollector()
        lines.forEach(collector.consume)
        return collector.head
    }
}

final class HeaderCollectorTests: XCTestCase {
    private func head(_ lines: [String]) -> ResponseHead {
        .collected(lines.map { $0 + "\r\n" })
    }

    func testTheLastResponsesFieldsWin() {
        let cases: [(name: String, lines: [String], status: Int, complete: Bool, fields: [String: String])] = [
            (
                "one response", ["HTTP/1.1 206 Partial", "Content-Range: bytes 0-9/10", "ETag: \"a\"", ""],
                206, true, ["content-range": "bytes 0-9/10", "etag": "\"a\""]
            ),
            (
                "a head still coming", ["HTTP/1.1 206 Partial", "Content-Range: bytes 0-9/10"],
                206, false, ["content-range": "bytes 0-9/10"]
            ),
            (
                "repeated fields joined, names lowercased", ["HTTP/1.1 200 OK", "Via: a", "VIA: b", ""],
                200, true, ["via": "a, b"]
            ),
            (
                "100 Continue first",
                [
                    "HTTP/1.1 100 Continue", "X-Interim: 1", "", "HTTP/1.1 206 Partial",
                    "Content-Range: bytes 0-0/5", ""
                ],
                206, true, ["content-range": "bytes 0-0/5"]
            ),
            (
                "103 Early Hints first",
                [
                    "HTTP/1.1 103 Early Hints", "Link: </s.css>; rel=preload", "",
                    "HTTP/1.1 200 OK", "Content-Length: 5", ""
                ],
                200, true, ["content-length": "5"]
            ),
            (
                "a redirect libcurl followed",
                [
                    "HTTP/1.1 302 Found", "Location: /b", "ETag: \"old\"", "Content-Length: 0", "",
                    "HTTP/1.1 200 OK", "Content-Length: 7", ""
                ],
                200, true, ["content-length": "7"]
            ),
            (
                "two redirects, then an error",
                [
                    "HTTP/1.1 301 Moved", "Location: /b", "", "HTTP/2 307", "location: /c", "",
                    "HTTP/2 503", "retry-after: 3", ""
                ],
                503, true, ["retry-after": "3"]
            ),
            (
                "a redirect whose follow-up sent nothing yet", ["HTTP/1.1 302 Found", "Location: /b", ""],
                302, true, ["location": "/b"]
            ),
            (
                "trailers after a chunked body",
                [
                    "HTTP/1.1 206 Partial", "Content-Range: bytes 0-9/10",
                    "Transfer-Encoding: chunked", "", "Content-Range: bytes 0-0/1",
                    "ETag: \"trailer\"", ""
                ],
                206, true, ["content-range": "bytes 0-9/10", "transfer-encoding": "chunked"]
            ),
            ("no status yet: never complete", ["X: 1", ""], 0, false, ["x": "1"]),
            ("a status that is not three digits", ["HTTP/1.1 2060 Odd", ""], 0, false, [:])
        ]
        for (name, lines, status, complete, fields) in cases {
            let parsed = head(lines)
            XCTAssertEqual(parsed.status, status, name)
            XCTAssertEqual(parsed.isComplete, complete, name)
            XCTAssertEqual(parsed.fields, fields, name)
        }
    }

    func testOnlyACompleteAnswerThatIsNeitherInterimNorARedirectIsFinal() {
        XCTAssertTrue(head(["HTTP/1.1 206 Partial", ""]).isFinal)
        XCTAssertTrue(head(["HTTP/1.1 404 Not Found", ""]).isFinal)
        XCTAssertFalse(head(["HTTP/1.1 206 Partial"]).isFinal)
        XCTAssertFalse(head(["HTTP/1.1 100 Continue", ""]).isFinal)
        XCTAssertFalse(head(["HTTP/1.1 302 Found", "Location: /b", ""]).isFinal)
        XCTAssertTrue(head(["HTTP/1.1 302 Found", "Location: /b", "", "HTTP/1.1 200 OK", ""]).isFinal)
    }

    func testResetForgetsThePreviousRequest() {
        let collector = HeaderCollector()
        ["HTTP/1.1 206 Partial\r\n", "ETag: \"a\"\r\n", "\r\n"].forEach(collector.consume)
        collector.reset()
        XCTAssertEqual(collector.head.status, 0)
        XCTAssertFalse(collector.head.isComplete)
        XCTAssertEqual(collector.head.fields, [:])
    }
}
