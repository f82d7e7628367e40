import XCTest

@testable import RangeServer

final class HTTPRequestTests: XCTestCase {
    private func parse(_ text: String, max: Int = 16384) -> HTTPRequest.ParseOutcome {
        Array(text.utf8).withUnsafeBytes { HTTPRequest.parse($0, maxHeadLength: max) }
    }

    func testParsesRequestLineAndHeaders() throws {
        let text = "GET /a%20b?x=1 HTTP/1.1\r\nHost: h\r\nRange:  bytes=0-1 \r\nX-A: 1\r\nx-a: 2\r\n\r\nrest"
        guard case .request(let request, let length) = parse(text) else { return XCTFail("\(parse(text))") }
        XCTAssertEqual(length, text.utf8.count - 4)
        XCTAssertEqual(request.method, "GET")
        XCTAssertEqual(request.target, "/a%20b?x=1")
        XCTAssertEqual(request.path, "/a b")
        XCTAssertEqual(request.header("range"), "bytes=0-1")
        XCTAssertEqual(request.header("x-a"), "1, 2")
        XCTAssertEqual(request.headerDictionary["host"], "h")
        XCTAssertTrue(request.keepAlive)
    }

    func testIncompleteUntilTheEmptyLine() {
        XCTAssertEqual(parse("GET / HTTP/1.1\r\nHost: h\r\n"), .incomplete)
        XCTAssertEqual(parse(""), .incomplete)
    }

    func testBareLineFeedsAndLeadingEmptyLinesAreAccepted() {
        guard case .request(let request, let length) = parse("\r\nGET /x HTTP/1.1\nHost: h\n\n") else {
            return XCTFail()
        }
        XCTAssertEqual(request.path, "/x")
        XCTAssertEqual(length, 27)
    }

    func testRejectsBadRequests() {
        let cases: [(String, Int)] = [
            ("GARBAGE\r\n\r\n", 400),
            ("GET /\r\nHost: h\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\n\r\n", 400), // no Host
            ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n folded\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: h\r\nno colon\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 1, 2\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400),
            ("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505),
            ("GET / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n", 501)
        ]
        for (text, status) in cases {
            XCTAssertEqual(parse(text), .invalid(status: status), text)
        }
    }

    func testHeadsOverTheLimitGet431() {
        let long = "GET / HTTP/1.1\r\nHost: h\r\nX: " + String(repeating: "a", count: 200)
        XCTAssertEqual(parse(long, max: 100), .invalid(status: 431))
        XCTAssertEqual(parse(long + "\r\n\r\n", max: 100), .invalid(status: 431))
    }

    func testHTTP10IsCloseByDefault() {
        guard case .request(let plain, _) = parse("GET / HTTP/1.0\r\n\r\n"),
            case .request(let kept, _) = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
            case .request(let closed, _) = parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, close\r\n\r\n")
        else { return XCTFail() }
        XCTAssertFalse(plain.keepAlive)
        XCTAssertTrue(kept.keepAlive)
        XCTAssertFalse(closed.keepAlive)
    }

    func testTargetForms() {
        func path(_ target: String) -> String? {
            HTTPRequest(method: "GET", target: target, minorVersion: 1, fields: []).path
        }
        XCTAssertEqual(path("http://127.0.0.1:8080/f.bin?sig=1"), "/f.bin")
        XCTAssertEqual(path("http://host"), "/")
        XCTAssertEqual(path("/%2e%2e/x"), "/../x")
        XCTAssertNil(path("*"))
        XCTAssertNil(path("/bad%zz"))
        XCTAssertNil(path("/bad%ff")) // not UTF-8
    }
}
