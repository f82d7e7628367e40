// RELIABILITY.md cases 1-13: servers that misbehave. Each test injects the
// fault into RangeServer (or, for the few responses RangeServer cannot form,
// into ScriptedServer) on 127.0.0.1 and checks the bytes on disk, the exit
// code, the message and what the server sent. Library-level tests route every
// pwrite through DiskProbe, which fails the test if any byte that does not
// belong at its offset reaches the disk ("no unvalidated byte").
// Tests whose faults count requests with the probe as the first pass
// --use-head (probeWithHead): the classic probe, HEAD then GET 0-0. Faults on
// the default first request, which doubles as the probe, are in
// ZeroRoundTripTests.swift.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class ReliabilityServerTests: EndToEndTestCase {
    private var rangedGETs: [RequestRecord] {
        server.statistics.requests.filter { $0.method == "GET" && $0.rangeHeader != nil }
    }

    // MARK: 1. Range ignored: 200 with the whole body

    /// Every ranged GET gets a 200 with the whole file: one stream from zero,
    /// and the data file never grows past the remote size at any moment.
    func test01RangeIgnoredFallsBackToOneStreamAndNeverOutgrowsTheRemoteSize() throws {
        let size: Int64 = (6 << 20) + 3
        let resource = Resource.generated(size: size, seed: 101)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(8 << 20)
        server.setFaults([FaultRule(.ignoreRange, when: .fromRequest(2))])
        let output = path("f")
        let child = try Child(executable: CLI.binary, arguments: ["-n", "4", "-o", output, server.url("f")], in: directory)
        var largest: Int64 = 0
        while child.isRunning {
            largest = max(largest, fileSize(output + ".part"), fileSize(output))
            usleep(2_000)
        }
        let run = child.finish(timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(run.stderr.contains("one stream"), run.stderr)
        XCTAssertLessThanOrEqual(largest, size, "the data file outgrew the remote file")
        XCTAssertTrue(server.statistics.requests.contains { $0.method == "GET" && $0.rangeHeader == nil },
                      "fell back to a plain GET")
    }

    /// A resumed download whose server stops honouring ranges: the 200 bodies
    /// are never written at the resumed offsets; the file restarts from zero.
    func test01RangeIgnoredOnResumeWritesNothingAtNonZeroOffsets() throws {
        let resource = Resource.generated(size: 6 << 20, seed: 102)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let first = runLibrary([server.url("f")], to: output, stopWhen: { event in
            if case let .progress(progress) = event { return progress.bytesDone > 1 << 20 }
            return false
        }) { $0.connections = 4; $0.minimumSplit = 256 << 10 }
        XCTAssertEqual(first.error, .interrupted)
        XCTAssertGreaterThan(claimedBytes(output + ".part.json"), 0)

        server.setRatePerConnection(nil)
        server.setFaults([FaultRule(.ignoreRange)])
        let probe = DiskProbe(resource: resource)
        let second = runLibrary([server.url("f")], to: output, probe: probe) { $0.connections = 4 }
        XCTAssertNil(second.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [], "bytes of a 200 written at a ranged offset")
        XCTAssertTrue(second.restartReasons.contains { $0.contains("one stream") }, "\(second.restartReasons)")
    }

    // MARK: 2. 206 with a wrong Content-Range

    /// Shifted (before the request, off by one after it) and inverted
    /// Content-Ranges are rejected, nothing of them is written, the same range is asked again.
    func test02WrongContentRangeIsRejectedWrittenNowhereAndRetried() throws {
        let size: Int64 = 4 << 20
        let resource = Resource.generated(size: size, seed: 103)
        server.setResource(resource, at: "f")
        server.setFaults([
            FaultRule(.wrongContentRangeShift(-1), when: .nthRequest(3)),
            FaultRule(.wrongContentRangeShift(1), when: .nthRequest(4)),
            FaultRule(.invertedContentRange, when: .nthRequest(5)),
        ])
        let probe = DiskProbe(resource: resource)
        let output = path("f")
        let run = runLibrary([server.url("f")], to: output, probe: probe) { $0.connections = 4; $0.minimumSplit = 1 << 20 }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [])
        let faulty = server.statistics.requests.filter { $0.fault != nil }
        XCTAssertEqual(faulty.count, 3, "\(faulty)")
        for bad in faulty {
            let again = server.statistics.requests.filter { $0.fault == nil && $0.rangeHeader == bad.rangeHeader }
            XCTAssertFalse(again.isEmpty, "the range of \(bad.fault!) (\(bad.rangeHeader ?? "")) was asked again")
        }
        XCTAssertGreaterThanOrEqual(run.retries.count, 3)
        XCTAssertEqual(run.restartReasons, [], "a bad Content-Range is retried, not a restart")
    }

    /// A 206 naming another total (same ETag): rejected and retried (RELIABILITY.md 2),
    /// never recombined; the download must not be thrown away for it.
    func test02ContentRangeWithAnotherTotalIsRejectedAndRetried() throws {
        let size: Int64 = 4 << 20
        let resource = Resource.generated(size: size, seed: 104)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.wrongContentRangeTotal(size + 1000), when: .nthRequest(3))])
        let probe = DiskProbe(resource: resource)
        let output = path("f")
        let run = runLibrary([server.url("f")], to: output, probe: probe) { $0.connections = 4; $0.minimumSplit = 1 << 20 }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [])
        XCTAssertEqual(run.restartReasons, [], "one bad Content-Range total (same strong ETag) should be retried, not restart the download")
    }

    /// Content-Range values RangeServer cannot send (another unit, missing,
    /// last < first, `*` total): each rejected and retried on one connection.
    func test02MalformedContentRangeValuesAreRejected() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 105)
        let bad: [(@Sendable (Range<Int64>) -> String)?] = [
            { r in "items \(r.lowerBound)-\(r.upperBound - 1)/\(1 << 20)" },
            nil,
            { r in "bytes \(r.upperBound - 1)-\(r.lowerBound)/\(1 << 20)" },
            { r in "bytes \(r.lowerBound)-\(r.upperBound - 1)/*" },
            { r in "bytes \(r.lowerBound + 1)-\(r.upperBound)/\(1 << 20)" },
        ]
        let count = Mutex(0)
        let origin = try scriptedServer { request in
            guard request.method == "GET", request.headers["range"] != nil, request.headers["range"] != "bytes=0-0" else {
                return .serving(resource, request)
            }
            let index = count.withLock { value -> Int in
                defer { value += 1 }
                return value
            }
            guard index < bad.count else { return .serving(resource, request) }
            if let form = bad[index] { return .serving(resource, request, contentRange: form) }
            var response = ScriptedResponse.serving(resource, request)
            response.head = response.head.split(separator: "\r\n").filter { !$0.hasPrefix("Content-Range") }
                .joined(separator: "\r\n")
            return response
        }
        let probe = DiskProbe(resource: resource)
        let output = path("f")
        let run = runLibrary([origin.url("f")], to: output, probe: probe) {
            $0.connections = 1
            $0.probeWithHead = true  // the probe is not one of the scripted answers
            $0.retries = 8
            $0.retryWait = 0.01
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [])
        XCTAssertEqual(count.withLock { $0 }, bad.count + 1, "every bad answer was followed by another request")
        let ranges = origin.requests.filter { $0.method == "GET" }.compactMap { $0.headers["range"] }.filter { $0 != "bytes=0-0" }
        XCTAssertEqual(Set(ranges).count, 1, "the same range was asked again each time: \(ranges)")
    }

    /// A server that always answers with a wrong Content-Range: a clear failure
    /// after the retry limit, exit 1, and no byte written.
    func test02PersistentlyWrongContentRangeFailsClearlyWritingNothing() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 106)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.wrongContentRangeShift(1), when: .fromRequest(2))])
        let output = path("f")
        let run = try CLI.run(["-q", "--use-head", "-n", "2", "--retries", "2", "--retry-wait", "0.02", "-o", output, server.url("f")],
                              in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("Content-Range"), run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output))
        XCTAssertEqual(claimedBytes(output + ".part.json"), 0, "nothing recorded as done")
        let data = FileManager.default.contents(atPath: output + ".part") ?? Data()
        XCTAssertTrue(data.allSatisfy { $0 == 0 }, "no byte of a rejected response reached the data file")
    }

    // MARK: 3. 416

    /// A 416 `bytes */N` with another N mid-run means the file changed: restart,
    /// message, and the new file (never the old size).
    func test03UnsatisfiableWithAnotherTotalMeansTheFileChanged() throws {
        let size: Int64 = 4 << 20
        // No validators, so no If-Range: the changed server answers the Range itself.
        var original = Resource.generated(size: size, seed: 107)
        original.etag = nil
        original.lastModified = nil
        server.setResource(original, at: "f")
        server.setFaults([FaultRule(.changeSize(1 << 20), when: .rangeStart(2 << 20))])
        let output = path("f")
        let run = try CLI.run(["-n", "4", "--min-split", "1M", "--retry-wait", "0.02", "-o", output, server.url("f")],
                              in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(server.statistics.requests.contains { $0.status == 416 }, "a 416 was sent")
        XCTAssertTrue(run.stderr.contains("changed"), run.stderr)
        assertSameBytes(output, server.resource(at: "f")!)
    }

    /// The data file is complete and the manifest says so (a crash just before
    /// the rename): the next run fetches no body byte and finishes.
    func test03CompleteFileOnDiskIsDoneWithoutFetching() throws {
        let size: Int64 = (2 << 20) + 77
        let resource = Resource.generated(size: size, seed: 108)
        server.setResource(resource, at: "f")
        let output = path("f")
        _ = FileManager.default.createFile(atPath: output + ".part", contents: Data(resource.bytes(in: 0..<size)))
        try ManifestFile.write(output + ".part.json", url: server.url("f"), size: size, etag: resource.etag,
                               lastModified: defaultLastModifiedHeader, done: [0..<size])
        let run = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(server.statistics.bodyBytesSent, 0, "nothing fetched again")
        XCTAssertFalse(FileManager.default.fileExists(atPath: output + ".part.json"))
    }

    /// An empty file probed by a ranged GET (HEAD refused) gets 416 `bytes */0`: that means done.
    func test03EmptyFileAnswered416IsAnEmptyDownload() throws {
        server.setResource(Resource.generated(size: 0, seed: 109), at: "empty")
        server.setFaults([FaultRule(.headStatus(405))])
        let output = path("empty")
        let run = try CLI.run(["-q", "--use-head", "-n", "4", "-o", output, server.url("empty")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(fileSize(output), 0)
        XCTAssertTrue(server.statistics.requests.contains { $0.status == 416 }, "the ranged probe got 416")
        XCTAssertEqual(directoryEntries(), ["empty"])
    }

    // MARK: 4. Zero-length and tiny files

    func test04ZeroLengthFileGivesAnEmptyFileAndExitZero() throws {
        server.setResource(Resource.generated(size: 0, seed: 110), at: "zero")
        let output = path("zero")
        let run = try CLI.run(["-n", "16", "-o", output, server.url("zero")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(fileSize(output), 0)
        XCTAssertEqual(directoryEntries(), ["zero"], "no .part or manifest left")
        XCTAssertEqual(server.statistics.bodyBytesSent, 0)
    }

    /// Three bytes over sixteen connections with a one-byte split: at most
    /// three disjoint ranges that cover the file, no 416, each byte sent once.
    func test04FileSmallerThanTheConnectionCountPlansCorrectly() throws {
        let resource = Resource.generated(size: 3, seed: 111)
        server.setResource(resource, at: "tiny")
        let output = path("tiny")
        let run = try CLI.run(["-q", "-n", "16", "--min-split", "1", "-o", output, server.url("tiny")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let ranges = rangedGETs.filter { $0.rangeHeader != "bytes=0-0" || $0.status == 206 }
            .compactMap { requestedRange($0.rangeHeader) }
        XCTAssertLessThanOrEqual(ranges.count, 3, "\(ranges)")
        XCTAssertTrue(ranges.allSatisfy { $0.upperBound <= 3 }, "no range past the end: \(ranges)")
        XCTAssertFalse(server.statistics.requests.contains { $0.status == 416 })
        XCTAssertEqual(server.statistics.bodyBytesSent, 3)
    }

    // MARK: 5. HEAD refused, hanging, lying

    func test05RefusedHEADIsReplacedByARangedGETProbe() throws {
        for (index, code) in [405, 403].enumerated() {
            let resource = Resource.generated(size: 4 << 20, seed: 112 + UInt64(index))
            server.setResource(resource, at: "f\(code)")
            server.setFaults([FaultRule(.headStatus(code))])
            server.resetStatistics()
            let output = path("f\(code)")
            let run = try CLI.run(["-q", "--use-head", "-n", "4", "--min-split", "1M", "-o", output, server.url("f\(code)")], in: directory)
            XCTAssertEqual(run.status, 0, "HEAD \(code): \(run.stderr)")
            assertSameBytes(output, resource)
            XCTAssertTrue(server.statistics.requests.contains { $0.method == "GET" && $0.rangeHeader == "bytes=0-0" },
                          "HEAD \(code): probed with GET bytes=0-0")
            XCTAssertGreaterThanOrEqual(rangedGETs.filter { $0.status == 206 && $0.rangeHeader != "bytes=0-0" }.count, 2,
                                        "HEAD \(code): still segmented")
        }
    }

    func test05HangingHEADTimesOutAndTheDownloadGoesOn() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 114)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.headHang)])
        let output = path("f")
        let started = Date()
        let run = try CLI.run(["-q", "--use-head", "-n", "4", "--min-split", "512K", "--connect-timeout", "0.5", "--stall-timeout", "0.5",
                               "-o", output, server.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertLessThan(Date().timeIntervalSince(started), 15, "the HEAD timeout is short")
        XCTAssertGreaterThanOrEqual(rangedGETs.filter { $0.status == 206 && $0.rangeHeader != "bytes=0-0" }.count, 2)
    }

    func test05HEADWithoutLengthIsReplacedByARangedGETProbe() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 115)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.headNoLength)])
        let output = path("f")
        let run = try CLI.run(["-q", "--use-head", "-n", "4", "--min-split", "1M", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(server.statistics.requests.contains { $0.rangeHeader == "bytes=0-0" })
        XCTAssertGreaterThanOrEqual(rangedGETs.filter { $0.status == 206 && $0.rangeHeader != "bytes=0-0" }.count, 2)
    }

    /// HEAD reports half the real length; ranged GETs tell the truth. The
    /// download must end with the real file, not fail or loop on "changed".
    func test05LyingHEADIsOverruledByTheRangedGET() throws {
        let size: Int64 = 2 << 20
        let resource = Resource.generated(size: size, seed: 116)
        let origin = try scriptedServer { request in
            guard request.method == "HEAD" else { return .serving(resource, request) }
            return ScriptedResponse(head: ["HTTP/1.1 200 OK", "Accept-Ranges: bytes", "ETag: \"scripted-1\"",
                                           "Content-Length: \(size / 2)", "Connection: close"].joined(separator: "\r\n"))
        }
        let output = path("f")
        let run = try CLI.run(["--use-head", "-n", "4", "--min-split", "256K", "--retry-wait", "0.02", "-o", output, origin.url("f")],
                              in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr.replacingOccurrences(of: "\r", with: "\n"))
        assertSameBytes(output, resource)
    }

    /// HEAD refused and the ranged GET probe stalls after its head: no hang;
    /// RELIABILITY.md 5 asks for one plain GET when the ranged probe fails.
    /// HEAD refused, and the ranged GET probe never answered at all (no
    /// head): the probe times out and the file comes by one plain GET.
    func test05StalledRangedProbeTimesOutAndFallsBackToAPlainGET() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 117)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.headStatus(405), when: .method("HEAD")),
                          FaultRule(.hang, when: .nthRequest(2))])
        let output = path("f")
        let started = Date()
        let run = try CLI.run(["-q", "--use-head", "--stall-timeout", "1", "--connect-timeout", "1", "--retry-wait", "0.02",
                               "-o", output, server.url("f")], in: directory, timeout: 30)
        XCTAssertLessThan(Date().timeIntervalSince(started), 20, "timeouts on every step")
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let requests = server.statistics.requests
        XCTAssertEqual(requests.first?.method, "HEAD", "\(requests)")
        XCTAssertEqual(requests.dropFirst().first?.rangeHeader, "bytes=0-0", "the ranged probe: \(requests)")
        XCTAssertTrue(requests.contains { $0.method == "GET" && $0.rangeHeader == nil && $0.status == 200
                                          && $0.bodyBytesSent == resource.size }, "a plain GET: \(requests)")
    }

    // MARK: 6. No Accept-Ranges / Accept-Ranges: none

    func test06MissingAcceptRangesIsDecidedByARealRangedGET() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 118)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.noAcceptRanges)])
        let output = path("f")
        let run = try CLI.run(["-q", "-n", "4", "--min-split", "1M", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertGreaterThanOrEqual(rangedGETs.filter { $0.status == 206 }.count, 2, "segmented, since ranges work")
    }

    func test06AcceptRangesNoneWithRangesIgnoredGivesOneStream() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 119)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.acceptRangesNone)])
        let output = path("f")
        let run = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertFalse(server.statistics.requests.contains { $0.status == 206 })
        // One stream: the opening request's 200 is the whole file, sent once.
        let bodies = server.statistics.requests.filter { $0.bodyBytesSent > 0 }
        XCTAssertEqual(bodies.count, 1, "one stream, not one per connection: \(server.statistics.requests)")
        XCTAssertEqual(server.statistics.bodyBytesSent, resource.size)
    }

    /// HEAD says `Accept-Ranges: none` but a ranged GET really returns 206:
    /// RELIABILITY.md 6 decides from the GET, so the download is segmented.
    func test06AcceptRangesNoneOnHEADIsOverruledByA206() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 120)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.acceptRangesNone, when: .method("HEAD"))])
        let output = path("f")
        let run = try CLI.run(["-q", "--use-head", "-n", "4", "--min-split", "1M", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertGreaterThanOrEqual(rangedGETs.filter { $0.status == 206 && $0.rangeHeader != "bytes=0-0" }.count, 2,
                                    "ranged GETs work, so the download should be segmented")
    }

    // MARK: 7. Content-Encoding

    func test07RangedRequestsNeverAskForAContentCoding() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 121)
        server.setResource(resource, at: "f")
        let run = try CLI.run(["-q", "-n", "4", "--min-split", "256K", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(rangedGETs.isEmpty)
        for request in server.statistics.requests {
            XCTAssertNil(request.headers["accept-encoding"], "\(request.method) \(request.rangeHeader ?? "") asked for a coding")
            XCTAssertNil(request.headers["te"])
        }
    }

    /// A 206 with `Content-Encoding: gzip`: its offsets are not file offsets,
    /// so segmented mode ends and one plain stream brings the exact bytes.
    func test07EncodedPartialResponseLeavesSegmentedMode() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 122)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.gzipEncoding, when: .fromRequest(2))])
        let output = path("f")
        let run = try CLI.run(["-n", "4", "--min-split", "512K", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(run.stderr.contains("Content-Encoding"), run.stderr)
        XCTAssertTrue(server.statistics.requests.contains { $0.method == "GET" && $0.rangeHeader == nil }, "one plain stream")
    }

    /// A server that codes only its ranged answers: the probe's `bytes=0-0`
    /// comes back gzip-coded, with the total of the coded form. That total is
    /// not the file's size (as a coded 200's length is not): the plain stream
    /// that follows brings the file at the length its own answer gives. (The
    /// coded total was taken for the size; the plain answer's real length
    /// then read as a changed file, and the download failed.)
    func test07CodedAnswerToTheProbeGivesNoSize() throws {
        let resource = Resource.generated(size: 300_000, seed: 124)
        let origin = try scriptedServer { request in
            if request.method == "HEAD" {
                return ScriptedResponse(head: "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close")
            }
            guard request.headers["range"] != nil else { return .serving(resource, request) }
            return ScriptedResponse(head: ["HTTP/1.1 206 Partial Content", "Content-Encoding: gzip", "Content-Range: bytes 0-0/1234",
                                           "Content-Length: 1", "Connection: close"].joined(separator: "\r\n"), body: [0x1F])
        }
        let output = path("f")
        let run = try CLI.run(["-q", "--retries", "1", "--retry-wait", "0.01", "-o", output, origin.url("f")],
                              in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let plain = origin.requests.filter { $0.method == "GET" && $0.headers["range"] == nil }
        XCTAssertEqual(plain.count, 1, "one plain stream")
    }

    // MARK: 8. File changed between runs or mid-run

    /// The file changes while four connections fetch it: the 200 to If-Range
    /// restarts from zero with a message; the result is the new file only.
    func test08FileChangedMidRunRestartsFromZeroWithoutSplicing() throws {
        let size: Int64 = 8 << 20
        server.setResource(Resource.generated(size: size, seed: 123), at: "f")
        server.setRatePerConnection(2 << 20)
        server.setFaults([FaultRule(.changeContent, when: .nthRequest(4))])
        let output = path("f")
        let run = try CLI.run(["-n", "4", "--min-split", "1M", "-o", output, server.url("f")], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("changed"), run.stderr)
        let now = server.resource(at: "f")!
        XCTAssertNotEqual(now.etag, "\"rg-123-\(size)-0\"", "the fault changed the file")
        assertSameBytes(output, now)
        let changed = server.statistics.requests.first { $0.fault == "change-content" }
        XCTAssertEqual(changed?.status, 200, "If-Range with the old ETag got the whole new file")
        XCTAssertNotNil(changed?.ifRangeHeader)
    }

    /// Starts a throttled CLI download and interrupts it once the manifest records progress.
    private func interruptedRun(_ output: String, url: String) throws {
        server.setRatePerConnection(1 << 20)
        let stopped = try interrupted(["-q", "-n", "4", "--min-split", "256K", "-o", output, url],
                                      once: "a checkpoint recorded progress") { claimedBytes(output + ".part.json") > 0 }
        XCTAssertEqual(stopped.status, 130)
        server.setRatePerConnection(nil)
    }

    /// A weak ETag is never sent as If-Range, and then neither is Last-Modified.
    func test08WeakETagIsNeverUsedAsIfRange() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 124)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.weakETag)])
        let output = path("f")
        try interruptedRun(output, url: server.url("f"))
        let run = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("resuming"), run.stderr)
        assertSameBytes(output, resource)
        let ifRanges = server.statistics.requests.compactMap(\.ifRangeHeader)
        XCTAssertEqual(ifRanges, [], "no If-Range with a weak ETag (nor a date while an ETag exists)")
    }

    /// Without an ETag, If-Range carries Last-Modified.
    func test08WithoutETagIfRangeCarriesLastModified() throws {
        var resource = Resource.generated(size: 16 << 20, seed: 125)
        resource.etag = nil
        server.setResource(resource, at: "f")
        let output = path("f")
        try interruptedRun(output, url: server.url("f"))
        server.resetStatistics()
        let run = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let ranged = rangedGETs.filter { $0.rangeHeader != "bytes=0-0" }
        XCTAssertFalse(ranged.isEmpty)
        for request in ranged {
            XCTAssertEqual(request.ifRangeHeader, defaultLastModifiedHeader, "\(request.rangeHeader ?? "")")
        }
    }

    /// Between runs the file changes size (new ETag): restart from zero with a message.
    func test08FileChangedSizeBetweenRunsRestartsFromZero() throws {
        server.setResource(Resource.generated(size: 16 << 20, seed: 126), at: "f")
        let output = path("f")
        try interruptedRun(output, url: server.url("f"))
        let replacement = Resource.generated(size: (5 << 20) + 1, seed: 127)
        server.setResource(replacement, at: "f")
        let run = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("changed"), run.stderr)
        assertSameBytes(output, replacement)
    }

    /// No ETag; between runs only Last-Modified (and the bytes) change: restart from zero.
    func test08LastModifiedChangeBetweenRunsRestartsFromZero() throws {
        var original = Resource.generated(size: 16 << 20, seed: 128)
        original.etag = nil
        server.setResource(original, at: "f")
        let output = path("f")
        try interruptedRun(output, url: server.url("f"))
        var replacement = Resource.generated(size: 16 << 20, seed: 129)
        replacement.etag = nil
        replacement.lastModified = Resource.defaultLastModified.addingTimeInterval(86_400)
        server.setResource(replacement, at: "f")
        let run = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("Last-Modified"), run.stderr)
        assertSameBytes(output, replacement)
    }

    // MARK: 9. Error pages on the extra connections

    /// 503 (Retry-After 1), 429 and 403 with HTML bodies on three of four
    /// connections: no HTML written, Retry-After honoured, fewer connections after.
    func test09ErrorPagesAreNotWrittenRetryAfterIsHonouredAndConnectionsDrop() throws {
        // Large enough that, without the drop, all four connections would run
        // again once Retry-After passed (a 2 MiB file ended before that).
        let resource = Resource.generated(size: 16 << 20, seed: 130)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        server.setFaults([
            FaultRule(.status(503, retryAfter: 1), when: .nthRequest(3)),
            FaultRule(.status(429, retryAfter: nil), when: .nthRequest(4)),
            FaultRule(.status(403, retryAfter: nil), when: .nthRequest(5)),
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
        for case let .retry(connection, _, _) in run.events {
            XCTAssertGreaterThanOrEqual(connection, 0, "a retry names the connection whose transfer failed")
        }
        let serviceUnavailable = retries.first { $0.reason.contains("503") }
        XCTAssertNotNil(serviceUnavailable, "\(retries)")
        XCTAssertGreaterThanOrEqual(serviceUnavailable?.delay ?? 0, 1.0, "Retry-After: 1 honoured")
        // After the first 429/503, fewer connections run at once.
        guard let firstOverload = run.events.firstIndex(where: { event in
            if case let .retry(_, reason, _) = event { return reason.contains("503") || reason.contains("429") }
            return false
        }) else { return XCTFail("no 429/503 retry") }
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
            guard request.method == "GET", request.headers["range"] != "bytes=0-0" else { return .serving(resource, request) }
            let number = count.withLock { value -> Int in value += 1; return value }
            guard number == 2 else { return .serving(resource, request) }
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let when = formatter.string(from: Date().addingTimeInterval(3))
            let page = Array("<html><body>busy</body></html>".utf8)
            return ScriptedResponse(head: ["HTTP/1.1 503 Service Unavailable", "Retry-After: \(when)",
                                           "Content-Type: text/html", "Content-Length: \(page.count)",
                                           "Connection: close"].joined(separator: "\r\n"), body: page)
        }
        let probe = DiskProbe(resource: resource)
        let run = runLibrary([origin.url("f")], to: path("f"), probe: probe) {
            $0.connections = 2
            $0.minimumSplit = 256 << 10
        }
        XCTAssertNil(run.error)
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [])
        let busy = run.retries.first { $0.reason.contains("503") }
        XCTAssertNotNil(busy, "\(run.retries)")
        XCTAssertGreaterThanOrEqual(busy?.delay ?? 0, 1.0, "Retry-After: <date about 3 s ahead> honoured: \(run.retries)")
    }

    // MARK: 10. Connection cut, short body, reset

    /// A body cut after 300,000 bytes: those are kept, and only the rest is
    /// asked for again, after the classic probe and when the cut hits the
    /// opening request (the default first GET, which doubles as the probe).
    func test10CutBodyKeepsWhatArrivedAndRequestsOnlyTheRest() throws {
        let size: Int64 = 2 << 20
        let cases: [(arguments: [String], request: Int, ranges: [String])] = [
            (["--use-head"], 2, ["bytes=0-2097151", "bytes=300000-2097151"]),
            ([], 1, ["bytes=0-1048575", "bytes=300000-1048575", "bytes=1048576-2097151"]),
        ]
        for (index, probeCase) in cases.enumerated() {
            let resource = Resource.generated(size: size, seed: 131 + 1000 * UInt64(index))
            server.setResource(resource, at: "f\(index)")
            server.resetStatistics()
            server.setFaults([FaultRule(.cutAfter(300_000), when: .nthRequest(probeCase.request))])
            let output = path("f\(index)")
            let run = try CLI.run(["-q", "-n", "1", "--retry-wait", "0.02"] + probeCase.arguments
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
        server.setFaults([2, 3, 5].map { FaultRule(.cutAtRandom(seed: 7), when: .nthRequest($0)) }
                         + [FaultRule(.cutAtRandom(seed: 7), when: .probability(0.5, seed: 3))])
        let output = path("f")
        let run = try CLI.run(["-q", "-n", "1", "--retries", "20", "--retry-wait", "0.01",
                               "-o", output, server.url("f")], in: directory, timeout: 60)
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
            if count.withLock({ value -> Bool in value += 1; return value == 1 }) { response.resetAfter = 200_000 }
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
        let run = try CLI.run(["-q", "-n", "2", "--min-split", "256K", "--retries", "3", "--retry-wait", "0.01",
                               "-o", path("f"), server.url("f")], in: directory, timeout: 30)
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
            options.probeWithHead = true  // the cuts start at the first GET
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
            let run = try CLI.run(["-q", "-n", "1", "--stall-timeout", "1", "--retry-wait", "0.02"] + probeCase.arguments
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
        let run = runLibrary([server.url("f")], to: path("f"), probe: probe) { $0.connections = 4; $0.minimumSplit = 1 << 20 }
        XCTAssertNil(run.error)
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [], "multipart framing reached the file")
        XCTAssertTrue(run.retries.contains { $0.reason.contains("multipart") }, "\(run.retries)")
    }

    func test12AlwaysMultipartFailsClearly() throws {
        server.setResource(Resource.generated(size: 1 << 20, seed: 139), at: "f")
        server.setFaults([FaultRule(.multipart, when: .fromRequest(2))])
        let output = path("f")
        let run = try CLI.run(["-q", "--use-head", "-n", "2", "--min-split", "256K", "--retries", "2", "--retry-wait", "0.01",
                               "-o", output, server.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("multipart"), run.stderr)
        let data = FileManager.default.contents(atPath: output + ".part") ?? Data()
        XCTAssertTrue(data.allSatisfy { $0 == 0 }, "no multipart byte reached the data file")
    }

    /// A multipart answer to the probe's `bytes=0-0` is no answer to one
    /// range, even with a Content-Range of the byte asked for: the download
    /// fails at the probe, as with any other multipart answer there. (It was
    /// taken for range support, and every piece then retried in vain.)
    func test12MultipartAnswerToTheProbeFailsAtTheProbe() throws {
        let resource = Resource.generated(size: 300_000, seed: 140)
        let origin = try scriptedServer { request in
            if request.method == "HEAD" {
                return ScriptedResponse(head: "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close")
            }
            return .serving(resource, request, extraFields: ["Content-Type: multipart/byteranges; boundary=x"])
        }
        let output = path("f")
        let run = try CLI.run(["-q", "--retries", "2", "--retry-wait", "0.01", "-o", output, origin.url("f")],
                              in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("multipart/byteranges answer to a single range in the probe"), run.stderr)
        let ranged = origin.requests.filter { $0.method == "GET" && $0.headers["range"] != nil }
        XCTAssertEqual(ranged.count, 2, "the opening request and the probe's: \(ranged.map { $0.headers["range"] ?? "" })")
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
        usleep(1_200_000)  // past a checkpoint interval
        XCTAssertEqual(claimedBytes(output + ".part.json"), 0, "no resume claim for a stream of unknown length")
        child.kill9()
        XCTAssertEqual(claimedBytes(output + ".part.json"), 0)

        server.setRatePerConnection(nil)
        let run = try CLI.run(["-q", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
    }
}
