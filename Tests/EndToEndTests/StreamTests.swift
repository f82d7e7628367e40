// Streaming in order (issue 17): `rangeget -o - URL` writes the file to
// stdout in order while several connections fetch ahead inside a window,
// and `Download.bytes(from:)` gives the same bytes to Swift code as an
// async sequence. Checked against the loopback server: the bytes and their
// order, the window's bound (the engine's own accounting, and what the
// server sent against what the reader read), a pipe closed early, a checksum
// that does not match, a stall at the head of the window, a server without
// ranges, and cancelling the consuming task or leaving its loop early (the
// one @testable look: whether the window still holds its memory).
import Foundation
import RangeServer
import XCTest

@testable import RangeGet

final class StreamTests: EndToEndTestCase {
    /// Serves a generated file of `size` bytes at "f", each connection capped at `rate` when given, with `faults`.
    @discardableResult
    private func serveFile(size: Int64, seed: UInt64, rate: Int? = nil, faults: [FaultRule] = []) -> Resource {
        let resource = Resource.generated(size: size, seed: seed)
        server.setResource(resource, at: "f")
        if let rate { server.setRatePerConnection(rate) }
        if !faults.isEmpty { server.setFaults(faults) }
        return resource
    }

    /// `Download.bytes(from:)` of a 256 MiB file at 8 MiB/s per connection,
    /// over 4 connections inside a 4 MiB window: far from its end when a test stops it.
    private func largeThrottledStream(seed: UInt64) -> (DownloadStream, Resource) {
        let resource = serveFile(size: 256 << 20, seed: seed, rate: 8 << 20)
        var options = DownloadOptions()
        options.connections = 4
        options.streamWindow = 4 << 20
        return (Download.bytes(from: server.url("f"), options: options), resource)
    }

    /// Runs `rangeget ARGUMENTS` with stdout to a file; its status, the file's path and stderr.
    private func runToFile(_ arguments: [String], timeout: Double = 60) throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        let child = try Child(executable: CLI.binary, arguments: arguments, in: directory)
        XCTAssertTrue(
            wait(timeout: timeout) { !child.isRunning }, "rangeget \(arguments) did not finish within \(timeout) s")
        child.kill9()
        let kept = path("stdout-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: child.stdoutURL.path, toPath: kept)
        let run = child.finish(timeout: 1)
        return (run.status, kept, run.stderr)
    }

