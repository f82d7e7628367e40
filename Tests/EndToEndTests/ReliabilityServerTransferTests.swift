// RELIABILITY.md cases 9-13: servers that misbehave during the transfer:
// error pages on the extra connections (Retry-After), a cut, short or reset
// body, a stall, a multipart/byteranges answer, a chunked response without
// length. Cases 1-4 and the way the faults are injected are described in
// ReliabilityServerTests.swift; the shared helpers are in
// ReliabilityServerSupport.swift.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class ReliabilityServerTransferTests: EndToEndTestCase {
    // MARK: 9. Error pages on the extra connections

    /// 503 (Retry-After 1), 429 and 403 with HTML bodies on three of four
    /// connections: no HTML written, fewer connections after. The 503's
    /// Retry-After is honoured by never sending the refused connection
    /// again: its piece goes to a connection the server took (a Retry-After
    /// on the only connection is waited out: the test below, and
    /// RetryPolicyTests).
    func test09ErrorPagesAreNotWrittenAndConnectionsDrop() throws {
        // Large enough that, without the drop, all four connections would run
        // again once Retry-After passed (a 2 MiB file ended before that).
        let resource = Resource.generated(size: 16 << 20, seed: 130)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        server.setFaults([
            FaultRule(.status(503, retryAfter: 1), when: .nthRequest(3)),
            FaultRule(.status(429, retryAfter: nil), when: .nthRequest(4)),
            FaultRule(.status(403, retryAfter: nil), when: .nthRequest(5))
        ])
        let probe = DiskProbe(resource: resource)
        let output = path("f")
        let run = runLibrary([server.url("f")], to: output, probe: probe) {
            $0.connections = 4
            $0.minimumSplit = 256 << 10
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [], "an error page reached the file")
        let retries = run.retries
        for case let .retry(connection, _, _, _, _, _) in run.events {
            XCTAssertGreaterThanOrEqual(connection, 0, "a retry names the connection whose transfer failed")
        }
        let serviceUnavailable = retries.first { $0.reason.contains("503") }
        XCTAssertNotNil(serviceUnavailable, "\(retries)")
        XCTAssertEqual(serviceUnavailable?.delay, 0, "its piece goes to the connections the server took")
        // After the first 429/503, fewer connections run at once.
        guard
            let firstOverload = run.events.firstIndex(where: { event in
                if case let .retry(_, _, reason, _, _, _) = event {
                    return reason.contains("503") || reason.contains("429")
                }
                return false
            })
        else { return XCTFail("no 429/503 retry") }
        // The run's last progress event is its closing report (0 connections
        // active): only the samples while it still ran count.
        let later = run.events[(firstOverload + 1)...].compactMap { event -> Int? in
            if case let .progress(progress) = event { return progress.activeConnections }
            return nil
        }.dropLast()
        XCTAssertTrue(later.contains { $0 > 0 }, "progress went on after the overload, with transfers running")
        XCTAssertLessThan(later.max() ?? .max, 4, "connections to the host were reduced")
    }

    /// Retry-After may also be an HTTP date (RFC 9110 10.2.3): honoured too.
    func test09RetryAfterAsAnHTTPDateIsHonoured() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 131)
        let count = Mutex(0)
        let origin = try scriptedServer { request in
            guard request.method == "GET", request.headers["range"] != "bytes=0-0" else {
                return .serving(resource, request)
            }
            let number = count.withLock { value -> Int in
                value += 1
                return value
            }
            guard number == 1 else { return .serving(resource, request) }
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let when = formatter.string(from: Date().addingTimeInterval(3))
            let page = Array("<html><body>busy</body></html>".utf8)
            return ScriptedResponse(
                head: [
                    "HTTP/1.1 503 Service Unavailable", "Retry-After: \(when)",
                    "Content-Type: text/html", "Content-Length: \(page.count)",
                    "Connection: close"
                ].joined(separator: "\r\n"), body: page)
        }
        let probe = DiskProbe(resource: resource)
        // One connection after a HEAD: the refusal comes with nothing else of
        // the mirror running, so it is an overload to wait out, not a
        // connection beyond the server's limit (never sent again at once).
        let run = runLibrary([origin.url("f")], to: path("f"), probe: probe) {
            $0.connections = 1
            $0.probeWithHead = true
        }
        XCTAssertNil(run.error)
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [])
        let busy = run.retries.first { $0.reason.contains("503") }
        XCTAssertNotNil(busy, "\(run.retries)")
        XCTAssertGreaterThanOrEqual(
            busy?.delay ?? 0, 1.0, "Retry-After: <date about 3 s ahead> honoured: \(run.retries)")
    }

    // MARK: 10. Connection cut, short body, reset

    /// A body cut after 300,000 bytes: those are kept, and only the rest is
    /// asked for again, after the classic probe and when the cut hits the
    /// opening request (the default first GET, which doubles as the probe).
    func test10CutBodyKeepsWhatArrivedAndRequestsOnlyTheRest() throws {
        let size: Int64 = 2 << 20
        let cases: [(arguments: [String], request: Int, ranges: [String])] = [
            (["--use-head"], 2, ["bytes=0-2097151", "bytes=300000-2097151"]),
            ([], 1, ["bytes=0-1048575", "bytes=300000-1048575", "bytes=1048576-2097151"])
        ]
        for (index, probeCase) in cases.enumerated() {
            let resource = Resource.generated(size: size, seed: 131 + 1000 * UInt64(index))
            server.setResource(resource, at: "f\(index)")
            server.resetStatistics()
            server.setFaults([FaultRule(.cutAfter(300_000), when: .nthRequest(probeCase.request))])
            let output = path("f\(index)")
            let run = try CLI.run(
                ["-q", "-n", "1", "--retry-wait", "0.02"] + probeCase.arguments
                    + ["-o", output, server.url("f\(index)")], in: directory)
            XCTAssertEqual(run.status, 0, "\(probeCase.arguments): \(run.stderr)")
            assertSameBytes(output, resource)
            XCTAssertEqual(rangedGETs.map(\.rangeHeader), probeCase.ranges)
            XCTAssertEqual(server.statistics.bodyBytesSent, size, "\(probeCase.arguments): no byte fetched twice")
        }
    }

    /// Random cuts on half the responses: still byte-identical; over one
    /// connection (no work stealing) every byte that arrived is kept, so each
    /// byte is sent exactly once however often the connection is cut.
    func test10RandomCutsStillGiveTheRightBytes() throws {
        let size: Int64 = 8 << 20
        let resource = Resource.generated(size: size, seed: 132)
        server.setResource(resource, at: "f")
        server.setFaults(
            [2, 3, 5].map { FaultRule(.cutAtRandom(seed: 7), when: .nthRequest($0)) }
                + [FaultRule(.cutAtRandom(seed: 7), when: .probability(0.5, seed: 3))])
        let output = path("f")
        let run = try CLI.run(
            [
                "-q", "-n", "1", "--retries", "20", "--retry-wait", "0.01",
                "-o", output, server.url("f")
            ], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertGreaterThan(server.statistics.requests.filter { $0.fault != nil }.count, 2)
        XCTAssertEqual(server.statistics.bodyBytesSent, size, "bytes of cut responses were kept")
    }

    /// A connection reset (RST) mid-body: retried, byte-identical.
    func test10ConnectionResetIsRetried() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 133)
        let count = Mutex(0)
        let origin = try scriptedServer { request in
            var response = ScriptedResponse.serving(resource, request)
            guard request.method == "GET", request.headers["range"] != "bytes=0-0" else { return response }
            if count.withLock({ value -> Bool in
                value += 1
                return value == 1
            }) {
                response.resetAfter = 200_000
            }
            return response
        }
        let output = path("f")
        let run = try CLI.run(["-q", "-n", "1", "--retry-wait", "0.02", "-o", output, origin.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertGreaterThanOrEqual(count.withLock { $0 }, 2, "the reset transfer was retried")
    }

    /// Every GET cut at once: a bounded number of attempts, then exit 1 with a clear message.
    func test10RetryLimitEndsAHopelessDownload() throws {
        server.setResource(Resource.generated(size: 1 << 20, seed: 134), at: "f")
        server.setFaults([FaultRule(.cutAfter(0), when: .fromRequest(2))])
        let started = Date()
        let run = try CLI.run(
            [
                "-q", "-n", "2", "--min-split", "256K", "--retries", "3", "--retry-wait", "0.01",
                "-o", path("f"), server.url("f")
            ], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("giving up"), run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        let gets = server.statistics.requests.filter { $0.method == "GET" }.count
        XCTAssertGreaterThanOrEqual(gets, 4, "retried up to the limit")
        XCTAssertLessThanOrEqual(gets, 2 * 4 + 2, "no more than (retries + 1) per piece")
        XCTAssertLessThan(Date().timeIntervalSince(started), 20)
    }

    /// Backoff doubles from --retry-wait and stops at the cap.
    func test10BackoffIsExponentialAndCapped() throws {
        server.setResource(Resource.generated(size: 256 << 10, seed: 135), at: "f")
        server.setFaults([FaultRule(.cutAfter(0), when: .fromRequest(2))])
        let run = runLibrary([server.url("f")], to: path("f")) { (options: inout DownloadOptions) in
            options.connections = 1
            options.probeWithHead = true // the cuts start at the first GET
            options.retries = 6
            options.retryWait = 0.02
            options.retryWaitLimit = 0.1
        }
        // Every attempt was cut: the connection, not an answer, failed last.
        guard case .network(_, _, .connectionLost)? = run.error else {
            return XCTFail("expected a lost connection, got \(String(describing: run.error))")
        }
        let delays = run.retries.map(\.delay)
        XCTAssertEqual(delays.count, 6, "\(delays)")
        let expected = [0.02, 0.04, 0.08, 0.1, 0.1, 0.1]
        for (delay, want) in zip(delays, expected) { XCTAssertEqual(delay, want, accuracy: 1e-9, "\(delays)") }
    }

    // MARK: 11. Stall

    /// One connection stalls after 100,000 bytes: detected within seconds, and
    /// the rest of its range is fetched again from where it stopped; after the
    /// classic probe and when the stalled answer is the opening request's.
    func test11StallIsDetectedWithinSecondsAndTheRangeMovesOn() throws {
        let size: Int64 = 1 << 20
        let cases: [(arguments: [String], request: Int)] = [(["--use-head"], 2), ([], 1)]
        for (index, probeCase) in cases.enumerated() {
            let resource = Resource.generated(size: size, seed: 136 + 1000 * UInt64(index))
            server.setResource(resource, at: "f\(index)")
            server.resetStatistics()
            server.setFaults([FaultRule(.stallAfter(100_000), when: .nthRequest(probeCase.request))])
            let output = path("f\(index)")
            let started = Date()
            let run = try CLI.run(
                ["-q", "-n", "1", "--stall-timeout", "1", "--retry-wait", "0.02"] + probeCase.arguments
                    + ["-o", output, server.url("f\(index)")], in: directory, timeout: 30)
            XCTAssertEqual(run.status, 0, "\(probeCase.arguments): \(run.stderr)")
            XCTAssertLessThan(Date().timeIntervalSince(started), 10)
            assertSameBytes(output, resource)
            XCTAssertEqual(rangedGETs.map(\.rangeHeader), ["bytes=0-\(size - 1)", "bytes=100000-\(size - 1)"])
        }
    }

    /// With several connections, a stalled range is taken over by another
    /// connection long before the (60 s) stall timeout.
    func test11StalledRangeGoesToAnotherConnection() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 137)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        server.setFaults([FaultRule(.stallAfter(64 << 10), when: .nthRequest(3))])
        let started = Date()
        let run = runLibrary([server.url("f")], to: path("f")) {
            $0.connections = 4
            $0.minimumSplit = 128 << 10
            $0.transfer.stallTimeout = 60
        }
        XCTAssertNil(run.error)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
        assertSameBytes(path("f"), resource)
        let stalled = try XCTUnwrap(server.statistics.requests.first { $0.fault != nil })
        let stalledRange = try XCTUnwrap(requestedRange(stalled.rangeHeader))
        let takenOver = server.statistics.requests.contains { record in
            guard record.fault == nil, let range = requestedRange(record.rangeHeader) else { return false }
            return range.overlaps(stalledRange) && record.status == 206
        }
        XCTAssertTrue(takenOver, "another request fetched the stalled range")
    }

    // MARK: 12. multipart/byteranges

    func test12MultipartAnswerIsRejectedAndRetried() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 138)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.multipart, when: .nthRequest(3))])
        let probe = DiskProbe(resource: resource)
        let run = runLibrary([server.url("f")], to: path("f"), probe: probe) {
            $0.connections = 4
            $0.minimumSplit = 1 << 20
        }
        XCTAssertNil(run.error)
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [], "multipart framing reached the file")
        XCTAssertTrue(run.retries.contains { $0.reason.contains("multipart") }, "\(run.retries)")
    }

    func test12AlwaysMultipartFailsClearly() throws {
        server.setResource(Resource.generated(size: 1 << 20, seed: 139), at: "f")
        server.setFaults([FaultRule(.multipart, when: .fromRequest(2))])
        let output = path("f")
        let run = try CLI.run(
            [
                "-q", "--use-head", "-n", "2", "--min-split", "256K", "--retries", "2", "--retry-wait", "0.01",
                "-o", output, server.url("f")
            ], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("multipart"), run.stderr)
        let data = FileManager.default.contents(atPath: output + ".part") ?? Data()
        XCTAssertTrue(data.allSatisfy { $0 == 0 }, "no multipart byte reached the data file")
    }

    /// A multipart answer to the probe's `bytes=0-0` is no answer to one
    /// range, even with a Content-Range of the byte asked for: the download
    /// fails at the probe, as with any other multipart answer there. (It was
    /// taken for range support, and every piece then retried in vain.) Like
    /// any malformed answer, it may be one server's bad moment: the probe
    /// goes `--retries` more times first.
    func test12MultipartAnswerToTheProbeFailsAtTheProbe() throws {
        let resource = Resource.generated(size: 300_000, seed: 140)
        let origin = try scriptedServer { request in
            if request.method == "HEAD" {
                return ScriptedResponse(
                    head: "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close")
            }
            return .serving(resource, request, extraFields: ["Content-Type: multipart/byteranges; boundary=x"])
        }
        let output = path("f")
        let run = try CLI.run(
            ["-q", "--retries", "2", "--retry-wait", "0.01", "-o", output, origin.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(
            run.stderr.contains(
                "giving up after 3 attempts: multipart/byteranges answer to a single range "
                    + "in the probe"), run.stderr)
        let ranged = origin.requests.filter { $0.method == "GET" && $0.headers["range"] != nil }
        XCTAssertEqual(
            ranged.count, 4, "the opening request and the probe's three: \(ranged.map { $0.headers["range"] ?? "" })")
    }

    // MARK: 13. Chunked response without length

    func test13ChunkedWithoutLengthIsOneStream() throws {
        let resource = Resource.generated(size: (3 << 20) + 11, seed: 140)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.chunkedNoLength)])
        let output = path("f")
        let run = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertFalse(server.statistics.requests.contains { $0.status == 206 })
    }

    /// Killed mid-stream, a download of unknown length claims nothing: no
    /// manifest lists bytes, and the next run starts over and ends right.
    func test13ChunkedStreamMakesNoResumeClaims() throws {
        let resource = Resource.generated(size: 6 << 20, seed: 141)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.chunkedNoLength)])
        server.setRatePerConnection(2 << 20)
        let output = path("f")
        let child = try Child(executable: CLI.binary, arguments: ["-q", "-o", output, server.url("f")], in: directory)
        defer { child.kill9() }
        XCTAssertTrue(wait(timeout: 20) { fileSize(output + ".part") > 1 << 20 }, "the stream is under way")
        usleep(1_200_000) // past a checkpoint interval
        XCTAssertEqual(claimedBytes(output + ".part.json"), 0, "no resume claim for a stream of unknown length")
        child.kill9()
        XCTAssertEqual(claimedBytes(output + ".part.json"), 0)

        server.setRatePerConnection(nil)
        let run = try CLI.run(["-q", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
    }
}

/// Issue 36: a server that goes away mid-download. Every wait is said as it
/// begins (the cause, the attempt of how many, the delay), and the last line
/// says the partial download is kept and how to resume it.
final class ServerGoneTests: EndToEndTestCase {
    func testAServerThatGoesAwayIsRetriedAloudAndThePartialDownloadIsKept() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 3620)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        let server = self.server!
        DispatchQueue.global().asyncAfter(deadline: .now() + 1) { server.stop() }
        let run = try CLI.run(
            ["-n", "2", "--retries", "2", "--retry-wait", "1", "-o", path("f"), server.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        // (A cut that made progress is retried at once, unsaid; the waits after it are said.)
        XCTAssertTrue(run.stderr.contains("; retrying: attempt 3 of 3 in 2 s"), run.stderr)
        XCTAssertTrue(run.stderr.contains("giving up after 3 attempts: "), run.stderr)
        XCTAssertTrue(
            run.stderr.hasSuffix("; the partial download is kept: run the same command again to resume\n"),
            run.stderr)
        XCTAssertFalse(ManifestFile.done(path("f.part.json")).isEmpty, "the bytes fetched are kept")
    }
}
