import Foundation
import RangeServer
import XCTest

/// Issue 41's server modes: the connection limit (503 beyond K requests in
/// progress), expiring signed URLs (403 without a valid token) and rate
/// limits that change a set time after the first request. As in
/// ServerTimingTests, a time is asserted only in the direction load cannot
/// blur: a cap that holds is an upper bound on bytes, a lifted cap a bounded
/// wait far below what the old cap would take.
final class ServerLimitTests: XCTestCase {
    private let file = Resource.generated(size: 10_000, seed: 4)

    /// Waits (up to five seconds) until `condition` holds.
    private func waitUntil(_ condition: () -> Bool, file: StaticString = #filePath, line: UInt = #line) {
        let deadline = Date().addingTimeInterval(5)
        while !condition() && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        XCTAssertTrue(condition(), "condition not met within 5 s", file: file, line: line)
    }

    // MARK: Connection limit

    func testARequestBeyondTheLimitGets503AndTheConnectionCloses() throws {
        // The first request stalls after 10 bytes: it stays in progress until its client closes.
        let server = try startServer(
            ["f.bin": file],
            configuration: .init(faults: [FaultRule(.stallAfter(10), when: .nthRequest(1))], connectionLimit: 1),
            on: self)
        let held = try TestConnection(port: server.port)
        held.sendRequest("GET", "/f.bin")
        waitUntil { server.statistics.requests.count == 1 }

        let refused = try TestConnection(port: server.port)
        refused.sendRequest("GET", "/f.bin")
        let response = try refused.readResponse()
        XCTAssertEqual(response.status, 503)
        XCTAssertEqual(response.header("retry-after"), "1")
        XCTAssertEqual(response.header("content-length"), "0")
        XCTAssertEqual(response.header("connection"), "close")
        XCTAssertTrue(refused.closesWithin(5))
        XCTAssertEqual(server.statistics.refusedOverLimit, 1)
        XCTAssertEqual(server.statistics.requests.last?.status, 503)

        // Once the stalled request's client is gone, its place is free again.
        withExtendedLifetime(held) {}
        close(held.fd)
        var answered = 0
        waitUntil {
            answered = (try? fetch(server, "/f.bin").status) ?? 0
            return answered != 503
        }
        XCTAssertEqual(answered, 200)
        XCTAssertEqual(server.statistics.refusedOverLimit, server.statistics.requests.filter { $0.status == 503 }.count)
    }

    func testAnIdleKeepAliveConnectionTakesNoPlace() throws {
        let server = try startServer(["f.bin": file], configuration: .init(connectionLimit: 1), on: self)
        let idle = try TestConnection(port: server.port)
        idle.sendRequest("GET", "/f.bin")
        XCTAssertEqual(try idle.readResponse().status, 200)
        // The first connection stays open with no request in progress, as
        // nginx's limit_conn counts (its place comes back a moment after the
        // client has read the last byte).
        waitUntil { server.requestsInProgress == 0 }
        XCTAssertEqual(try fetch(server, "/f.bin").status, 200)
        idle.sendRequest("GET", "/f.bin")
        XCTAssertEqual(try idle.readResponse().body, file.bytes(in: 0..<10_000))
        XCTAssertEqual(server.statistics.refusedOverLimit, 0)
    }

    func testTheLimitCanBeLifted() throws {
        let server = try startServer(
            ["f.bin": file],
            configuration: .init(faults: [FaultRule(.stallAfter(10), when: .nthRequest(1))], connectionLimit: 1),
            on: self)
        let held = try TestConnection(port: server.port)
        held.sendRequest("GET", "/f.bin")
        waitUntil { server.statistics.requests.count == 1 }
        XCTAssertEqual(try fetch(server, "/f.bin").status, 503)
        server.setConnectionLimit(nil)
        XCTAssertEqual(try fetch(server, "/f.bin").status, 200)
        withExtendedLifetime(held) {}
    }

    // MARK: Expiring signed URLs