    /// Starts `rangeget ARGUMENTS` with stdout on a pipe this test reads,
    /// and SIGPIPE at its default action (death), as a shell starts it: the
    /// test process ignores SIGPIPE, and a child would inherit that.
    private func startPiped(_ arguments: [String]) throws -> (Process, FileHandle) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["--default-signal=PIPE", CLI.binary] + arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        try pipe.fileHandleForWriting.close()
        return (process, pipe.fileHandleForReading)
    }

    /// Reads exactly `count` bytes from `handle` (fewer only at its end).
    private func read(_ count: Int, from handle: FileHandle) -> [UInt8] {
        var bytes: [UInt8] = []
        while bytes.count < count {
            let data = handle.readData(ofLength: count - bytes.count)
            if data.isEmpty { break }
            bytes += data
        }
        return bytes
    }

    private func waitForExit(_ process: Process, within seconds: Double) -> Bool {
        wait(timeout: seconds) { !process.isRunning }
    }

    /// Many small pieces over connections of different speed finish out of
    /// order; stdout still gets every byte in order, and nothing else.
    func testStdoutGetsTheFileInOrder() throws {
        let resource = serveFile(size: 24 << 20, seed: 1701, rate: 12 << 20)
        let run = try runToFile(["-n", "8", "--min-split", "256K", "--window", "2M", "-o", "-", server.url("f")])
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(run.stdout, resource)
        XCTAssertTrue(run.stderr.contains("streamed 24.0 MiB to stdout"), run.stderr)
        let ranged = server.statistics.requests.filter { $0.rangeHeader != nil }
        XCTAssertGreaterThan(ranged.count, 8, "the file came in many pieces: \(ranged.count) requests")
    }

    /// The reader stops after 1000 bytes (`| head -c 1000`): exit 0 at
    /// once, nothing on stderr with -q, and the transfers stop rather than
    /// run to the end of the file.
    func testAClosedPipeEndsTheRunQuietlyAndStopsTheTransfers() throws {
        let resource = serveFile(size: 256 << 20, seed: 1702, rate: 16 << 20)
        let (process, handle) = try startPiped(["-q", "-n", "4", "--window", "4M", "-o", "-", server.url("f")])
        XCTAssertEqual(read(1000, from: handle), resource.bytes(in: 0..<1000))
        try handle.close()
        XCTAssertTrue(waitForExit(process, within: 5), "rangeget kept running after the pipe closed")
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .exit)
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertTrue(wait(timeout: 5) { server.openConnections == 0 }, "connections still open")
        let sent = server.statistics.bodyBytesSent
        XCTAssertLessThan(sent, 32 << 20, "the transfers went on after the pipe closed: \(sent) bytes sent")
    }

    /// A reader slower than the connections: fetching waits for it, so the
    /// server never sends more than the reader took plus the window.
    func testASlowReaderHoldsTheFetchingBack() throws {
        let resource = serveFile(size: 64 << 20, seed: 1703)
        let window: Int64 = 4 << 20
        let (process, handle) = try startPiped([
            "-q", "-n", "4", "--min-split", "256K", "--window", "4M", "-o", "-",
            server.url("f")
        ])
        defer { if process.isRunning { process.terminate() } }
        var taken: Int64 = 0
        for _ in 0..<16 {
            let bytes = read(512 << 10, from: handle)
            XCTAssertEqual(bytes, resource.bytes(in: taken..<(taken + Int64(bytes.count))))
            taken += Int64(bytes.count)
            usleep(50_000)
            // The pipe holds up to 64 KiB more than this test took.
            let sent = server.statistics.bodyBytesSent
            XCTAssertLessThanOrEqual(sent, taken + (64 << 10) + window + (1 << 20), "sent \(sent) with \(taken) read")
        }
        try handle.close()
        XCTAssertTrue(waitForExit(process, within: 5))
    }

    /// `--checksum` is computed as the bytes go out and decides the exit code: 3 when it differs.
    func testAChecksumMismatchOnAStreamExitsWithVerificationFailed() throws {
        let resource = serveFile(size: 6 << 20, seed: 1704)
        let wrong = String(repeating: "0", count: 64)
        let failed = try runToFile(["-n", "4", "--checksum", "sha256=\(wrong)", "-o", "-", server.url("f")])
        XCTAssertEqual(failed.status, 3, failed.stderr)
        XCTAssertTrue(
            failed.stderr.contains("sha256 of the stream is \(try sha256(of: resource)), expected \(wrong)"),
            failed.stderr)
        assertSameBytes(failed.stdout, resource)
        let right = try runToFile([
            "-n", "4", "--checksum", "sha256=\(try sha256(of: resource))", "-o", "-", server.url("f")
        ])
        XCTAssertEqual(right.status, 0, right.stderr)
        assertSameBytes(right.stdout, resource)
    }

    /// The first transfer, at the head of the window, goes silent: the
    /// reader waits on it, so a free connection takes its bytes over long
    /// before the stall timeout, without cutting the transfers behind it.
    func testAStallAtTheHeadOfTheWindowIsRecovered() throws {
        let resource = serveFile(
            size: 24 << 20, seed: 1705, rate: 16 << 20,
            faults: [FaultRule(.stallAfter(100_000), when: .nthRequest(1))])
        let started = Date()
        let run = try runToFile([
            "-n", "4", "--min-split", "256K", "--stall-timeout", "10", "--window", "8M", "-o", "-",
            server.url("f")
        ])
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(run.stdout, resource)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "waited for the stall timeout")
        XCTAssertTrue(run.stderr.contains("TCP connections"), run.stderr)
        let connections = try XCTUnwrap(run.stderr.firstMatch(of: /(\d+) TCP connections/)?.1).description
        XCTAssertLessThanOrEqual(Int(connections) ?? 99, 6, "transfers behind the head were cut: \(run.stderr)")
    }

    /// A server without ranges: one stream, in order.
    func testWithoutRangesTheFileIsOneStream() throws {
        let resource = serveFile(size: 5 << 20, seed: 1706, faults: [FaultRule(.acceptRangesNone)])
        let run = try runToFile(["-n", "8", "-o", "-", server.url("f")])
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(run.stdout, resource)
        XCTAssertEqual(
            server.statistics.requests.filter { $0.method == "GET" }.count, 1,
            "\(server.statistics.requests)")
    }

    /// Two mirrors of one file feed one stream: every byte in order, and both served some.
    func testMirrorsFeedOneStream() throws {
        let resource = serveFile(size: 16 << 20, seed: 1710, rate: 4 << 20)
        let other = try anotherServer()
        other.setResource(resource, at: "f")
        other.setRatePerConnection(4 << 20)
        let run = try runToFile([
            "-n", "6", "--min-split", "256K", "--window", "4M", "-o", "-", server.url("f"), other.url("f")
        ])
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(run.stdout, resource)
        XCTAssertGreaterThan(server.statistics.bodyBytesSent, 0)
        XCTAssertGreaterThan(other.statistics.bodyBytesSent, 0, "the second mirror served nothing")
    }

    /// Responses cut at random points are retried; the stream still gets every byte once, in order.
    func testCutResponsesAreRetriedWithinTheStream() throws {
        let resource = serveFile(
            size: 12 << 20, seed: 1711,
            faults: [FaultRule(.cutAtRandom(seed: 9), when: .probability(0.3, seed: 4))])
        let run = try runToFile([
            "-n", "4", "--min-split", "256K", "--window", "4M", "--retry-wait", "0.01", "-o", "-",
            server.url("f")
        ])
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(run.stdout, resource)
    }

    /// The file changes after the reader has taken bytes: they cannot be
    /// taken back, so the download fails (exit 3) instead of splicing two versions.
    func testAFileThatChangesAfterBytesWentOutFailsTheStream() throws {
        let resource = serveFile(
            size: 16 << 20, seed: 1712, rate: 8 << 20,
            faults: [FaultRule(.changeContent, when: .nthRequest(12))])
        let run = try runToFile(["-n", "4", "--min-split", "256K", "--window", "2M", "-o", "-", server.url("f")])
        XCTAssertEqual(run.status, 3, run.stderr)
        XCTAssertTrue(run.stderr.contains("a stream cannot take them back"), run.stderr)
        // What went out is a prefix of the first version, never bytes of the second.
        let written = try XCTUnwrap(FileManager.default.contents(atPath: run.stdout))
        XCTAssertGreaterThan(written.count, 0)
        XCTAssertEqual([UInt8](written), resource.bytes(in: 0..<Int64(written.count)))
    }

    func testJSONIsRefusedWhenStdoutCarriesTheFile() throws {
        let run = try CLI.run(["--json", "-o", "-", server.url("f")], in: directory)
        XCTAssertEqual(run.status, 2)
        XCTAssertTrue(run.stderr.contains("--json prints on stdout, which -o - fills with the file"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("-")))
    }

    // MARK: - The library

    /// `Download.bytes(from:)` with a reader slower than the connections:
    /// every byte in order, and the window never held more than its size.
    /// Issue 38, item 4: iterating a stream throws `DownloadError` itself,
    /// so `for try await` compiles inside a `throws(DownloadError)` function
    /// (the iterator threw `any Error`) and its failure needs no cast.
    private func count(_ stream: DownloadStream) async throws(DownloadError) -> Int64 {
        var bytes: Int64 = 0
        for try await chunk in stream { bytes += Int64(chunk.count) }
        return bytes
    }

    func testATypedThrowsFunctionIteratesAStream() async throws {
        let resource = serveFile(size: 3 << 20, seed: 1711)
        let total = try await count(Download.bytes(from: server.url("f")))
        XCTAssertEqual(total, resource.size)
        do {
            _ = try await count(Download.bytes(from: server.url("missing")))
            XCTFail("a 404 ends the stream")
        } catch {
            XCTAssertEqual(error.httpStatus, 404, "\(error)")
        }
    }

    func testLibrarySequenceIsInOrderWithinItsWindow() async throws {
        let resource = serveFile(size: 12 << 20, seed: 1707)
        var options = DownloadOptions()
        options.connections = 4
        options.minimumSplit = 256 << 10
        options.streamWindow = 2 << 20
        let stream = Download.bytes(from: server.url("f"), options: options)
        var offset: Int64 = 0
        for try await chunk in stream {
            XCTAssertEqual(chunk, resource.bytes(in: offset..<(offset + Int64(chunk.count))), "at \(offset)")
            offset += Int64(chunk.count)
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        XCTAssertEqual(offset, resource.size)
        XCTAssertGreaterThan(stream.peakBytesHeld, 0)
        XCTAssertLessThanOrEqual(stream.peakBytesHeld, 2 << 20)
        guard case .finished = stream.download.state else { return XCTFail("\(stream.download.state)") }
    }

    /// `pause()` on a stream stops its transfers; `resume()` goes on from the
    /// bytes the window holds, and the reader gets every byte once, in order.
    func testPausedStreamResumesWhereItStopped() async throws {
        let resource = serveFile(size: 32 << 20, seed: 1709, rate: 8 << 20)
        var options = DownloadOptions()
        options.connections = 4
        options.minimumSplit = 256 << 10
        options.streamWindow = 4 << 20
        let stream = Download.bytes(from: server.url("f"), options: options)
        var offset: Int64 = 0
        var paused = false
        for try await chunk in stream {
            XCTAssertEqual(chunk, resource.bytes(in: offset..<(offset + Int64(chunk.count))), "at \(offset)")
            offset += Int64(chunk.count)
            if !paused, offset >= 4 << 20 {
                paused = true
                stream.download.pause()
                XCTAssertTrue(wait(timeout: 5) { stream.download.state == .paused }, "\(stream.download.state)")
                let sent = server.statistics.bodyBytesSent
                usleep(300_000)
                // (What the server wrote before it saw the connections close may still be counted.)
                XCTAssertLessThan(server.statistics.bodyBytesSent - sent, 1 << 20, "bytes kept coming while paused")
                stream.download.resume()
            }
        }
        XCTAssertTrue(paused)
        XCTAssertEqual(offset, resource.size)
        XCTAssertLessThan(server.statistics.bodyBytesSent, resource.size + (4 << 20), "fetched again after the resume")
    }

    /// Issue 36: a `break` out of the loop, the stream still held, left the
    /// download running and its window full until `cancel()` or the
    /// stream's release. Now the end of the iteration cancels it, as
    /// URLSession's `AsyncBytes` does; and the stream is read once, so a
    /// second loop over it is refused.
    func testBreakingOutOfTheLoopCancelsTheDownload() async throws {
        let (stream, resource) = largeThrottledStream(seed: 1713)
        for try await chunk in stream {
            XCTAssertEqual(chunk, resource.bytes(in: 0..<Int64(chunk.count)))
            break
        }
        XCTAssertFalse(stream.window.holdsRing, "the window's memory is still held")
        XCTAssertTrue(
            wait(timeout: 5) { stream.download.state == .cancelled(keptResumeState: false) },
            "\(stream.download.state)")
        XCTAssertTrue(wait(timeout: 5) { server.openConnections == 0 }, "connections still open")
        XCTAssertLessThan(server.statistics.bodyBytesSent, 64 << 20, "the transfers went on after the break")
        do {
            for try await _ in stream {
                XCTFail("a second loop read a chunk")
                break
            }
            XCTFail("a second loop ended normally")
        } catch {
            guard case let .usage(message, _) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("read once"), message)
        }
    }

    /// Issue 36: a stream keeps nothing, yet its interruption said "the
    /// partial download is kept for a later download to resume", and a
    /// stream stopped with `stop()` (which keeps a file's resume state)
    /// said `.cancelled(keptResumeState: true)`.
    func testAStoppedStreamSaysNothingIsKept() async throws {
        let (stream, _) = largeThrottledStream(seed: 1714)
        do {
            for try await _ in stream { stream.download.stop() }
            XCTFail("the stream ended normally")
        } catch {
            XCTAssertEqual(error, .interrupted(keptResumeState: false))
            XCTAssertEqual(error.description, "interrupted; nothing is kept for a later download to resume")
        }
        XCTAssertEqual(stream.download.state, .cancelled(keptResumeState: false))
    }

    /// Cancelling the task that iterates stops the transfers.
    func testCancellingTheConsumingTaskStopsTheTransfers() async throws {
        let (stream, _) = largeThrottledStream(seed: 1708)
        let firstChunk = expectation(description: "first chunk")
        let task = Task {
            var count: Int64 = 0
            for try await chunk in stream {
                if count == 0 { firstChunk.fulfill() }
                count += Int64(chunk.count)
            }
            return count
        }
        await fulfillment(of: [firstChunk], timeout: 10)
        task.cancel()
        do {
            let count = try await task.value
            XCTFail("the sequence ended normally after \(count) bytes")
        } catch let error as DownloadError {
            XCTAssertEqual(error, .interrupted(keptResumeState: false))
        }
        XCTAssertTrue(wait(timeout: 5) { server.openConnections == 0 }, "connections still open")
        let sent = server.statistics.bodyBytesSent
        XCTAssertLessThan(sent, 64 << 20, "the transfers went on after the cancel: \(sent) bytes sent")
    }
}
