// The probe's failures: one that another try may mend (a refused
// connection, a 503, a malformed answer) is retried aloud, with the backoff
// and `--retries` of a piece; one that it would not (a 404, a server that
// answers nothing) ends the download at once, saying what happened.
import Dispatch
import Foundation
import RangeServer
import XCTest

final class ProbeRetryTests: EndToEndTestCase {
    /// A server down as the download starts is waited for, aloud (it failed
    /// at once with "Failed to connect", whatever `--retries` said).
    func testAServerDownAtTheStartIsWaitedForAloud() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 3700)
        server.setResource(resource, at: "f")
        let server = self.server!
        let url = server.url("f")
        server.stop()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) { try? server.start() }
        let run = try CLI.run(
            ["-n", "4", "--retries", "3", "--retry-wait", "1", "-o", path("f"), url],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("; retrying: attempt 2 of 4 in 1 s"), run.stderr)
        assertSameBytes(path("f"), resource)
    }

    /// A server that stays down: each wait is said, then the attempts are counted in the failure.
    func testAServerThatStaysDownIsGivenUpOnAfterItsRetries() throws {
        let url = server.url("f")
        server.stop()
        let run = try CLI.run(["--retries", "2", "--retry-wait", "1", "-o", path("f"), url], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("; retrying: attempt 2 of 3 in 1 s"), run.stderr)
        XCTAssertTrue(run.stderr.contains("; retrying: attempt 3 of 3 in 2 s"), run.stderr)
        XCTAssertTrue(run.stderr.contains("giving up after 3 attempts: "), run.stderr)
        XCTAssertFalse(run.stderr.contains("partial download is kept"), "nothing was fetched: \(run.stderr)")
    }

    /// The opening request, the HEAD and the ranged GET all answered 503:
    /// a busy moment, retried after the server's Retry-After.
    func testA503ToEveryProbeRequestIsRetriedAfterItsRetryAfter() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 3701)
        server.setResource(resource, at: "f")
        server.setFaults((1...3).map { FaultRule(.status(503, retryAfter: 1), when: .nthRequest($0)) })
        let run = try CLI.run(
            ["-n", "4", "--retries", "2", "-o", path("f"), server.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("HTTP 503; retrying: attempt 2 of 3 in 1 s"), run.stderr)
        assertSameBytes(path("f"), resource)
    }

    /// The seeded soak's case: in a list, a 503 to an empty file's probe
    /// failed that entry at once ("failed: ...: HTTP 503"), though the same
    /// file alone was retried.
    func testA503ToAProbeInAListIsRetried() throws {
        let empty = Resource.generated(size: 0, seed: 3702)
        let one = Resource.generated(size: 1, seed: 3703)
        server.setResource(empty, at: "f0.bin")
        server.setResource(one, at: "f1.bin")
        // The soak's fault, `status:503:2@request=3`, counted per path.
        server.setFaults([FaultRule(.status(503, retryAfter: 2), when: .nthRequest(3))])
        let list = server.url("f0.bin") + "\n  out=e1.bin\n" + server.url("f1.bin") + "\n  out=e2.bin\n"
        try list.write(toFile: path("list"), atomically: true, encoding: .utf8)
        let run = try CLI.run(["-n", "8", "--retries", "2", "-i", path("list")], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr + run.stdout)
        assertSameBytes(path("e1.bin"), empty)
        assertSameBytes(path("e2.bin"), one)
    }

    /// The seeded soak's case: one malformed answer to the probe (a HEAD
    /// that fails, then a Content-Range of bytes 1-0) failed the file with
    /// "unexpected Content-Range ... in the probe"; another try succeeds.
    func testAMalformedAnswerToTheProbeIsRetried() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 3704)
        server.setResource(resource, at: "f")
        server.setFaults(
            [FaultRule(.headStatus(502))] + [1, 3].map { FaultRule(.invertedContentRange, when: .nthRequest($0)) })
        let run = try CLI.run(
            ["-n", "4", "--retries", "2", "--retry-wait", "0.1", "-o", path("f"), server.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        let gets = server.statistics.requests.filter { $0.method == "GET" && $0.rangeHeader == "bytes=0-0" }
        XCTAssertGreaterThanOrEqual(gets.count, 2, "the ranged GET probe went again: \(server.statistics.requests)")
    }

    /// A server that accepts and never answers: the probe said size unknown,
    /// no ranges (both invented), and the download then retried one stream
    /// for 42 s. It is "the server did not answer", within the connect
    /// timeout and two stall timeouts, and not retried.
    func testAServerThatNeverAnswersIsReportedWithinTwoStallTimeouts() throws {
        server.setResource(Resource.generated(size: 1 << 20, seed: 3705), at: "f")
        server.setFaults([FaultRule(.hang)])
        let started = Date()
        let run = try CLI.run(
            ["--stall-timeout", "1", "--connect-timeout", "2", "-o", path("f"), server.url("f")],
            in: directory, timeout: 30)
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("the server did not answer (no response to HEAD or a ranged GET in 1 s each)"),
            run.stderr)
        XCTAssertFalse(run.stderr.contains("one stream"), run.stderr)
        XCTAssertFalse(run.stderr.contains("retrying"), run.stderr)
        // The connect timeout and two stall timeouts (libcurl counts whole seconds), and a little for the machine.
        XCTAssertLessThan(seconds, 2 + 2 * 2 + 2, run.stderr)
    }

    /// A 404 is the answer, not a bad moment: no retry.
    func testA404IsNotRetried() throws {
        let run = try CLI.run(
            ["--retries", "3", "--retry-wait", "1", "-o", path("f"), server.url("missing")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("HTTP 404"), run.stderr)
        XCTAssertFalse(run.stderr.contains("retrying"), run.stderr)
    }
}
