import Foundation
import RangeServer
import XCTest

/// The server's plain HTTP behaviour, over real sockets.
final class ServerHTTPTests: XCTestCase {
    private let file = Resource.generated(size: 100_000, seed: 5)

    private func server(_ configuration: RangeServer.Configuration = .init()) throws -> RangeServer {
        var named = file
        named.contentDisposition = "attachment; filename=\"f.bin\""
        return try startServer(["f.bin": named, "empty.bin": .data([])], configuration: configuration, on: self)
    }

    func testHeadSendsTheHeadersOfGetWithoutABody() throws {
        let server = try server()
        let connection = try TestConnection(port: server.port)
        connection.sendRequest("HEAD", "/f.bin")
        let head = try connection.readResponse(bodyless: true)
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("content-length"), "100000")
        XCTAssertEqual(head.header("accept-ranges"), "bytes")
        XCTAssertEqual(head.header("etag"), "\"rg-5-100000-0\"")
        XCTAssertEqual(head.header("last-modified"), "Mon, 01 Jan 2024 00:00:00 GMT")
        XCTAssertEqual(head.header("content-type"), "application/octet-stream")
        XCTAssertEqual(head.header("content-disposition"), "attachment; filename=\"f.bin\"")
        XCTAssertNotNil(head.header("date").flatMap { $0.hasSuffix(" GMT") ? $0 : nil })
        // No body followed: the next response on the connection parses.
        connection.sendRequest("GET", "/f.bin")
        let get = try connection.readResponse()
        XCTAssertEqual(get.status, 200)
        XCTAssertEqual(get.fields.map(\.name).filter { $0 != "date" }, head.fields.map(\.name).filter { $0 != "date" })
        XCTAssertEqual(get.body, file.bytes(in: 0..<file.size))
    }

    func testRanges() throws {
        let server = try server()
        let cases: [(String, Range<Int64>)] = [
            ("bytes=0-0", 0..<1),
            ("bytes=100-199", 100..<200),
            ("bytes=99000-", 99000..<100_000),
            ("bytes=-500", 99500..<100_000),
            ("bytes=99990-200000", 99990..<100_000),
            ("bytes=-200000", 0..<100_000)
        ]
        for (header, range) in cases {
            let response = try fetch(server, "/f.bin", headers: ["Range": header])
            XCTAssertEqual(response.status, 206, header)
            XCTAssertEqual(
                response.header("content-range"), "bytes \(range.lowerBound)-\(range.upperBound - 1)/100000", header)
            XCTAssertEqual(response.header("content-length"), String(range.count), header)
            XCTAssertEqual(response.body, file.bytes(in: range), header)
        }
    }

    func testOffsetsAroundAndBeyond4GiB() throws {
        let huge = Resource.generated(size: 5 << 30, seed: 8)
        let server = try startServer(["huge.bin": huge], on: self)
        XCTAssertEqual(try fetch(server, "/huge.bin", method: "HEAD").header("content-length"), "5368709120")
        for first: Int64 in [(1 << 31) - 1, (1 << 32) - 1, 1 << 32, (5 << 30) - 3] {
            let response = try fetch(server, "/huge.bin", headers: ["Range": "bytes=\(first)-\(first + 9)"])
            let range = first..<min(first + 10, 5 << 30)
            XCTAssertEqual(response.header("content-range"), "bytes \(first)-\(range.upperBound - 1)/5368709120")
            XCTAssertEqual(response.body, huge.bytes(in: range))
        }
    }

    func testUnsatisfiableRangesGet416() throws {
        let server = try server()
        for (path, header, total) in [
            ("/f.bin", "bytes=100000-", 100_000), ("/empty.bin", "bytes=0-", 0), ("/empty.bin", "bytes=-1", 0)
        ] {
            let response = try fetch(server, path, headers: ["Range": header])
            XCTAssertEqual(response.status, 416, header)
            XCTAssertEqual(response.header("content-range"), "bytes */\(total)", header)
            XCTAssertEqual(response.body, [])
        }
        let empty = try fetch(server, "/empty.bin")
        XCTAssertEqual(empty.status, 200)
        XCTAssertEqual(empty.header("content-length"), "0")
    }

    func testSeveralOrMalformedRangesGetTheWholeBody() throws {
        let server = try server()
        for header in ["bytes=0-1,5-6", "bytes=5-1", "lines=1-2", "bytes=x"] {
            let response = try fetch(server, "/f.bin", headers: ["Range": header])
            XCTAssertEqual(response.status, 200, header)
            XCTAssertNil(response.header("content-range"))
            XCTAssertEqual(response.body.count, 100_000, header)
        }
    }

    func testIfRange() throws {
        let server = try server()
        let etag = try XCTUnwrap(server.resource(at: "f.bin")?.etag)
        let cases: [(String, Int)] = [
            (etag, 206),
            ("\"rg-other\"", 200),
            ("W/" + etag, 200),
            ("Mon, 01 Jan 2024 00:00:00 GMT", 206),
            ("Tue, 02 Jan 2024 00:00:00 GMT", 200)
        ]
        for (value, status) in cases {
            let response = try fetch(server, "/f.bin", headers: ["Range": "bytes=10-19", "If-Range": value])
            XCTAssertEqual(response.status, status, value)
            XCTAssertEqual(response.body.count, status == 206 ? 10 : 100_000, value)
        }
    }

    func testKeepAliveAndPipelining() throws {
        let server = try server()
        let connection = try TestConnection(port: server.port)
        connection.sendRequest("GET", "/f.bin", headers: ["Range": "bytes=0-9"])
        XCTAssertEqual(try connection.readResponse().body, file.bytes(in: 0..<10))
        connection.sendRequest("GET", "/f.bin", headers: ["Range": "bytes=10-19"])
        XCTAssertEqual(try connection.readResponse().body, file.bytes(in: 10..<20))
        // Two requests in one write; the second asks to close.
        connection.send(
            "GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=20-29\r\n\r\n"
                + "GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=30-39\r\nConnection: close\r\n\r\n")
        XCTAssertEqual(try connection.readResponse().body, file.bytes(in: 20..<30))
        let last = try connection.readResponse()
        XCTAssertEqual(last.body, file.bytes(in: 30..<40))
        XCTAssertEqual(last.header("connection"), "close")
        XCTAssertTrue(connection.closesWithin(2))
        let records = server.statistics.requests
        XCTAssertEqual(records.count, 4)
        XCTAssertEqual(Set(records.map(\.connection)).count, 1)
        XCTAssertEqual(server.statistics.connectionsAccepted, 1)
    }

    func testIdleConnectionsAreClosed() throws {
        let server = try server(.init(idleTimeout: 0.2))
        let connection = try TestConnection(port: server.port)
        XCTAssertTrue(connection.closesWithin(3))
    }

    func testOtherMethodsGet405AndGarbageGets400() throws {
        let server = try server()
        let post = try fetch(server, "/f.bin", method: "POST")
        XCTAssertEqual(post.status, 405)
        XCTAssertEqual(post.header("allow"), "GET, HEAD")

        // A request body is skipped, so the connection stays usable.
        let connection = try TestConnection(port: server.port)
        connection.send("PUT /f.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        XCTAssertEqual(try connection.readResponse().status, 405)
        connection.sendRequest("GET", "/f.bin", headers: ["Range": "bytes=0-0"])
        XCTAssertEqual(try connection.readResponse().status, 206)

        let bad = try TestConnection(port: server.port)
        bad.send("NOT HTTP AT ALL\r\n\r\n")
        let response = try bad.readResponse()
        XCTAssertEqual(response.status, 400)
        XCTAssertEqual(response.header("connection"), "close")
        XCTAssertTrue(bad.closesWithin(2))

        let huge = try TestConnection(port: server.port)
        huge.send("GET / HTTP/1.1\r\nHost: x\r\nX: " + String(repeating: "a", count: 20_000) + "\r\n\r\n")
        XCTAssertEqual(try huge.readResponse().status, 431)
    }

    func testServesADirectoryWithoutPathTraversal() throws {
        let root = NSTemporaryDirectory() + "rangeserver-dir-\(getpid())"
        try FileManager.default.createDirectory(atPath: root + "/public/sub", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Resource.data(Array("secret".utf8)).write(to: root + "/secret.txt")
        try Resource.data(Array("hello".utf8)).write(to: root + "/public/sub/a b.txt")
        symlink(root + "/secret.txt", root + "/public/link.txt")

        let server = try server()
        server.serveDirectory(root + "/public")
        let ok = try fetch(server, "/sub/a%20b.txt", headers: ["Range": "bytes=1-"])
        XCTAssertEqual(ok.status, 206)
        XCTAssertEqual(String(decoding: ok.body, as: UTF8.self), "ello")
        XCTAssertNotNil(ok.header("etag"))
        XCTAssertNotNil(ok.header("last-modified"))
        for path in [
            "/../secret.txt", "/%2e%2e/secret.txt", "/sub/%2E%2E/../secret.txt", "/sub/..%2f..%2fsecret.txt",
            "/link.txt", "/sub", "/missing", "/"
        ] {
            XCTAssertEqual(try fetch(server, path).status, 404, path)
        }
        // Resources take precedence over the directory.
        server.setResource(.data([1]), at: "sub/a b.txt")
        XCTAssertEqual(try fetch(server, "/sub/a%20b.txt").body, [1])
        server.removeResource(at: "/sub/a b.txt")
        XCTAssertEqual(try fetch(server, "/sub/a%20b.txt").body.count, 5)
    }

    func testStatisticsCountBodyBytesAndRecordRequests() throws {
        let server = try server()
        _ = try fetch(server, "/f.bin")
        _ = try fetch(server, "/f.bin", headers: ["Range": "bytes=0-99", "If-Range": "\"x\""])
        _ = try fetch(server, "/f.bin", headers: ["Range": "bytes=0-99"])
        _ = try fetch(server, "/f.bin", method: "HEAD")
        var statistics = server.statistics
        XCTAssertEqual(statistics.bodyBytesSent, 100_000 + 100_000 + 100)
        XCTAssertEqual(statistics.connectionsAccepted, 4)
        XCTAssertEqual(statistics.requests.map(\.status), [200, 200, 206, 200])
        XCTAssertEqual(statistics.requests.map(\.bodyBytesSent), [100_000, 100_000, 100, 0])
        XCTAssertEqual(statistics.requests[1].rangeHeader, "bytes=0-99")
        XCTAssertEqual(statistics.requests[1].ifRangeHeader, "\"x\"")
        XCTAssertEqual(statistics.requests[1].headers["if-range"], "\"x\"")
        XCTAssertEqual(statistics.requests[3].method, "HEAD")
        XCTAssertEqual(statistics.requests(to: "f.bin").count, 4)
        XCTAssertNil(statistics.requests[0].fault)
        server.resetStatistics()
        statistics = server.statistics
        XCTAssertEqual(statistics.requests.count, 0)
        XCTAssertEqual(statistics.bodyBytesSent, 0)
    }

    func testRecordsAreCappedButCounted() throws {
        let server = try server(.init(maxRecordedRequests: 2))
        for _ in 0..<3 { _ = try fetch(server, "/f.bin", headers: ["Range": "bytes=0-9"]) }
        XCTAssertEqual(server.statistics.requests.count, 2)
        XCTAssertEqual(server.statistics.requestsNotRecorded, 1)
        XCTAssertEqual(server.statistics.bodyBytesSent, 30)
    }

    /// Exact to the byte; how fast is the benchmarks' business, not a test's.
    func testLargeDownloadIsExact() throws {
        let big = Resource.generated(size: 64 << 20, seed: 11)
        let server = try startServer(["big.bin": big], on: self)
        let response = try fetch(server, "/big.bin", timeout: 60)
        XCTAssertEqual(response.body.count, 64 << 20)
        let expected = big.bytes(in: 0..<big.size)
        XCTAssertTrue(
            response.body.withUnsafeBytes { got in
                expected.withUnsafeBytes { memcmp(got.baseAddress!, $0.baseAddress!, $0.count) == 0 }
            })
        XCTAssertEqual(server.statistics.bodyBytesSent, 64 << 20)
    }

    func testStartFailsWithATypedErrorWhenThePortIsTaken() throws {
        let first = try server()
        let second = RangeServer(configuration: .init(port: first.port))
        XCTAssertThrowsError(try second.start()) { error in
            XCTAssertEqual((error as? RangeServerError)?.code, EADDRINUSE)
            XCTAssertTrue("\(error)".contains("bind 127.0.0.1:\(first.port)"), "\(error)")
        }
        XCTAssertThrowsError(try first.start()) { XCTAssertEqual($0 as? RangeServerError, .alreadyRunning) }
        XCTAssertEqual(first.url("/a/b"), "http://127.0.0.1:\(first.port)/a/b")
        XCTAssertEqual(first.url("a"), "http://127.0.0.1:\(first.port)/a")
    }

    func testStopIsIdempotentAndTheServerCanRestartOnItsPort() throws {
        let server = try server()
        let port = server.port
        server.stop()
        server.stop()
        XCTAssertThrowsError(try TestConnection(port: port))
        try server.start()
        XCTAssertEqual(server.port, port)
        XCTAssertEqual(try fetch(server, "/f.bin", method: "HEAD").status, 200)
    }
}
