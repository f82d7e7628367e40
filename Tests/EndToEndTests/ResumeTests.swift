// Resume across processes: after SIGKILL, after SIGINT, and when the remote
// file changed in between (which must restart, never splice).
import Foundation
import RangeServer
import XCTest

final class ResumeTests: EndToEndTestCase {
    private let size: Int64 = 24 << 20
    private let rate = 2 << 20 // per connection
    private let connections = 4

    /// Starts a throttled download and returns it once the manifest records progress.
    private func startThrottled(_ output: String) throws -> Child {
        server.setRatePerConnection(rate)
        let child = try launch(["-q", "-n", "\(connections)", "-o", output, server.url("f")])
        XCTAssertTrue(
            wait(timeout: 20) { ManifestFile.doneBytes(output + ".part.json") >= 4 << 20 },
            "a checkpoint recorded progress")
        return child
    }

    /// A throttled download stopped with Ctrl-C once the manifest records progress: how it ended.
    private func interruptedThrottled(_ output: String) throws -> Run {
        let child = try startThrottled(output)
        kill(child.pid, SIGINT)
        return child.finish(timeout: 20)
    }

    func testResumeAfterSIGKILLFetchesOnlyWhatIsMissing() throws {
        let resource = Resource.generated(size: size, seed: 21)
        server.setResource(resource, at: "f")
        let output = path("f")
        let child = try startThrottled(output)
        kill(child.pid, SIGKILL)
        child.process.waitUntilExit()
        XCTAssertEqual(child.process.terminationReason, .uncaughtSignal)
        XCTAssertTrue(FileManager.default.fileExists(atPath: output + ".part.json"))

        server.setRatePerConnection(nil)
        let run = try CLI.run(["-n", "\(connections)", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        // The kernel kept every byte written before the kill, and the quick
        // saves (twenty a second) listed them: little more than 0.1 s of transfer
        // is fetched again.
        let quickSave = Int64(connections * rate) / 10
        XCTAssertLessThanOrEqual(server.statistics.bodyBytesSent, size + 3 * quickSave)
        let resumed = server.statistics.requests.filter { $0.rangeHeader != nil && $0.ifRangeHeader != nil }
        XCTAssertFalse(resumed.isEmpty, "resumed requests carry If-Range")
    }

    func testResumeAfterSIGINTSavesStateAndExits130() throws {
        let resource = Resource.generated(size: size, seed: 22)
        server.setResource(resource, at: "f")
        let output = path("f")
        let stopped = try interruptedThrottled(output)
        XCTAssertEqual(stopped.status, 130)
        let saved = ManifestFile.doneBytes(output + ".part.json")
        XCTAssertGreaterThan(saved, 0)

        let done = ManifestFile.done(output + ".part.json")
        server.setRatePerConnection(nil)
        server.resetStatistics()
        let run = try CLI.run(["-n", "\(connections)", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(run.stderr.contains("resuming"), run.stderr)
        let requested = server.requestedRanges
        assertNotAskedAgain(done, in: requested, saved: "before Ctrl-C")
        XCTAssertEqual(covered(requested + done), [0..<size], "the missing bytes were asked for")
        // Work stealing may waste what was already in flight on a cut connection.
        XCTAssertLessThanOrEqual(server.statistics.bodyBytesSent, (size - saved) + (size - saved) / 4)
    }

    func testChangedRemoteFileRestartsFromZero() throws {
        let original = Resource.generated(size: size, seed: 23)
        server.setResource(original, at: "f")
        let output = path("f")
        let stopped = try interruptedThrottled(output)
        XCTAssertEqual(stopped.status, 130)

        let replacement = Resource.generated(size: size, seed: 24)
        server.setResource(replacement, at: "f")
        server.setRatePerConnection(nil)
        let run = try CLI.run(["-n", "\(connections)", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("changed"), run.stderr)
        assertSameBytes(output, replacement)
    }

    /// Interrupts a throttled download of `resource` with SIGINT, then
    /// resumes it unthrottled (with `arguments` more) with fresh server statistics.
    @discardableResult
    private func interruptAndResume(_ resource: Resource, arguments: [String] = []) throws -> Run {
        server.setResource(resource, at: "f")
        let output = path("f")
        let stopped = try interruptedThrottled(output)
        XCTAssertEqual(stopped.status, 130)
        server.setRatePerConnection(nil)
        server.resetStatistics()
        let run = try CLI.run(["-n", "\(connections)"] + arguments + ["-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        return run
    }

    /// Issue 11: with a strong ETag in the manifest, a resume sends its
    /// ranged requests at once, each with If-Range, instead of a probe first.
    func testAResumeWithAStrongETagSendsEveryRequestWithIfRangeAndNoProbe() throws {
        let resource = Resource.generated(size: size, seed: 26)
        try interruptAndResume(resource)
        let requests = server.statistics.requests
        XCTAssertFalse(requests.isEmpty)
        XCTAssertFalse(requests.contains { $0.method == "HEAD" }, "no HEAD probe")
        for request in requests {
            XCTAssertNotNil(requestedRange(request.rangeHeader), "a ranged GET: \(request)")
            XCTAssertEqual(request.ifRangeHeader, resource.etag, "every request carries If-Range: \(request)")
        }
        XCTAssertFalse(
            requests.contains { requestedRange($0.rangeHeader)?.lowerBound == 0 },
            "no opening request for byte 0, which is on disk")
    }

    /// A resume sends no opening request, so the server's wait is not known
    /// when its plan is made: the end reserve is kept until the first
    /// answers show a near server, and its last MiB comes in minimum splits.
    func testAResumeFromANearServerKeepsItsEndReserve() throws {
        let resource = Resource.generated(size: size, seed: 29)
        try interruptAndResume(resource, arguments: ["--min-split", "256K"])
        let (reserve, pieces) = lastSplits(4, of: size, split: 256 << 10)
        let asked = server.requestedRanges.filter { reserve.contains($0.lowerBound) }.sorted {
            $0.lowerBound < $1.lowerBound
        }
        XCTAssertEqual(asked, pieces, "\(server.requestedRanges)")
    }

    /// From a server 50 ms away, the reserve a resume kept goes back to the
    /// plan once the first answers come: asked as one piece, not in four
    /// requests that would each wait.
    func testAResumeFromADistantServerGivesItsEndReserveBack() throws {
        server.setLatency(0.05)
        let resource = Resource.generated(size: size, seed: 30)
        try interruptAndResume(resource, arguments: ["--min-split", "256K"])
        let split: Int64 = 256 << 10
        let reserve = lastSplits(4, of: size, split: split).all
        XCTAssertTrue(
            server.requestedRanges.contains(reserve), "the reserve asked as one piece: \(server.requestedRanges)")
        XCTAssertFalse(
            server.requestedRanges.contains { reserve.contains($0.lowerBound) && $0.count == split },
            "\(server.requestedRanges)")
    }

    /// Without an ETag, Last-Modified is the If-Range validator, and still no probe goes first.
    func testAResumeWithOnlyLastModifiedSendsTheDateAsIfRange() throws {
        var resource = Resource.generated(size: size, seed: 27)
        resource.etag = nil
        try interruptAndResume(resource)
        let requests = server.statistics.requests
        XCTAssertFalse(requests.contains { $0.method == "HEAD" }, "no HEAD probe")
        XCTAssertFalse(requests.isEmpty)
        for request in requests {
            XCTAssertNotNil(
                request.ifRangeHeader.flatMap { $0.hasSuffix("GMT") ? $0 : nil }, "If-Range is a date: \(request)")
        }
    }

    /// A weak ETag cannot validate ranges (RFC 9110 13.1.5): the resume probes first, as before.
    func testAResumeWithAWeakETagProbesFirst() throws {
        var resource = Resource.generated(size: size, seed: 28)
        resource.etag = "W/\"weak-28\""
        try interruptAndResume(resource)
        let requests = server.statistics.requests
        XCTAssertEqual(requests.first?.method, "HEAD", "the probe goes first: \(requests.prefix(2))")
        XCTAssertFalse(requests.contains { $0.ifRangeHeader != nil }, "no If-Range with a weak ETag")
    }

    func testRestartOptionDiscardsThePartialDownload() throws {
        let resource = Resource.generated(size: size, seed: 25)
        server.setResource(resource, at: "f")
        let output = path("f")
        _ = try interruptedThrottled(output)

        server.setRatePerConnection(nil)
        server.resetStatistics()
        let run = try CLI.run(["-q", "--restart", "-n", "\(connections)", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(covered(server.requestedRanges), [0..<size], "every byte requested again")
        XCTAssertGreaterThanOrEqual(server.statistics.bodyBytesSent, size)
    }
}
