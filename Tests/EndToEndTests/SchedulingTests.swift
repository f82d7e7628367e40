// Adaptive scheduling: stalls recovered without waiting for the timeout,
// mirrors that fail or disagree are dropped, work stealing keeps every
// connection busy while work remains (checked from the engine's own events).
import Foundation
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class SchedulingTests: EndToEndTestCase {
    /// axel and aria2 "stuck at 99%": one request stalls forever after 256 KiB.
    /// The stall timeout is far away (60 s); the range must be handed over long before.
    func testStalledConnectionIsOvertakenLongBeforeTheStallTimeout() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 71)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        server.setFaults([FaultRule(.stallAfter(256 << 10), when: .nthRequest(3))])
        let output = path("f")
        let started = Date()
        let run = try CLI.run(
            [
                "-q", "--json", "-n", "4", "--min-split", "256K", "--stall-timeout", "60", "-o", output,
                server.url("f")
            ], in: directory, timeout: 50)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30, "did not wait for the 60 s stall timeout")
        assertSameBytes(output, resource)
        XCTAssertTrue(server.statistics.requests.contains { $0.fault != nil }, "the stall was injected")
    }

    /// The same for a request never answered at all: with no byte of its
    /// own it was judged at its mirror's pace, so it was never raced and its
    /// range waited for the stall timeout.
    func testARequestNeverAnsweredIsOvertakenLongBeforeTheStallTimeout() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 73)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        server.setFaults([FaultRule(.hang, when: .nthRequest(3))])
        let output = path("f")
        let started = Date()
        let run = try CLI.run(
            [
                "-q", "-n", "4", "--min-split", "256K", "--stall-timeout", "60", "-o", output,
                server.url("f")
            ], in: directory, timeout: 50)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30, "did not wait for the 60 s stall timeout")
        assertSameBytes(output, resource)
        XCTAssertEqual(server.statistics.requests.filter { $0.fault != nil }.count, 1, "the hang was injected")
    }

    /// A request waiting for its answer is raced, never let go for another
    /// that would wait as long: here one range's answers come 3 s late (a
    /// slow backend behind it), and each hand-over cancelled the request
    /// before its answer, then its thief's in turn, every second.
    func testARangeAnsweredLateIsRacedNotAskedOverAndOver() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 74)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(8 << 20)
        var options = DownloadOptions()
        options.connections = 2
        options.minimumSplit = 256 << 10
        let late = try XCTUnwrap(try firstSplitPieces(options)[1])
        server.setFaults([FaultRule(.delay(milliseconds: 3000), when: .rangeStart(late.start))])
        let before = server.statistics.requests.count
        let output = path("f")
        let run = try CLI.run(
            ["-q", "-n", "2", "--min-split", "256K", "-o", output, server.url("f")],
            in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let asked = server.requestedRanges.dropFirst(before).filter { $0.lowerBound == late.start }
        XCTAssertLessThanOrEqual(asked.count, 2, "the late range asked by its request and one racer at most: \(asked)")
    }

    func testStallTimeoutAbandonsASilentConnection() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 72)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.stallAfter(1000), when: .nthRequest(2))])
        let output = path("f")
        // One connection: nobody can steal, so only the stall timeout can rescue it.
        let run = try CLI.run(
            ["-q", "--json", "-n", "1", "--stall-timeout", "1", "-o", output, server.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertGreaterThanOrEqual(try run.jsonObject()["retries"] as? Int ?? 0, 1)
    }

    func testMirrorThatFailsRepeatedlyIsDroppedAndTheRestComplete() throws {
        let resource = Resource.generated(size: 6 << 20, seed: 73)
        let healthy = try anotherServer()
        server.setResource(resource, at: "f")
        healthy.setResource(resource, at: "f")
        // The broken mirror answers the probe, then 503s every ranged GET.
        server.setFaults([FaultRule(.status(503, retryAfter: nil), when: .fromRequest(2))])
        server.setRatePerConnection(1 << 20)
        healthy.setRatePerConnection(2 << 20)
        let output = path("f")
        let run = try CLI.run(
            [
                "-q", "--use-head", "--json", "-n", "4", "--min-split", "256K", "--retry-wait", "0.05",
                "-o", output, server.url("f"), healthy.url("f")
            ], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let mirrors = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]])
        XCTAssertEqual(mirrors.count, 2)
        XCTAssertNotNil(mirrors[0]["dropped"], "the failing mirror was dropped: \(mirrors)")
        XCTAssertNil(mirrors[1]["dropped"] as? String)
        XCTAssertEqual(mirrors[1]["bytes"] as? Int64, 6 << 20, "every byte came from the healthy mirror")
    }

    func testMirrorThatDisagreesOnSizeIsRefused() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 74)
        let other = try anotherServer()
        server.setResource(resource, at: "f")
        other.setResource(Resource.generated(size: (3 << 20) + 1, seed: 74), at: "f")
        let output = path("f")
        let run = try CLI.run(["--json", "-n", "4", "-o", output, server.url("f"), other.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(run.stderr.contains("dropping mirror"), run.stderr)
        let mirrors = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]])
        XCTAssertTrue((mirrors[1]["dropped"] as? String)?.contains("size") == true, "\(mirrors)")
        XCTAssertEqual(
            other.statistics.requests.filter { $0.method == "GET" && $0.rangeHeader != "bytes=0-0" }.count, 0,
            "no data was taken from the disagreeing mirror")
    }

    func testAllMirrorsDeadFailsWithExitOne() throws {
        let run = try CLI.run(
            ["-q", "--retries", "1", "-o", path("f"), server.url("absent"), server.url("gone")],
            in: directory)
        XCTAssertEqual(run.status, 1, run.stderr)
    }

    func testUnevenMirrorsAllContributeAndFasterOnesCarryMore() throws {
        let resource = Resource.generated(size: 12 << 20, seed: 75)
        let medium = try anotherServer()
        let fast = try anotherServer()
        for (mirror, rate) in [(server!, 512 << 10), (medium, 1 << 20), (fast, 4 << 20)] {
            mirror.setResource(resource, at: "f")
            mirror.setRatePerConnection(rate)
        }
        let output = path("f")
        let run = try CLI.run(
            [
                "-q", "--json", "-n", "6", "--min-split", "128K", "-o", output,
                server.url("f"), medium.url("f"), fast.url("f")
            ], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let bytes = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]]).map {
            $0["bytes"] as? Int64 ?? 0
        }
        // At most a race's overlap twice: the end game may race a slow mirror's tail (both sides fetch it).
        XCTAssertGreaterThanOrEqual(bytes.reduce(0, +), 12 << 20, "\(bytes)")
        XCTAssertLessThanOrEqual(bytes.reduce(0, +), (12 << 20) + 2 * (128 << 10), "\(bytes)")
        XCTAssertTrue(bytes.allSatisfy { $0 > 0 }, "every mirror contributed: \(bytes)")
        XCTAssertGreaterThan(bytes[2], bytes[0], "the fast mirror carried more than the slow one: \(bytes)")
    }

    /// While more than a split's worth of work is left per connection, every
    /// connection is busy: read from the engine's own progress events.
    func testWorkStealingLeavesNoConnectionIdleWhileWorkRemains() throws {
        // Three connections on pieces of 1.5, 1.5 and 3 MiB: the first two run
        // out of work halfway and must take the end of the third. (Four even
        // pieces at one rate would all end together, stealing or not.)
        let size: Int64 = 6 << 20
        let rate = 512 << 10
        let connections = 3
        let minimumSplit: Int64 = 64 << 10
        let resource = Resource.generated(size: size, seed: 76)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(rate)
        var options = DownloadOptions()
        options.connections = connections
        options.minimumSplit = minimumSplit
        let download = Download(url: server.url("f"), destination: .file(path("f")), options: options)
        let events = Mutex<[DownloadEvent]>([])
        let result = try download.run { event in events.withLock { $0.append(event) } }
        assertSameBytes(result.path, resource)

        let recorded = events.withLock { $0 }
        let progress = recorded.compactMap { event -> DownloadProgress? in
            if case let .progress(value) = event { return value }
            return nil
        }
        // A piece with more than half a second (plus two splits) left is always worth cutting.
        let enough = Int64(connections) * (Int64(rate) / 2 + 2 * minimumSplit)
        let checked = progress.filter { size - $0.bytesDone > enough }
        XCTAssertGreaterThan(checked.count, 5, "enough samples while work remained")
        for sample in checked {
            XCTAssertEqual(
                sample.activeConnections, connections, "idle connection with \(size - sample.bytesDone) bytes left")
        }
        XCTAssertEqual(progress.last?.bytesDone, size)
        XCTAssertLessThanOrEqual(server.statistics.bodyBytesSent, size + size / 20, "stealing refetched little")
    }

    /// The piece of the first split each connection takes (connection 0's
    /// after the opening), from a run of "f" without faults: a later run of
    /// the same file with `options` plans the same, so faults can be aimed
    /// at those pieces' first bytes.
    private func firstSplitPieces(_ options: DownloadOptions) throws -> [Int: ByteRange] {
        let pieces = Mutex<[Int: ByteRange]>([:])
        _ = try Download(url: server.url("f"), destination: .file(path("dry")), options: options).run { event in
            if case let .transfer(.pieceStarted(connection, range, _)) = event, range.start > 0 {
                pieces.withLock { if $0[connection] == nil { $0[connection] = range } }
            }
        }
        return pieces.withLock { $0 }
    }

    /// The file of the end-reserve tests: 4 connections with this split keep its last MiB back.
    private static let reserveFileSize: Int64 = 8 << 20
    private static let reserveSplit: Int64 = 256 << 10

    /// Serves a `reserveFileSize` file at "f", 8 MiB/s per connection.
    private func serveReserveFile(seed: UInt64) -> Resource {
        let resource = Resource.generated(size: Self.reserveFileSize, seed: seed)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(8 << 20)
        return resource
    }

    /// The end of a file is kept back and handed out in minimum splits to
    /// the connections that finish first, so none idles while another ends
    /// the file alone (Planner.endReserve): with 4 connections and 256 KiB
    /// splits, the last MiB comes in 4 requests of 256 KiB, each started
    /// only once a connection finished a piece of the first split.
    func testTheEndOfAFileIsHandedOutInSmallPiecesToConnectionsThatFinishFirst() throws {
        let (size, split) = (Self.reserveFileSize, Self.reserveSplit)
        let resource = serveReserveFile(seed: 77)
        var options = DownloadOptions()
        options.connections = 4
        options.minimumSplit = split
        let download = Download(url: server.url("f"), destination: .file(path("f")), options: options)
        let events = Mutex<[DownloadEvent]>([])
        let result = try download.run { event in events.withLock { $0.append(event) } }
        assertSameBytes(result.path, resource)

        let (reserve, pieces) = lastSplits(4, of: size, split: split)
        let asked = server.requestedRanges.filter { reserve.contains($0.lowerBound) }
        XCTAssertEqual(
            asked.sorted { $0.lowerBound < $1.lowerBound }, pieces,
            "the last MiB in minimum splits: \(server.requestedRanges)")
        XCTAssertFalse(
            server.requestedRanges.contains {
                $0.lowerBound < reserve.lowerBound && $0.upperBound > reserve.lowerBound
            },
            "no piece of the first split runs into the reserve")
        // Each reserved piece started after a piece of the first split (longer than the opening) had finished.
        var finishedBelow = 0
        var reservedStarts: [Int] = []
        for event in events.withLock({ $0 }) {
            switch event {
            case let .transfer(.pieceFinished(_, written, true))
            where written.end <= reserve.lowerBound && written.count > split:
                finishedBelow += 1
            case let .transfer(.pieceStarted(_, range, _)) where reserve.contains(range.start):
                reservedStarts.append(finishedBelow)
            default:
                break
            }
        }
        XCTAssertEqual(reservedStarts.count, 4)
        XCTAssertTrue(
            reservedStarts.allSatisfy { $0 > 0 }, "reserved pieces started only at the end: \(reservedStarts)")
        XCTAssertLessThanOrEqual(server.statistics.bodyBytesSent, size + size / 20, "the reserve is fetched once")
    }

    /// Transfers that fell silent must not make fresh ones look silent too.
    /// Of 4 connections, two stall at once (one with two splits left, one
    /// with half a split) and the other two get their answers 1.3 s late.
    /// When those two end, the stalled ones have been silent a second: the
    /// first free connection takes the larger stalled rest whole, rightly,
    /// but its fresh request was then judged by the other stalled transfer's
    /// 0 B/s, and the second free connection took it whole; the first,
    /// free again, took it back, and so on without end. The loop never
    /// returned to libcurl: the run spun at 100% CPU, deaf to SIGTERM (seen
    /// in a bulk-mixed run, its last requests never sent).
    func testStalledTransfersDoNotSetFreeConnectionsPassingAFreshPieceBackAndForth() throws {
        let split = Self.reserveSplit
        let resource = Resource.generated(size: Self.reserveFileSize, seed: 79)
        server.setResource(resource, at: "f")
        var options = DownloadOptions()
        options.connections = 4
        options.minimumSplit = split
        let pieces = try firstSplitPieces(options)
        let (late, stalling) = try (
            (0...1).map { try XCTUnwrap(pieces[$0]) }, (2...3).map { try XCTUnwrap(pieces[$0]) }
        )
        XCTAssertTrue(stalling.allSatisfy { $0.count > 2 * split }, "\(stalling)")
        server.setFaults(
            late.map { FaultRule(.delay(milliseconds: 1300), when: .rangeStart($0.start)) } + [
                FaultRule(.stallAfter(stalling[0].count - 2 * split), when: .rangeStart(stalling[0].start)),
                FaultRule(.stallAfter(stalling[1].count - split / 2), when: .rangeStart(stalling[1].start))
            ])

        let download = Download(url: server.url("f"), destination: .file(path("f")), options: options)
        let stolen = Mutex(0)
        let outcome = Mutex<Result<DownloadResult, DownloadError>?>(nil)
        let ended = DispatchSemaphore(value: 0)
        // On a thread of its own: a loop that spins never returns, nor hears stop().
        Thread.detachNewThread {
            let result = Result { () throws(DownloadError) in
                try download.run { event in
                    if case .transfer(.stolen) = event { stolen.withLock { $0 += 1 } }
                }
            }
            outcome.withLock { $0 = result }
            ended.signal()
        }
        guard ended.wait(timeout: .now() + 20) == .success else {
            return XCTFail("the download never ended: \(stolen.withLock { $0 }) steals and counting")
        }
        assertSameBytes(try XCTUnwrap(outcome.withLock { $0 }).get().path, resource)
        XCTAssertLessThanOrEqual(stolen.withLock { $0 }, 8, "no piece passed back and forth")
    }

    /// From a server that waits 50 ms before every response, a reserved
    /// piece would cost each connection one more wait at the end: the first
    /// split runs to the end of the file, as without a reserve.
    func testADistantServersFileKeepsNoEndReserve() throws {
        let (size, split) = (Self.reserveFileSize, Self.reserveSplit)
        let resource = serveReserveFile(seed: 78)
        server.setLatency(0.05)
        let output = path("f")
        let run = try CLI.run(
            ["-q", "-n", "4", "--min-split", "256K", "-o", output, server.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let reserve = lastSplits(4, of: size, split: split).all
        XCTAssertTrue(
            server.requestedRanges.contains {
                $0.lowerBound < reserve.lowerBound && $0.upperBound > reserve.lowerBound
            },
            "a piece of the first split runs into the last MiB: \(server.requestedRanges)")
        XCTAssertFalse(
            server.requestedRanges.contains { reserve.contains($0.lowerBound) && $0.count == split },
            "no minimum split of it asked alone: \(server.requestedRanges)")
    }
}

/// The connections of a list are one limit, the shared loop's: a large file
/// gets those the small ones no longer need, and every slot taken is given back.
final class SharedLoopConnectionTests: EndToEndTestCase {
    /// Runs `rangeget -q --json ARGUMENTS -d out -i list` on a list of one
    /// large file then 3 small ones, at 2 MiB/s per connection; checks the
    /// exit status and the large file, and returns the per-file summaries.
    private func runList(largeSize: Int64, seed: UInt64, _ arguments: [String]) throws
        -> (files: [[String: Any]], small: [Resource])
    {
        let large = Resource.generated(size: largeSize, seed: seed)
        server.setResource(large, at: "large.bin")
        let small = (1...3).map { Resource.generated(size: 100_000, seed: seed + UInt64($0)) }
        for (index, resource) in small.enumerated() { server.setResource(resource, at: "s\(index).bin") }
        server.setRatePerConnection(2 << 20)
        let list = ([server.url("large.bin")] + small.indices.map { server.url("s\($0).bin") }).joined(separator: "\n")
        _ = FileManager.default.createFile(atPath: path("list"), contents: Data(list.utf8))
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
        let run = try CLI.run(
            ["-q", "--json"] + arguments + ["-d", path("out"), "-i", path("list")],
            in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("out/large.bin"), large)
        // The large file's object first (the lines come in the order the files ended).
        let files = try run.jsonLines().files
        return (
            files.filter { ($0["file"] as? String)?.hasSuffix("large.bin") == true }
                + files.filter { ($0["file"] as? String)?.hasSuffix("large.bin") != true }, small
        )
    }

    /// 1 x 8 MiB and 3 small files over `-n 4` at 2 MiB/s per connection: a
    /// static split gives the large file one connection (about 4 s); once the
    /// small ones are done it gets the other three.
    func testLargeFileOfAListTakesTheConnectionsTheSmallOnesNoLongerNeed() throws {
        let (files, small) = try runList(largeSize: 8 << 20, seed: 401, ["-n", "4"])
        for (index, resource) in small.enumerated() { assertSameBytes(path("out/s\(index).bin"), resource) }
        let used = try XCTUnwrap(files.first?["connectionsUsed"] as? Int, "\(files)")
        XCTAssertGreaterThanOrEqual(used, 3, "the large file ran on the connections the small ones freed: \(files)")
    }

    /// More files at once than connections (`-j 4 -n 2`): files wait for a
    /// slot, and once the small files are done the large one still gets
    /// both connections.
    func testMoreJobsThanConnectionsStillHandTheLastFileEveryConnection() throws {
        let (files, _) = try runList(largeSize: 6 << 20, seed: 420, ["-n", "2", "-j", "4"])
        XCTAssertEqual(files.first?["connectionsUsed"] as? Int, 2, "\(files)")
    }

    /// A file waiting out a backoff (503, Retry-After: 2) holds no slot and
    /// has none ready to use: the file after it gets the connections the
    /// list has. It counted as a file waiting for its first connection, to
    /// which every other file had to leave every free slot: the large file
    /// ran on one connection until the failing one gave up.
    func testAFileWaitingOutABackoffLeavesTheOthersEveryConnection() throws {
        let large = Resource.generated(size: 4 << 20, seed: 95)
        server.setResource(large, at: "large.bin")
        server.setRatePerConnection(2 << 20)
        // bad.bin's first request is answered, the rest get 503 (each after 0.1 s, so large.bin has begun).
        let busy = RangeServer(
            configuration: .init(latency: 0.1, faults: [FaultRule(.status(503, retryAfter: 2), when: .fromRequest(2))]))
        try busy.start()
        defer { busy.stop() }
        busy.setResource(Resource.generated(size: 2 << 20, seed: 96), at: "bad.bin")
        let list = [busy.url("bad.bin"), server.url("large.bin")].joined(separator: "\n")
        _ = FileManager.default.createFile(atPath: path("list"), contents: Data(list.utf8))
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
        let run = try CLI.run(
            [
                "-q", "--json", "-n", "4", "--min-split", "256K", "--retries", "1", "-d", path("out"),
                "-i", path("list")
            ], in: directory, timeout: 60)
        XCTAssertNotEqual(run.status, 0, "bad.bin fails")
        assertSameBytes(path("out/large.bin"), large)
        let files = try run.jsonLines().files
        let summary = try XCTUnwrap(files.first { ($0["file"] as? String)?.hasSuffix("large.bin") == true }, "\(files)")
        XCTAssertEqual(summary["connectionsUsed"] as? Int, 4, "\(files)")
    }

    /// Issue 36, the reserve half: a file of a near server keeps an end
    /// reserve, which waits behind its queued pieces' backoff (503 with
    /// Retry-After: 30). That file counted as one waiting for its first
    /// connection all the same, so the large file after it ran on one
    /// connection of 4 for the whole wait. The large file's server answers
    /// 0.3 s late, so the first file is in its wait before the large one
    /// plans; the run is interrupted once the large file is done.
    func testAFileWaitingOutABackoffWithAnEndReserveLeavesTheOthersEveryConnection() throws {
        let large = Resource.generated(size: 8 << 20, seed: 97)
        server.setResource(large, at: "large.bin")
        server.setRatePerConnection(4 << 20)
        server.setLatency(0.3)
        let busy = try anotherServer()
        busy.setResource(Resource.generated(size: 8 << 20, seed: 98), at: "bad.bin")
        busy.setFaults([FaultRule(.status(503, retryAfter: 30), when: .fromRequest(2))])
        let list = [busy.url("bad.bin"), server.url("large.bin")].joined(separator: "\n")
        _ = FileManager.default.createFile(atPath: path("list"), contents: Data(list.utf8))
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
        let child = try launch(["-q", "--json", "-n", "4", "--min-split", "256K", "-d", path("out"), "-i", path("list")]
        )
        let largeDone = wait(timeout: 20) {
            ((try? String(contentsOf: child.stdoutURL, encoding: .utf8)) ?? "").contains("large.bin")
        }
        kill(child.pid, SIGINT)
        let run = child.finish(timeout: 20)
        XCTAssertTrue(largeDone, "the large file ended before bad.bin's wait: \(run.stdout) \(run.stderr)")
        XCTAssertEqual(run.status, 130, "bad.bin was still waiting: \(run.stderr)")
        XCTAssertTrue(busy.statistics.requests.contains { $0.fault != nil }, "bad.bin's pieces were refused")
        assertSameBytes(path("out/large.bin"), large)
        let files = try run.jsonLines().files
        let summary = try XCTUnwrap(files.first { ($0["file"] as? String)?.hasSuffix("large.bin") == true }, "\(files)")
        XCTAssertGreaterThanOrEqual(summary["connectionsUsed"] as? Int ?? 0, 3, "\(files)")
    }

    /// Two downloads of 4 connections each sharing a loop of 3, cut now and
    /// then: both complete, never more than 3 transfers ran at once, and
    /// afterwards every slot is back.
    func testTheSharedLoopBoundsTheConnectionsAndGetsEverySlotBack() throws {
        let resources = (0..<2).map { Resource.generated(size: 4 << 20, seed: 410 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: "f\(index)") }
        server.setRatePerConnection(4 << 20)
        server.setFaults([FaultRule(.cutAfter(200_000), when: .probability(0.3, seed: 5))])
        let session = DownloadSession(configuration: .init(connections: 3))
        let outcomes = Mutex<[Int: Result<DownloadResult, DownloadError>]>([:])
        let urls = (0..<2).map { server.url("f\($0)") }
        let outputs = (0..<2).map { path("f\($0)") }
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            var options = DownloadOptions()
            options.connections = 4
            options.retries = 20
            options.retryWait = 0.01
            let download = session.download(from: urls[index], to: .file(outputs[index]), options: options)
            let outcome = Result { () throws(DownloadError) in try download.run { _ in } }
            outcomes.withLock { $0[index] = outcome }
        }
        for index in 0..<2 {
            if case let .failure(error)? = outcomes.withLock({ $0[index] }) { XCTFail("download \(index): \(error)") }
            assertSameBytes(path("f\(index)"), resources[index])
        }
        let loop = try session.transferLoop()
        XCTAssertEqual(loop.peakConnectionsInUse, 3, "both downloads wanted 4: the loop's limit of 3 bound them")
        XCTAssertEqual(loop.connectionsInUse, 0, "no transfer is left running")
        XCTAssertEqual(loop.slotsTaken, 0, "every slot taken was given back")
    }

    /// Issue 36 (f): a free connection that takes over the whole rest of a
    /// stalled transfer ends that transfer after its own slot was taken, and
    /// both slots went back to the loop: the thief ran on none, so the
    /// loop's limit was exceeded by one, which its peak (counted in slots)
    /// did not show. One download of 3 connections on a loop of 2, its
    /// second request silent after 64 KiB: when the first connection is
    /// done with its piece, the silent one's rest is taken over whole.
    func testTakingOverAStalledTransfersWholeRestKeepsTheLoopsLimit() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 99)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        server.setFaults([FaultRule(.stallAfter(64 << 10), when: .nthRequest(2))])
        let session = DownloadSession(configuration: .init(connections: 2))
        let loop = try session.transferLoop()
        var options = DownloadOptions()
        options.connections = 3
        options.minimumSplit = 256 << 10
        let steals = Mutex<[ByteRange]>([])
        let result = try session.download(from: server.url("f"), to: .file(path("f")), options: options).run { event in
            if case let .transfer(.stolen(_, range)) = event { steals.withLock { $0.append(range) } }
        }
        assertSameBytes(result.path, resource)
        let stalled = try XCTUnwrap(server.requestedRanges.dropFirst().first, "the second request")
        XCTAssertTrue(
            steals.withLock { $0 }.contains(ByteRange(stalled.lowerBound + (64 << 10), stalled.upperBound)),
            "the stalled transfer's whole rest was taken over: \(steals.withLock { $0 }), stalled \(stalled)")
        XCTAssertEqual(loop.peakConnectionsInUse, 2, "the download wanted 3: the loop's limit of 2 bound it")
        XCTAssertEqual(loop.slotsTaken, 0, "every slot taken was given back")
    }

    /// A list's loop lends the connection of a file whose body came whole to
    /// the next file's opening (issue 15), and the reused handle asks for the
    /// next file: its path, and the credentials of its own URL only.
    func testAListsLoopLendsAFinishedOpeningsHandleToTheNextFile() throws {
        let count = 12
        let resources = (0..<count).map { Resource.generated(size: 16 << 10, seed: 430 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: "f\(index)") }
        let session = DownloadSession(configuration: .init(connections: 2))
        let loop = try session.transferLoop()
        loop.recycleConnections(upTo: 4)
        let options = DownloadOptions()
        for index in 0..<count {
            let url =
                index % 3 == 0
                ? server.url("f\(index)").replacingOccurrences(of: "http://", with: "http://u\(index):p\(index)@")
                : server.url("f\(index)")
            let download = session.download(from: url, to: .file(path("f\(index)")), options: options)
            _ = try download.run { _ in }
            assertSameBytes(path("f\(index)"), resources[index])
        }
        XCTAssertEqual(loop.connectionsRecycled, count - 1, "every file after the first took the handle before it")
        for index in 0..<count {
            let sent = server.statistics.requests(to: "f\(index)")
            XCTAssertEqual(sent.map(\.method), ["GET"], "f\(index): one request, the opening")
            let expected = index % 3 == 0 ? "Basic " + Data("u\(index):p\(index)".utf8).base64EncodedString() : nil
            XCTAssertEqual(sent.first?.headers["authorization"], expected, "f\(index)")
        }
    }
}