    /// The path and query of the signed URL a `/sign/NAME` response carries.
    private func signedTarget(_ server: RangeServer, _ name: String) throws -> String {
        let response = try fetch(server, "/sign/" + name)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("content-type"), "text/plain; charset=utf-8")
        let url = String(decoding: response.body, as: UTF8.self)
        XCTAssertTrue(url.hasSuffix("\n"))
        let prefix = "http://127.0.0.1:\(server.port)"
        XCTAssertTrue(url.hasPrefix(prefix + "/" + name + "?token="), url)
        return String(url.dropFirst(prefix.count).dropLast())
    }

    func testASignedURLServesTheFileAndAPlainOneGets403() throws {
        let server = try startServer(
            ["f.bin": file, "g.bin": .generated(size: 100, seed: 5)], configuration: .init(urlLifetime: 60), on: self)
        let plain = try TestConnection(port: server.port)
        plain.sendRequest("GET", "/f.bin")
        let forbidden = try plain.readResponse()
        XCTAssertEqual(forbidden.status, 403)
        XCTAssertEqual(forbidden.header("content-length"), "0")
        XCTAssertTrue(forbidden.body.isEmpty)
        // The connection stays open after a 403.
        plain.sendRequest("HEAD", "/f.bin?token=0123")
        XCTAssertEqual(try plain.readResponse(bodyless: true).status, 403)

        let target = try signedTarget(server, "f.bin")
        let response = try fetch(server, target, headers: ["Range": "bytes=100-199"])
        XCTAssertEqual(response.status, 206)
        XCTAssertEqual(response.body, file.bytes(in: 100..<200))
        XCTAssertEqual(try fetch(server, target, method: "HEAD").header("content-length"), "10000")

        // A token is for its own path only.
        let token = target.split(separator: "?")[1]
        XCTAssertEqual(try fetch(server, "/g.bin?" + token).status, 403)
        XCTAssertEqual(try fetch(server, "/sign/missing.bin").status, 404)

        let statistics = server.statistics
        XCTAssertEqual(statistics.urlsSigned, 1)
        XCTAssertEqual(statistics.refusedForToken, 3)
        XCTAssertEqual(statistics.requests(to: "/sign/f.bin").count, 1)
    }

    func testASignedURLExpiresButARequestAdmittedBeforeFinishes() throws {
        // 768 KiB at 512 KiB/s: the body outlasts the token's second.
        let large = Resource.generated(size: 768 << 10, seed: 6)
        let server = try startServer(
            ["l.bin": large], configuration: .init(ratePerConnection: 512 << 10, urlLifetime: 1), on: self)
        let target = try signedTarget(server, "l.bin")
        let response = try fetch(server, target, timeout: 20)
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.ending, .complete)
        XCTAssertEqual(response.body, large.bytes(in: 0..<(768 << 10)))
        // The token expired during the body: the same URL is now refused.
        XCTAssertEqual(try fetch(server, target, method: "HEAD").status, 403)
        XCTAssertEqual(server.statistics.refusedForToken, 1)
        // A fresh one works again.
        XCTAssertEqual(try fetch(server, try signedTarget(server, "l.bin"), method: "HEAD").status, 200)
        XCTAssertEqual(server.statistics.urlsSigned, 2)
    }

    // MARK: Rate change

    func testTheRateChangeClockStartsAtTheFirstRequest() throws {
        let server = try startServer(
            ["f.bin": .generated(size: 64 << 20, seed: 3), "g.bin": .generated(size: 4 << 20, seed: 3)],
            configuration: .init(ratePerConnection: 64 << 10, rateChange: RateChange(after: 1)), on: self)
        // Longer than the delay, but no request yet: the old cap still holds.
        Thread.sleep(forTimeInterval: 1.2)
        XCTAssertNil(server.statistics.firstRequestAt)
        let received = try receiveConcurrently(from: server, "/f.bin", connections: 1, for: 0.5)
        XCTAssertNotNil(server.statistics.firstRequestAt)
        XCTAssertLessThan(received[0], Int(1.4 * Double(64 << 10) * 0.5) + 4096)

        // At 64 KiB/s the 4 MiB would take a minute; lifted a second after the first request, they come within the bound.
        let lifted = try fetch(server, "/g.bin", timeout: 20)
        XCTAssertEqual(lifted.body.count, 4 << 20)
        XCTAssertEqual(lifted.ending, .complete)
    }

    func testARateChangeCanImposeATotalCap() throws {
        let server = try startServer(
            ["f.bin": .generated(size: 64 << 20, seed: 3)],
            configuration: .init(rateChange: RateChange(after: 0.2, totalRate: 64 << 10)), on: self)
        XCTAssertEqual(try fetch(server, "/f.bin", method: "HEAD").status, 200)
        Thread.sleep(forTimeInterval: 0.4)
        let received = try receiveConcurrently(from: server, "/f.bin", connections: 2, for: 0.5)
        XCTAssertLessThan(received.reduce(0, +), Int(1.4 * Double(64 << 10) * 0.5) + 8192)
    }
}
