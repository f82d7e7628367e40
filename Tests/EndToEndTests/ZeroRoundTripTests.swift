// The zero-round-trip start (issue 7): the first request, `GET Range:
// bytes=0-(min-split - 1)`, is the probe and its body the start of the first
// piece. Checked from the server's request log and the bytes on disk: no
// HEAD, no byte sent twice, and every fault on that first request (cut,
// wrong Content-Range, multipart, 200) ends in the right file. Faults count
// requests with this opening request as the first. Cuts and stalls of the
// opening request are in ReliabilityServerTransferTests (cases 10 and 11), redirects
// in ReliabilityRedirectSecurityTests (14, 15), beside their classic-probe twins.
import Foundation
import RangeGet
import RangeServer
import XCTest

final class ZeroRoundTripTests: EndToEndTestCase {
    private var requests: [RequestRecord] { server.statistics.requests }

    /// A file no larger than the minimum split comes in exactly one request.
    func testSmallFileIsOneRequest() throws {
        let resource = Resource.generated(size: 300 << 10, seed: 301)
        server.setResource(resource, at: "small")
        let output = path("small")
        let run = try CLI.run(["-q", "-n", "8", "-o", output, server.url("small")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(requests.map(\.method), ["GET"], "\(requests)")
        XCTAssertEqual(requests.first?.rangeHeader, "bytes=0-1048575")
        XCTAssertEqual(requests.first?.status, 206)
        XCTAssertEqual(server.statistics.bodyBytesSent, resource.size)
    }

    /// A segmented download: the first request is the opening one, no HEAD and
    /// no `bytes=0-0` probe, and the ranges asked for are disjoint and cover
    /// the file. (Bytes sent are not compared: a piece cut by work stealing
    /// leaves what its socket already held, which the server counts as sent.)
    func testSegmentedDownloadStartsWithTheOpeningRequestAndAsksForEachByteOnce() throws {
        let size: Int64 = 8 << 20
        let resource = Resource.generated(size: size, seed: 302)
        server.setResource(resource, at: "f")
        let output = path("f")
        let run = try CLI.run(["-q", "-n", "4", "--min-split", "1M", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(requests.first?.rangeHeader, "bytes=0-1048575")
        XCTAssertFalse(requests.contains { $0.method == "HEAD" || $0.rangeHeader == "bytes=0-0" }, "\(requests)")
        var covered = RangeSet()
        for range in requests.compactMap({ requestedRange($0.rangeHeader) }) {
            let bytes = ByteRange(range)
            XCTAssertEqual(
                covered.byteCount + bytes.count, covered.union(RangeSet([bytes])).byteCount,
                "\(bytes) asked twice: \(requests)")
            covered.insert(bytes)
        }
        XCTAssertEqual(covered.ranges, [ByteRange(0, size)])
    }

    /// The library's event record: connection 0 starts on the first piece
    /// right after the probe, with the opening request's bytes.
    func testFirstConnectionAdoptsTheOpeningRequest() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 303)
        server.setResource(resource, at: "f")
        let run = runLibrary([server.url("f")], to: path("f")) { $0.connections = 4 }
        XCTAssertNil(run.error)
        assertSameBytes(path("f"), resource)
        let started = run.events.compactMap { event -> (Int, ByteRange)? in
            guard case let .transfer(.pieceStarted(connection, range, _)) = event else { return nil }
            return (connection, range)
        }
        XCTAssertEqual(started.first?.0, 0)
        XCTAssertEqual(started.first?.1, ByteRange(0, 1 << 20))
        // The opening request was adopted, not sent again: byte 0 was asked for once.
        XCTAssertEqual(requests.filter { requestedRange($0.rangeHeader)?.lowerBound == 0 }.count, 1, "\(requests)")
    }

    /// A server that ignores ranges answers the opening request with 200 and
    /// the whole file: that response is the single plain stream, so the file
    /// is sent exactly once, in one request.
    func testOpeningAnswered200IsTheSingleStream() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 309)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.ignoreRange)])
        let output = path("f")
        let run = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(requests.map(\.status), [200], "\(requests)")
        XCTAssertEqual(server.statistics.bodyBytesSent, resource.size)
    }

    /// With another mirror, a first mirror that ignores ranges is dropped
    /// rather than turning the whole download into one stream from it.
    func testFirstMirrorIgnoringRangesIsDroppedAndTheOthersStaySegmented() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 311)
        let healthy = try anotherServer()
        server.setResource(resource, at: "f")
        healthy.setResource(resource, at: "f")
        server.setFaults([FaultRule(.ignoreRange, when: .method("GET"))])
        let output = path("f")
        let run = try CLI.run(
            [
                "-q", "--json", "-n", "4", "--min-split", "512K", "--retry-wait", "0.02", "-o", output,
                server.url("f"), healthy.url("f")
            ], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let mirrors = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]])
        XCTAssertNotNil(mirrors.first?["dropped"], "\(mirrors)")
        XCTAssertGreaterThanOrEqual(healthy.statistics.requests.filter { $0.status == 206 }.count, 2, "still segmented")
    }

    /// Answers the opening request must not be written from: a shifted
    /// Content-Range, multipart. Each falls back to the classic probe and the
    /// download completes with no wrong byte.
    func testUnusableOpeningAnswersFallBackToTheClassicProbe() throws {
        let cases: [(String, Fault)] = [("shift", .wrongContentRangeShift(1)), ("multipart", .multipart)]
        for (index, (name, fault)) in cases.enumerated() {
            let resource = Resource.generated(size: 3 << 20, seed: 306 + UInt64(index))
            server.setResource(resource, at: name)
            server.resetStatistics()
            server.setFaults([FaultRule(fault, when: .nthRequest(1))])
            let probe = DiskProbe(resource: resource)
            let run = runLibrary([server.url(name)], to: path(name), probe: probe) { $0.connections = 4 }
            XCTAssertNil(run.error, name)
            assertSameBytes(path(name), resource)
            XCTAssertEqual(probe.snapshot.wrongWrites, [], name)
            XCTAssertEqual(
                requests.dropFirst().first?.method, "HEAD", "\(name): the classic probe follows: \(requests)")
            XCTAssertGreaterThanOrEqual(requests.filter { $0.status == 206 }.count, 2, "\(name): still segmented")
        }
    }

    /// Ctrl-C while a small file's body is being held in memory, from a
    /// server that sent its head and 1000 bytes and then went silent: the
    /// run stops at once (exit 130), not when the 30 s stall timeout ends
    /// the wait, for one file and for a list (whose lanes each wait for
    /// their file to stop); nothing is left behind, and the next run
    /// fetches the file.
    func testInterruptEndsTheWaitForAHeldBody() throws {
        let resource = Resource.generated(size: 64 << 10, seed: 309)
        server.setResource(resource, at: "held")
        let output = path("held")
        try "\(server.url("held"))\n".write(toFile: path("list"), atomically: true, encoding: .utf8)
        for arguments in [["-o", output, server.url("held")], ["-i", path("list"), "-d", directory!]] {
            server.resetStatistics()
            server.setFaults([FaultRule(.stallAfter(1000), when: .nthRequest(1))])
            let started = Date()
            let stopped = try interrupted(
                ["-q", "--stall-timeout", "30"] + arguments, once: "the first 1000 bytes were sent"
            ) {
                self.server.statistics.bodyBytesSent >= 1000
            }
            XCTAssertEqual(stopped.status, 130, "\(arguments): \(stopped.stderr)")
            XCTAssertLessThan(
                Date().timeIntervalSince(started), 10, "\(arguments): the wait for the held body was not ended")
            XCTAssertEqual(directoryEntries(), ["list"], "\(arguments)")
            server.setFaults([])
            let run = try CLI.run(["-q"] + arguments, in: directory)
            XCTAssertEqual(run.status, 0, run.stderr)
            assertSameBytes(output, resource)
            try FileManager.default.removeItem(atPath: output)
        }
    }

    /// Ctrl-C while the classic probe waits for a server that never answers
    /// (`--use-head`, its HEAD hangs): the probe is ended within about a
    /// second, not at its 30 s timeout, for one file and for a list.
    func testInterruptEndsAProbeTheServerNeverAnswers() throws {
        let resource = Resource.generated(size: 64 << 10, seed: 310)
        server.setResource(resource, at: "hung")
        try "\(server.url("hung"))\n".write(toFile: path("list"), atomically: true, encoding: .utf8)
        for arguments in [["-o", path("hung"), server.url("hung")], ["-i", path("list"), "-d", directory!]] {
            server.resetStatistics()
            server.setFaults([FaultRule(.hang, when: .nthRequest(1))])
            let started = Date()
            let stopped = try interrupted(
                ["-q", "--use-head", "--stall-timeout", "30"] + arguments,
                once: "the HEAD was received"
            ) {
                !self.server.statistics.requests.isEmpty
            }
            XCTAssertEqual(stopped.status, 130, "\(arguments): \(stopped.stderr)")
            XCTAssertLessThan(Date().timeIntervalSince(started), 8, "\(arguments): the probe was not ended")
            XCTAssertEqual(directoryEntries(), ["list"], "\(arguments)")
        }
    }

    /// A pause that a resume undoes at once, while a probe waits for a
    /// server that never answers (the opening request, or `--use-head`'s
    /// HEAD): the probe ends as interrupted and the next attempt probes
    /// afresh and fetches the file. A signal shared by the attempt failed it
    /// with "Callback aborted" (review).
    func testAPauseUndoneByAResumeDuringAProbeGoesOn() async throws {
        for useHead in [false, true] {
            let resource = Resource.generated(size: 64 << 10, seed: 311 + (useHead ? 1 : 0))
            let name = useHead ? "head" : "opening"
            server.setResource(resource, at: name)
            server.resetStatistics()
            server.setFaults([FaultRule(.hang, when: .nthRequest(1))])
            var options = DownloadOptions()
            options.probeWithHead = useHead
            options.transfer.stallTimeout = 30
            let download = Download(url: server.url(name), destination: .file(path(name)), options: options)
            download.start()
            let deadline = Date().addingTimeInterval(10)
            while server.statistics.requests.isEmpty, Date() < deadline {
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            try await Task.sleep(nanoseconds: 100_000_000)
            download.pause()
            download.resume()
            let started = Date()
            do {
                let result = try await download.run()
                XCTAssertEqual(result.size, resource.size, name)
            } catch {
                XCTFail("\(name): \(error)")
            }
            XCTAssertLessThan(Date().timeIntervalSince(started), 10, "\(name): waited for the probe's timeout")
            assertSameBytes(path(name), resource)
        }
    }

    /// The opening request answered with an error status: the classic probe
    /// decides, and a file that is really missing fails with exit 1.
    func testMissingFileFailsClearly() throws {
        let run = try CLI.run(["-q", "-o", path("none"), server.url("none")], in: directory)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("404"), run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        XCTAssertEqual(directoryEntries(), [])
    }

    /// A run that resumes sends no opening request (it would fetch byte 0
    /// on, which is on disk already) and no probe either: the manifest's
    /// strong ETag goes out as If-Range on every ranged request. Both runs
    /// together send the file about once.
    func testResumeSendsIfRangeWithoutAProbeAndFetchesOnlyWhatIsMissing() throws {
        let size: Int64 = 8 << 20
        let resource = Resource.generated(size: size, seed: 310)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        let output = path("f")
        let first = runLibrary(
            [server.url("f")], to: output,
            stopWhen: { event in
                if case let .progress(progress) = event { return progress.bytesDone >= 2 << 20 }
                return false
            },
            configure: { $0.connections = 4 })
        guard case .interrupted? = first.error else {
            return XCTFail("expected a stop, got \(String(describing: first.error))")
        }
        XCTAssertEqual(requests.first?.rangeHeader, "bytes=0-1048575")
        server.setRatePerConnection(nil)
        let before = requests.count
        let second = runLibrary([server.url("f")], to: output) { $0.connections = 4 }
        XCTAssertNil(second.error)
        assertSameBytes(output, resource)
        XCTAssertFalse(requests[before...].contains { $0.method == "HEAD" }, "\(requests[before...])")
        XCTAssertTrue(requests[before...].allSatisfy { $0.ifRangeHeader == resource.etag }, "\(requests[before...])")
        XCTAssertLessThanOrEqual(server.statistics.bodyBytesSent, size + size / 4, "resumed, not fetched again")
    }
}
