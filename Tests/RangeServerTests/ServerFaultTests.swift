import Foundation
import RangeServer
import XCTest

/// Each injected fault, as a client sees it on the wire.
final class ServerFaultTests: XCTestCase {
    private let file = Resource.generated(size: 10_000, seed: 2)

    private func server(_ rules: [FaultRule]) throws -> RangeServer {
        try startServer(["f.bin": file], configuration: .init(faults: rules), on: self)
    }

    private func ranged(_ server: RangeServer, _ range: String = "bytes=100-199") throws -> TestResponse {
        try fetch(server, "/f.bin", headers: ["Range": range])
    }

    func testIgnoreRange() throws {
        let server = try server([FaultRule(.ignoreRange)])
        let response = try ranged(server)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.body, file.bytes(in: 0..<10_000))
        XCTAssertEqual(server.statistics.requests.first?.fault, "ignore-range")
    }

    func testCutAfter() throws {
        let server = try server([FaultRule(.cutAfter(1000))])
        let response = try fetch(server, "/f.bin")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("content-length"), "10000")
        XCTAssertEqual(response.ending, .closedEarly)
        XCTAssertEqual(response.body, file.bytes(in: 0..<1000))
        XCTAssertEqual(server.statistics.bodyBytesSent, 1000)
        XCTAssertEqual(server.statistics.requests.first?.fault, "cut:1000")
    }

    func testCutAtRandomIsDeterministicPerSeedAndRequest() throws {
        func cutPoints() throws -> [Int] {
            let server = try server([FaultRule(.cutAtRandom(seed: 7))])
            return try (0..<5).map { _ in
                let response = try fetch(server, "/f.bin")
                XCTAssertEqual(response.ending, .closedEarly)
                return response.body.count
            }
        }
        let first = try cutPoints()
        XCTAssertEqual(try cutPoints(), first)
        XCTAssertGreaterThan(Set(first).count, 1, "requests are cut at different points: \(first)")
        XCTAssertTrue(first.allSatisfy { $0 < 10_000 })
    }

    func testStallAfterHoldsTheConnectionUntilStop() throws {
        let server = try server([FaultRule(.stallAfter(500))])
        let connection = try TestConnection(port: server.port, timeout: 0.3)
        connection.sendRequest("GET", "/f.bin")
        let response = try connection.readResponse()
        XCTAssertEqual(response.ending, .timedOut)
        XCTAssertEqual(response.body, file.bytes(in: 0..<500))
        XCTAssertEqual(server.statistics.bodyBytesSent, 500, "counted while still stalled")
        // A stall lasts until stop: a bounded wait shows stop ends it.
        server.stop()
        XCTAssertTrue(connection.closesWithin(10))
    }

    func testStatusWithRetryAfterKeepsTheConnection() throws {
        let server = try server([FaultRule(.status(503, retryAfter: 2), when: .nthRequest(1))])
        let connection = try TestConnection(port: server.port)
        connection.sendRequest("GET", "/f.bin", headers: ["Range": "bytes=0-9"])
        let refused = try connection.readResponse()
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.header("retry-after"), "2")
        XCTAssertEqual(refused.header("content-type"), "text/html; charset=utf-8")
        XCTAssertTrue(String(decoding: refused.body, as: UTF8.self).contains("503 Service Unavailable"))
        connection.sendRequest("GET", "/f.bin", headers: ["Range": "bytes=0-9"])
        XCTAssertEqual(try connection.readResponse().status, 206)
    }

    func testRetryAfterIsSentAsGiven() throws {
        let date = "Sun, 06 Nov 99999999999 08:49:37 GMT"
        let server = try server([FaultRule(.retryAfter(status: 503, value: date))])
        let refused = try ranged(server)
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(refused.header("retry-after"), date)
    }

    func testClaimLengthIgnoresRangesAndNeverMeetsTheClaim() throws {
        let server = try server([FaultRule(.claimLength("9000000000000000000"))])
        let response = try ranged(server)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("content-length"), "9000000000000000000")
        XCTAssertEqual(response.ending, .closedEarly)
        XCTAssertEqual(response.body, file.bytes(in: 0..<10_000))
    }

    func testOverlongSendsBytesPastTheContentRange() throws {
        let server = try server([FaultRule(.overlong(7))])
        let response = try ranged(server)
        XCTAssertEqual(response.status, 206)
        XCTAssertEqual(response.header("content-range"), "bytes 100-199/10000")
        XCTAssertEqual(response.header("content-length"), "107")
        XCTAssertEqual(response.body, file.bytes(in: 100..<200) + Array("!!!!!!!".utf8))
    }

    func testHeaderReplacesOrAddsAFieldWithHostileText() throws {
        let escape = "\"v\u{1B}[2J\u{7}\""
        let replaced = try ranged(try server([FaultRule(.header(name: "etag", value: escape))]))
        XCTAssertEqual(replaced.status, 206)
        XCTAssertEqual(replaced.header("etag"), escape)
        XCTAssertEqual(replaced.body, file.bytes(in: 100..<200))
        let added = try ranged(try server([FaultRule(.header(name: "X-Note", value: "\u{9B}31m"))]))
        XCTAssertEqual(added.header("x-note"), "\u{9B}31m")
        XCTAssertEqual(added.header("content-range"), "bytes 100-199/10000")
    }

    func testWrongContentRanges() throws {
        let cases: [(Fault, String, String, Range<Int64>)] = [
            (.wrongContentRangeShift(5), "bytes=100-199", "bytes 105-204/10000", 105..<205),
            (.wrongContentRangeShift(-150), "bytes=100-199", "bytes 0-49/10000", 0..<50),
            (.wrongContentRangeShift(-1), "bytes=9990-", "bytes 9989-9998/10000", 9989..<9999),
            (.wrongContentRangeTotal(99), "bytes=100-199", "bytes 100-199/99", 100..<200),
            (.invertedContentRange, "bytes=100-199", "bytes 200-100/10000", 100..<200)
        ]
        for (fault, range, contentRange, body) in cases {
            let server = try server([FaultRule(fault)])
            let response = try ranged(server, range)
            XCTAssertEqual(response.status, 206, "\(fault)")
            XCTAssertEqual(response.header("content-range"), contentRange, "\(fault)")
            XCTAssertEqual(response.body, file.bytes(in: body), "\(fault)")
            server.stop()
        }
    }

    func testNthRequestCountsEveryMethodOnThePath() throws {
        let server = try server([FaultRule(.status(503, retryAfter: nil), when: .nthRequest(2))])
        XCTAssertEqual(try fetch(server, "/f.bin", method: "HEAD").status, 200)
        XCTAssertEqual(try fetch(server, "/other", method: "HEAD").status, 404, "another path counts apart")
        XCTAssertEqual(try fetch(server, "/f.bin").status, 503)
        XCTAssertEqual(try fetch(server, "/f.bin").status, 200)
        server.setFaults([FaultRule(.ignoreRange, when: .fromRequest(2))])
        XCTAssertEqual(try ranged(server).status, 206, "setFaults restarts the count")
        XCTAssertEqual(try ranged(server).status, 200)
        XCTAssertEqual(try ranged(server).status, 200)
    }

    func testProbabilityIsDeterministic() throws {
        let server = try server([])
        func pattern() throws -> [Int] {
            server.setFaults([FaultRule(.status(503, retryAfter: nil), when: .probability(0.5, seed: 3))])
            return try (0..<20).map { _ in try fetch(server, "/f.bin", method: "HEAD").status }
        }
        let first = try pattern()
        XCTAssertEqual(try pattern(), first)
        let faulted = first.filter { $0 == 503 }.count
        XCTAssertTrue((3...17).contains(faulted), "\(first)")
        server.setFaults([FaultRule(.status(503, retryAfter: nil), when: .probability(0.5, seed: 4))])
        let other = try (0..<20).map { _ in try fetch(server, "/f.bin", method: "HEAD").status }
        XCTAssertNotEqual(other, first, "another seed, another pattern")
    }

    func testRangeStartTriggerAndFirstMatchingRuleWins() throws {
        let server = try server([
            FaultRule(.cutAfter(1), when: .rangeStart(5000)),
            FaultRule(.wrongContentRangeTotal(1), when: .rangeStart(5000)),
            FaultRule(.gzipEncoding, when: .method("GET"))
        ])
        let cut = try ranged(server, "bytes=5000-5999")
        XCTAssertEqual(cut.body.count, 1)
        XCTAssertNil(cut.header("content-encoding"))
        let other = try ranged(server, "bytes=0-999")
        XCTAssertEqual(other.body.count, 1000)
        XCTAssertEqual(other.header("content-encoding"), "gzip")
        XCTAssertEqual(other.body, file.bytes(in: 0..<1000), "gzip only labels the body")
    }

    func testHeadFaults() throws {
        let server = try server([FaultRule(.headStatus(405))])
        let head = try fetch(server, "/f.bin", method: "HEAD")
        XCTAssertEqual(head.status, 405)
        XCTAssertEqual(head.header("allow"), "GET")
        XCTAssertEqual(try ranged(server).status, 206, "GET is unaffected")

        server.setFaults([FaultRule(.headNoLength)])
        let noLength = try fetch(server, "/f.bin", method: "HEAD")
        XCTAssertEqual(noLength.status, 200)
        XCTAssertNil(noLength.header("content-length"))
        XCTAssertEqual(try fetch(server, "/f.bin").header("content-length"), "10000")

        server.setFaults([FaultRule(.headHang, when: .method("HEAD"))])
        XCTAssertThrowsError(try fetch(server, "/f.bin", method: "HEAD", timeout: 0.3)) { error in
            guard case TestClientError.timedOutBeforeHead = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(try fetch(server, "/f.bin").status, 200)
    }

    func testAcceptRangesFaults() throws {
        let server = try server([FaultRule(.noAcceptRanges)])
        let absent = try ranged(server)
        XCTAssertNil(absent.header("accept-ranges"))
        XCTAssertEqual(absent.status, 206)
        server.setFaults([FaultRule(.acceptRangesNone)])
        let none = try ranged(server)
        XCTAssertEqual(none.header("accept-ranges"), "none")
        XCTAssertEqual(none.status, 200)
        XCTAssertEqual(none.body.count, 10_000)
    }

    func testMultipart() throws {
        let server = try server([FaultRule(.multipart)])
        let response = try ranged(server)
        XCTAssertEqual(response.status, 206)
        let contentType = try XCTUnwrap(response.header("content-type"))
        XCTAssertTrue(contentType.hasPrefix("multipart/byteranges; boundary="))
        XCTAssertNil(response.header("content-range"))
        let boundary = contentType.components(separatedBy: "boundary=")[1]
        let head = Array(
            "--\(boundary)\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes 100-199/10000\r\n\r\n".utf8
        )
        let tail = Array("\r\n--\(boundary)--\r\n".utf8)
        XCTAssertEqual(response.body, head + file.bytes(in: 100..<200) + tail)
        XCTAssertEqual(response.header("content-length"), String(response.body.count))
    }

    func testChunkedWithoutLength() throws {
        let server = try server([FaultRule(.chunkedNoLength)])
        let response = try ranged(server)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("transfer-encoding"), "chunked")
        XCTAssertNil(response.header("content-length"))
        XCTAssertEqual(response.body, file.bytes(in: 0..<10_000))
    }

    func testChangeContentReplacesTheResourceForGood() throws {
        let server = try server([FaultRule(.changeContent, when: .nthRequest(2))])
        let first = try fetch(server, "/f.bin")
        let second = try fetch(server, "/f.bin")
        let third = try fetch(server, "/f.bin")
        XCTAssertEqual(second.body.count, 10_000)
        XCTAssertNotEqual(second.body, first.body)
        XCTAssertNotEqual(second.header("etag"), first.header("etag"))
        XCTAssertNotEqual(second.header("last-modified"), first.header("last-modified"))
        XCTAssertEqual(third.header("etag"), second.header("etag"))
        XCTAssertEqual(third.body, second.body)
        XCTAssertEqual(server.resource(at: "/f.bin")?.etag, second.header("etag"))
        let stale = try fetch(server, "/f.bin", headers: ["Range": "bytes=0-9", "If-Range": first.header("etag")!])
        XCTAssertEqual(stale.status, 200)
    }

    func testChangeSize() throws {
        let server = try server([FaultRule(.changeSize(500), when: .nthRequest(1))])
        let response = try fetch(server, "/f.bin", headers: ["Range": "bytes=0-"])
        XCTAssertEqual(response.header("content-range"), "bytes 0-499/500")
        XCTAssertEqual(response.body, file.bytes(in: 0..<500))
        XCTAssertEqual(try fetch(server, "/f.bin").body.count, 500)
    }

    func testWeakETagDefeatsIfRange() throws {
        let server = try server([FaultRule(.weakETag)])
        let strong = try XCTUnwrap(server.resource(at: "f.bin")?.etag)
        let response = try fetch(server, "/f.bin", headers: ["Range": "bytes=0-9", "If-Range": strong])
        XCTAssertEqual(response.header("etag"), "W/" + strong)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(try ranged(server).status, 206, "without If-Range the range is honoured")
    }

    func testRedirects() throws {
        let server = try server([
            FaultRule(.redirect(to: "/f.bin"), when: .method("GET")),
            FaultRule(.redirect(to: "http://127.0.0.1:1/x", status: 307))
        ])
        let relative = try fetch(server, "/old")
        XCTAssertEqual(relative.status, 302)
        XCTAssertEqual(relative.header("location"), "/f.bin")
        let absolute = try fetch(server, "/old", method: "HEAD")
        XCTAssertEqual(absolute.status, 307)
        XCTAssertEqual(absolute.header("location"), "http://127.0.0.1:1/x")
    }

    func testFaultsParsedFromSpecsWork() throws {
        let server = try server([
            try FaultRule(parsing: "cut:10@request=1"), try FaultRule(parsing: "status:429:1@from=2")
        ])
        XCTAssertEqual(try fetch(server, "/f.bin").body.count, 10)
        let limited = try fetch(server, "/f.bin")
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.header("retry-after"), "1")
        XCTAssertEqual(server.statistics.requests.map(\.fault), ["cut:10", "status:429:1"])
    }
}
