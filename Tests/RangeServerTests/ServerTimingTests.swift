import Foundation
import RangeServer
import XCTest

/// Rate limits, latency and shutdown. A machine under load only slows
/// things down, so a time is asserted only as a lower bound (a cap holds, a
/// latency is slept), and "this setting no longer applies" is shown by a
/// contrast load cannot blur: what the old setting would take (a minute) against a
/// bounded wait far below it.
final class ServerTimingTests: XCTestCase {
    func testRateLimitIsRoughlyHonouredAcrossAConnection() throws {
        let file = Resource.generated(size: 256 << 10, seed: 3)
        let server = try startServer(["f.bin": file], configuration: .init(ratePerConnection: 1 << 20), on: self)
        let connection = try TestConnection(port: server.port)
        let started = Date()
        // Two requests on one connection share one bucket: 512 KiB at 1 MiB/s.
        for _ in 0..<2 {
            connection.sendRequest("GET", "/f.bin")
            XCTAssertEqual(try connection.readResponse().body.count, 256 << 10)
        }
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 0.35)

        // At 4 KiB/s the file would take a minute; lifted, it comes within the fetch's bound.
        server.setRatePerConnection(4 << 10)
        server.setRatePerConnection(nil)
        let liftedAt = Date()
        let lifted = try fetch(server, "/f.bin", timeout: 20)
        XCTAssertEqual(lifted.body.count, 256 << 10)
        XCTAssertEqual(lifted.ending, .complete)
        XCTAssertLessThan(Date().timeIntervalSince(liftedAt), 20, "the old rate (a minute) no longer applies")
    }

    func testTotalRateCapsOneConnection() throws {
        let rate = 2 << 20
        let server = try startServer(
            ["f.bin": .generated(size: 64 << 20, seed: 3)], configuration: .init(totalRate: rate), on: self)
        let seconds = 0.8
        let received = try receiveConcurrently(from: server, "/f.bin", connections: 1, for: seconds)
        let share = Double(received[0]) / (Double(rate) * seconds)
        XCTAssertGreaterThan(share, 0.6)
        XCTAssertLessThan(share, 1.4)

        // At 64 KiB/s the 4 MiB would take a minute; lifted, they come within the fetch's bound.
        server.setTotalRate(64 << 10)
        server.setTotalRate(nil)
        server.setResource(.generated(size: 4 << 20, seed: 3), at: "g.bin")
        let liftedAt = Date()
        let lifted = try fetch(server, "/g.bin", timeout: 20)
        XCTAssertEqual(lifted.body.count, 4 << 20)
        XCTAssertEqual(lifted.ending, .complete)
        XCTAssertLessThan(Date().timeIntervalSince(liftedAt), 20, "the old rate (a minute) no longer applies")
    }

    func testTotalRateIsSharedFairlyByFourConnections() throws {
        let rate = 2 << 20
        let server = try startServer(
            ["f.bin": .generated(size: 64 << 20, seed: 3)], configuration: .init(totalRate: rate), on: self)
        let seconds = 1.0
        let received = try receiveConcurrently(from: server, "/f.bin", connections: 4, for: seconds)
        let shares = received.map { Double($0) / (Double(rate) * seconds) }
        // About R in total, not 4R; each about R/4, none starved.
        XCTAssertGreaterThan(shares.reduce(0, +), 0.6)
        XCTAssertLessThan(shares.reduce(0, +), 1.4)
        for share in shares { XCTAssertGreaterThan(share, 1.0 / 8) }
    }

    func testTheSmallerOfBothRatesBinds() throws {
        let server = try startServer(
            ["f.bin": .generated(size: 64 << 20, seed: 3)],
            configuration: .init(ratePerConnection: 512 << 10, totalRate: 4 << 20), on: self)
        let seconds = 0.6
        // The connection cap binds: two connections get 2 x 512 KiB/s, not 4 MiB/s.
        let perConnection = try receiveConcurrently(from: server, "/f.bin", connections: 2, for: seconds)
            .map { Double($0) / (Double(512 << 10) * seconds) }
        for share in perConnection {
            XCTAssertGreaterThan(share, 0.6)
            XCTAssertLessThan(share, 1.4)
        }

        // The total cap binds: two connections get 1 MiB/s together, not 2 x 4 MiB/s.
        server.setRatePerConnection(4 << 20)
        server.setTotalRate(1 << 20)
        let total = try receiveConcurrently(from: server, "/f.bin", connections: 2, for: seconds)
            .map { Double($0) / (Double(1 << 20) * seconds) }
        XCTAssertGreaterThan(total.reduce(0, +), 0.6)
        XCTAssertLessThan(total.reduce(0, +), 1.4)
        for share in total { XCTAssertGreaterThan(share, 0.25) }
    }

    /// Bursts, as nginx's `limit_rate` paces by default: at 1 MiB/s in
    /// 512 KiB bursts, a reader gets a whole burst, then nothing for the
    /// pause the rate asks for (0.5 s less the bucket's 20 ms of credit),
    /// then the next burst, on a connection's bucket and on the shared
    /// uplink alike. Only lower bounds on time: a pause is a bounded wait
    /// that sees no byte, and "at once" means the whole burst came before it
    /// (smooth pacing never leaves a reader 0.3 s without data at this rate).
    func testABurstComesWholeAndThePauseAfterItIsWhatTheRateAsks() throws {
        let burst = 512 << 10
        let file = Resource.generated(size: 2 << 20, seed: 4)
        let server = try startServer(
            ["f.bin": file], configuration: .init(ratePerConnection: 1 << 20, burst: burst), on: self)
        try assertBursts(of: burst, from: server, file, "per connection")

        server.setRatePerConnection(nil)
        server.setTotalRate(1 << 20)
        try assertBursts(of: burst, from: server, file, "shared uplink")

        // Without a burst size the pacing is smooth again: the first 512 KiB
        // take the 0.5 s the rate asks for, where a 2 MiB burst still in
        // force would bring them at once.
        server.setBurst(2 << 20)
        server.setBurst(nil)
        server.setTotalRate(nil)
        server.setRatePerConnection(1 << 20)
        let smooth = try TestConnection(port: server.port, timeout: 10)
        let started = Date()
        smooth.sendRequest("GET", "/f.bin", headers: ["Range": "bytes=0-524287"], close: true)
        XCTAssertEqual(try smooth.readResponse().body, file.bytes(in: 0..<(512 << 10)))
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 0.4)
    }

    /// Reads `file` from `server` on a new connection and checks it comes in
    /// bursts of `burst` bytes, each followed by at least 0.3 s without data.
    private func assertBursts(
        of burst: Int, from server: RangeServer, _ file: Resource, _ label: String,
        line: UInt = #line
    ) throws {
        let connection = try TestConnection(port: server.port, timeout: 10)
        let started = Date()
        connection.sendRequest("GET", "/f.bin")
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        /// One recv; nil when nothing came within the socket's timeout.
        func receive() -> Int? {
            let count = chunk.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
            if count > 0 { received += chunk[0..<count] }
            return count > 0 ? count : (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? nil : 0)
        }
        let terminator: [UInt8] = [13, 10, 13, 10]
        while received.firstRange(of: terminator) == nil {
            guard receive() ?? 0 > 0 else { return XCTFail("\(label): no head", line: line) }
        }
        let headLength = received.firstRange(of: terminator)!.upperBound
        let bursts = Int(file.size) / burst
        for index in 1...bursts {
            // A bounded wait for the whole burst (10 s per recv).
            while received.count - headLength < index * burst {
                guard receive() ?? 0 > 0 else { return XCTFail("\(label): burst \(index) did not come", line: line) }
            }
            XCTAssertEqual(
                received.count - headLength, index * burst, "\(label): burst \(index) ends alone", line: line)
            guard index < bursts else { break }
            connection.setTimeout(0.3)
            XCTAssertNil(receive(), "\(label): after burst \(index), a pause of at least 0.3 s", line: line)
            connection.setTimeout(10)
        }
        XCTAssertEqual(Array(received[headLength...]), file.bytes(in: 0..<file.size), label, line: line)
        // Three pauses of 0.48 s at least (the first burst does not wait).
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 1.4, label, line: line)
    }

    func testLatencyComesBeforeEveryResponse() throws {
        let server = try startServer(["f.bin": .data([1, 2, 3])], configuration: .init(latency: 0.15), on: self)
        let connection = try TestConnection(port: server.port)
        let started = Date()
        for _ in 0..<2 {
            connection.sendRequest("HEAD", "/f.bin")
            XCTAssertEqual(try connection.readResponse(bodyless: true).status, 200)
        }
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 0.29)
        // A minute's latency, then none: the next response comes within the fetch's bound.
        server.setLatency(60)
        server.setLatency(0)
        XCTAssertEqual(try fetch(server, "/f.bin", timeout: 20).body, [1, 2, 3])
    }

    /// A delay fault holds only the requests it matches, on top of the latency.
    func testDelayHoldsTheHeadOfTheRequestsItMatches() throws {
        let server = try startServer(["f.bin": .data([1, 2, 3])], configuration: .init(latency: 0.05), on: self)
        server.setFaults([FaultRule(.delay(milliseconds: 200), when: .rangeStart(1))])
        let started = Date()
        XCTAssertEqual(try fetch(server, "/f.bin", headers: ["Range": "bytes=1-"]).body, [2, 3])
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 0.24, "the delay and the latency")
        XCTAssertEqual(try fetch(server, "/f.bin", headers: ["Range": "bytes=0-"]).body, [1, 2, 3])
        XCTAssertEqual(server.statistics.requests.map(\.fault), ["delay:200", nil], "another range is not held")
    }

    /// Without stop, each of these connections would stay open for good (a
    /// hang, a blocked send, a body at 1 KB/s): stop() returning and every one
    /// of them closing within a bounded wait is the promptness shown.
    func testStopEndsSleepingHangingAndBlockedConnectionsPromptly() throws {
        let server = try startServer(
            ["f.bin": .generated(size: 1 << 20), "big.bin": .generated(size: 64 << 20)],
            configuration: .init(faults: [FaultRule(.headHang)]), on: self)
        // Never reads: the server blocks in send() once the socket buffers fill.
        let blocked = try TestConnection(port: server.port)
        blocked.sendRequest("GET", "/big.bin")
        let hanging = try TestConnection(port: server.port)
        hanging.sendRequest("HEAD", "/f.bin")
        XCTAssertTrue(waitFor { server.statistics.bodyBytesSent > 0 }, "the blocked connection is sending")
        server.setRatePerConnection(1000)
        let slow = try TestConnection(port: server.port)
        slow.sendRequest("GET", "/f.bin")
        XCTAssertTrue(waitFor { server.statistics.connectionsAccepted == 3 }, "the slow connection is accepted")
        server.stop()
        XCTAssertTrue(slow.closesWithin(10))
        XCTAssertTrue(hanging.closesWithin(10))
        XCTAssertLessThan(server.statistics.bodyBytesSent, 64 << 20)
    }

    func testDeinitStopsTheServer() throws {
        var port: UInt16 = 0
        do {
            let server = RangeServer()
            try server.start()
            port = server.port
            let connection = try TestConnection(port: port)
            connection.sendRequest("GET", "/missing")
            XCTAssertEqual(try connection.readResponse().status, 404)
        }
        XCTAssertThrowsError(try TestConnection(port: port))
    }
}

/// Polls `condition` until it holds (true) or `timeout` seconds pass (false).
func waitFor(timeout: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        guard Date() < deadline else { return false }
        usleep(5_000)
    }
    return true
}
