// RELIABILITY.md cases 1-4: servers that misbehave in their answers to
// ranged requests: a range ignored (200 with the whole body), a 206 with a
// wrong Content-Range, 416, zero-length and tiny files. Cases 5-8 (HEAD,
// Accept-Ranges, Content-Encoding, a changed file) are in
// ReliabilityServerHeaderTests.swift, cases 9-13 (error pages, cuts, stalls,
// multipart, chunked) in ReliabilityServerTransferTests.swift; the three
// share ReliabilityServerSupport.swift. Each test injects the
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
        let child = try Child(
            executable: CLI.binary, arguments: ["-n", "4", "-o", output, server.url("f")], in: directory)
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
        XCTAssertTrue(
            server.statistics.requests.contains { $0.method == "GET" && $0.rangeHeader == nil },
            "fell back to a plain GET")
    }

    /// A resumed download whose server stops honouring ranges: the 200 bodies
    /// are never written at the resumed offsets; the file restarts from zero.
    func test01RangeIgnoredOnResumeWritesNothingAtNonZeroOffsets() throws {
        let resource = Resource.generated(size: 6 << 20, seed: 102)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let first = runLibrary(
            [server.url("f")], to: output,
            stopWhen: { event in
                if case let .progress(progress) = event { return progress.bytesDone > 1 << 20 }
                return false
            },
            configure: {
                $0.connections = 4
                $0.minimumSplit = 256 << 10
            })
        XCTAssertEqual(first.error, .interrupted(keptResumeState: true))
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
            FaultRule(.invertedContentRange, when: .nthRequest(5))
        ])
        let probe = DiskProbe(resource: resource)
        let output = path("f")
        let run = runLibrary([server.url("f")], to: output, probe: probe) {
            $0.connections = 4
            $0.minimumSplit = 1 << 20
        }
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
        let run = runLibrary([server.url("f")], to: output, probe: probe) {
            $0.connections = 4
            $0.minimumSplit = 1 << 20
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [])
        XCTAssertEqual(
            run.restartReasons, [],
            "one bad Content-Range total (same strong ETag) should be retried, not restart the download")
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
            { r in "bytes \(r.lowerBound + 1)-\(r.upperBound)/\(1 << 20)" }
        ]
        let count = Mutex(0)
        let origin = try scriptedServer { request in
            guard request.method == "GET", request.headers["range"] != nil, request.headers["range"] != "bytes=0-0"
            else {
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
            $0.probeWithHead = true // the probe is not one of the scripted answers
            $0.retries = 8
            $0.retryWait = 0.01
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [])
        XCTAssertEqual(count.withLock { $0 }, bad.count + 1, "every bad answer was followed by another request")
        let ranges = origin.requests.filter { $0.method == "GET" }.compactMap { $0.headers["range"] }.filter {
            $0 != "bytes=0-0"
        }
        XCTAssertEqual(Set(ranges).count, 1, "the same range was asked again each time: \(ranges)")
    }

    /// A server that always answers with a wrong Content-Range: a clear failure
    /// after the retry limit, exit 1, and no byte written.
    func test02PersistentlyWrongContentRangeFailsClearlyWritingNothing() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 106)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.wrongContentRangeShift(1), when: .fromRequest(2))])
        let output = path("f")
        let run = try CLI.run(
            ["-q", "--use-head", "-n", "2", "--retries", "2", "--retry-wait", "0.02", "-o", output, server.url("f")],
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
        let run = try CLI.run(
            ["-n", "4", "--min-split", "1M", "--retry-wait", "0.02", "-o", output, server.url("f")],
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
        try ManifestFile.write(
            output + ".part.json", url: server.url("f"), size: size, etag: resource.etag,
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
}
