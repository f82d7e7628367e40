// Issue 41: signed links expire mid-download (S3, model hubs, CDNs). A
// mirror refused with 401/403/410 after serving bytes gets one new URL per
// expiry, from `--refresh-cmd` or `DownloadOptions.refreshURL`, checked
// before a byte of it is written; what was written is kept and not fetched
// again. The expired link is the first RangeServer refusing from some
// request on; the refreshed one is a second server with the same resource.
import Foundation
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class RefreshTests: EndToEndTestCase {
    /// A resource of `size` bytes at `f` on `server` (the link that expires,
    /// refusing with `status` from its request `expiresAt` on), and the
    /// fresh link's server serving it at `freshPath`.
    private func expiringLink(
        size: Int64, seed: UInt64, status: Int = 403, expiresAt request: Int, freshPath: String = "f"
    ) throws -> (Resource, RangeServer) {
        let resource = Resource.generated(size: size, seed: seed)
        let fresh = try anotherServer()
        server.setResource(resource, at: "f")
        fresh.setResource(resource, at: freshPath)
        server.setFaults([FaultRule(.status(status, retryAfter: nil), when: .fromRequest(request))])
        return (resource, fresh)
    }

    /// Body bytes of the 206 answers `server` sent (error pages left out).
    private func partialBytes(_ server: RangeServer) -> Int64 {
        server.statistics.requests.filter { $0.status == 206 }.reduce(0) { $0 + $1.bodyBytesSent }
    }

    /// A refresh command: a script that appends the URL it is given to
    /// `calls` and prints `url` (or, given `failing`, says so on stderr and
    /// exits 3). Returned as the argument of `--refresh-cmd`.
    private func refreshScript(printing url: String, failing: Bool = false) throws -> String {
        let script = path("refresh.sh")
        let body =
            failing
            ? "echo \"$1\" >> '\(path("calls"))'\necho 'token service unavailable' >&2\nexit 3\n"
            : "echo \"$1\" >> '\(path("calls"))'\necho '\(url)'\n"
        try ("#!/bin/sh\n" + body).write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o755)
        return script
    }

    /// The URLs the refresh command was given, one per call.
    private func refreshCalls() -> [String] {
        let text = (try? String(contentsOfFile: path("calls"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    /// Without a refresh source, a URL that answers 403 after serving bytes
    /// ends the run at once with a message that says what it looks like
    /// (exit 1, the partial kept); the same command with `--refresh-cmd`,
    /// while the link refuses all 8 connections at once, runs the command
    /// once and fetches only what is missing, from the refreshed URL.
    func testAnExpiredLinkFailsClearlyThenOneRefreshResumesIt() throws {
        let size: Int64 = 4 << 20
        // One connection: the opening request serves the first MiB, then the link has expired.
        let (resource, fresh) = try expiringLink(size: size, seed: 4101, expiresAt: 2)
        let output = path("out")
        let failed = try CLI.run(
            ["-q", "-n", "1", "--retry-wait", "0.02", "-o", output, server.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(failed.status, 1, failed.stderr)
        let lines = failed.stderr.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, failed.stderr)
        XCTAssertTrue(
            failed.stderr.contains("answered 403 after serving 1048576 bytes: a signed link that expired?"),
            failed.stderr)
        XCTAssertTrue(failed.stderr.contains("--refresh-cmd"), failed.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: output + ".part"), "the partial download is kept")
        XCTAssertEqual(partialBytes(server), 1 << 20)

        // Overnight every request is refused; the resume's 8 connections all are.
        server.setFaults([FaultRule(.status(403, retryAfter: nil))])
        server.resetStatistics()
        let refresh = try refreshScript(printing: fresh.url("f"))
        let resumed = try CLI.run(
            ["-q", "-n", "8", "--min-split", "256K", "--refresh-cmd", refresh, "-o", output, server.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(refreshCalls(), [server.url("f")], "one refresh, given the expired URL")
        XCTAssertGreaterThanOrEqual(
            server.statistics.requests.count { $0.status == 403 }, 2, "several connections were refused")
        XCTAssertEqual(partialBytes(server), 0)
        XCTAssertEqual(partialBytes(fresh), size - (1 << 20), "only the missing bytes, once")
        XCTAssertTrue(fresh.requestedRanges.allSatisfy { $0.lowerBound >= 1 << 20 }, "\(fresh.requestedRanges)")
    }

    /// A link that expires in the middle of a run (its second connection
    /// still receiving): the run ends once, the command runs once, and
    /// what was written is not fetched again (the in-flight bytes of the
    /// transfer the end cut short aside). `--json` names the mirror by the
    /// URL given.
    func testALinkThatExpiresMidRunGoesOnFromWhereItWas() throws {
        let size: Int64 = 4 << 20
        let (resource, fresh) = try expiringLink(size: size, seed: 4102, expiresAt: 3)
        server.setRatePerConnection(2 << 20)
        let output = path("out")
        let refresh = try refreshScript(printing: fresh.url("f"))
        let run = try CLI.run(
            [
                "--json", "-n", "2", "--min-split", "512K", "--refresh-cmd", refresh, "-o", output,
                server.url("f")
            ], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(refreshCalls().count, 1)
        let sent = partialBytes(server) + partialBytes(fresh)
        XCTAssertGreaterThanOrEqual(sent, size)
        XCTAssertLessThanOrEqual(sent - size, 256 << 10, "bytes fetched twice beyond what was in flight")
        XCTAssertGreaterThan(partialBytes(server), 512 << 10, "the expired link had served bytes")
        let mirrors = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]])
        XCTAssertEqual(mirrors.compactMap { $0["url"] as? String }, [server.url("f")], "one mirror, as given")
    }

    /// A refreshed URL of another file (another ETag, or another size) is
    /// refused before a byte of it is written, with the partial kept.
    func testARefreshedURLOfAnotherFileIsRefused() throws {
        let size: Int64 = 2 << 20
        let resource = Resource.generated(size: size, seed: 4103)
        server.setResource(resource, at: "f")
        let fresh = try anotherServer()
        var changed = resource
        changed.etag = "\"another\""
        fresh.setResource(changed, at: "etag")
        fresh.setResource(Resource.generated(size: size + 1, seed: 4103), at: "size")
        for (name, problem) in [("etag", "has ETag \"another\""), ("size", "has \(size + 1) bytes, not \(size)")] {
            server.setFaults([FaultRule(.status(410, retryAfter: nil), when: .fromRequest(2))])
            let output = path("out-" + name)
            let run = try CLI.run(
                [
                    "-q", "-n", "1", "--min-split", "512K", "--refresh-cmd",
                    try refreshScript(printing: fresh.url(name)),
                    "-o", output, server.url("f")
                ], in: directory, timeout: 30)
            XCTAssertEqual(run.status, 1, run.stderr)
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
            XCTAssertTrue(run.stderr.contains("the refreshed URL serves another file: "), run.stderr)
            XCTAssertTrue(run.stderr.contains(problem), run.stderr)
            XCTAssertTrue(FileManager.default.fileExists(atPath: output + ".part"), "the partial download is kept")
            XCTAssertFalse(
                fresh.statistics.requests(to: name).contains { $0.status == 206 && $0.bodyBytesSent > 1 },
                "no byte of it was fetched to be written")
        }
    }

    /// A command that fails says so in one line naming it and quoting its
    /// stderr; exit 1, the partial kept.
    func testAFailingRefreshCommandGivesOneClearLine() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 4104)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.status(403, retryAfter: nil), when: .fromRequest(2))])
        let output = path("out")
        let refresh = try refreshScript(printing: "", failing: true)
        // The URL reaches the command as one argument, none of it read by the shell.
        let url = server.url("f") + "?sig='x';touch>pwned;c=$(touch>pwned)&d=`touch>pwned`"
        let run = try CLI.run(
            ["-q", "-n", "1", "--min-split", "512K", "--refresh-cmd", refresh, "-o", output, url],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("--refresh-cmd '\(refresh)' failed with exit status 3: token service unavailable"),
            run.stderr)
        XCTAssertEqual(refreshCalls(), [url])
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("pwned")), "the shell ran part of the URL")
        XCTAssertTrue(FileManager.default.fileExists(atPath: output + ".part"), "the partial download is kept")
    }

    /// The library's closure: handed the URL in use, called once, and the
    /// run after it asks the new URL for exactly the bytes not written
    /// before the expiry.
    func testTheLibraryClosureRenewsTheURLAndNoWrittenByteIsFetchedAgain() throws {
        let size: Int64 = 4 << 20
        let (resource, fresh) = try expiringLink(size: size, seed: 4105, status: 401, expiresAt: 4, freshPath: "g")
        server.setRatePerConnection(2 << 20)
        let calls = Mutex<[String]>([])
        let renewed = fresh.url("g")
        let output = path("out")
        let run = runLibrary([server.url("f")], to: output) {
            $0.connections = 3
            $0.minimumSplit = 512 << 10
            $0.refreshURL = { expired in
                calls.withLock { $0.append(expired) }
                return renewed
            }
        }
        guard case let .success(result) = run.result else { return XCTFail("\(run.result)") }
        assertSameBytes(output, resource)
        XCTAssertEqual(calls.withLock { $0 }, [server.url("f")])
        XCTAssertEqual(result.remoteFile?.url, server.url("f"), "the mirror keeps the URL it was given")
        XCTAssertEqual(result.remoteFile?.effectiveURL, renewed)
        XCTAssertEqual(result.mirrors.map(\.url), [server.url("f")])
        // What the first run wrote, up to the notice of the refresh.
        let notice = try XCTUnwrap(
            run.events.firstIndex { event in
                if case let .notice(message) = event { return message.contains("refreshed") }
                return false
            })
        let written = run.events[..<notice].reduce(Int64(0)) { total, event in
            if case let .transfer(.pieceFinished(_, range, _)) = event { return total + range.count }
            return total
        }
        XCTAssertGreaterThan(written, 0)
        XCTAssertEqual(partialBytes(fresh), size - written, "the refreshed URL served exactly what was missing")
    }

    /// Issue 41: a race's duplicate request refused with 403 only loses
    /// its race: no refresh, no failure. Two connections; the second piece
    /// is answered 1.8 s late, so it is raced once the first is done, and
    /// the racer's request is refused.
    func testARefusedRaceDuplicateOnlyLosesItsRace() throws {
        let size: Int64 = 1 << 20
        let late: Int64 = 512 << 10
        let resource = Resource.generated(size: size, seed: 4106)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(384 << 10)
        server.setFaults([
            FaultRule(.delay(milliseconds: 1800), when: .nthRequest(2)),
            FaultRule(.status(403, retryAfter: nil), when: .rangeStart(late))
        ])
        let calls = Mutex(0)
        let output = path("out")
        let run = runLibrary([server.url("f")], to: output) {
            $0.connections = 2
            $0.minimumSplit = 256 << 10
            $0.refreshURL = { expired in
                calls.withLock { $0 += 1 }
                return expired
            }
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertTrue(
            run.events.contains { event in
                if case let .transfer(.raced(_, range)) = event { return range.start == late }
                return false
            }, "the late piece was never raced")
        XCTAssertTrue(server.statistics.requests.contains { $0.status == 403 }, "the racer was not refused")
        XCTAssertEqual(calls.withLock { $0 }, 0, "a refused duplicate is no expiry")
    }

    /// A stream (`-o -`, `Download.bytes(from:)`) renews an expired link by
    /// the same step: one call, and the reader gets every byte once.
    func testAStreamRenewsAnExpiredLinkOnce() async throws {
        let size: Int64 = 3 << 20
        let (resource, fresh) = try expiringLink(size: size, seed: 4107, status: 410, expiresAt: 3)
        let calls = Mutex(0)
        var options = DownloadOptions()
        options.connections = 2
        options.minimumSplit = 256 << 10
        options.retryWait = 0.02
        options.refreshURL = { [renewed = fresh.url("f")] _ in
            calls.withLock { $0 += 1 }
            return renewed
        }
        var bytes: [UInt8] = []
        for try await chunk in Download.bytes(from: server.url("f"), options: options) { bytes += chunk }
        let output = path("streamed")
        try Data(bytes).write(to: URL(fileURLWithPath: output))
        assertSameBytes(output, resource)
        XCTAssertEqual(calls.withLock { $0 }, 1)
        XCTAssertGreaterThan(partialBytes(fresh), 0, "the rest came from the renewed URL")
    }
}
