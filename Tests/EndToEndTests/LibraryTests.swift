// The library's public API (issue 6), driven as an app would drive it: async
// run, events as an async sequence, pause and resume mid-download, cancel
// with and without resume state, a resume in a fresh process (the example
// executable), and small files in memory. No @testable import.
// One file above 350 lines: one tour of the API on the shared helpers below.
import Foundation
import RangeGet
import RangeServer
import Synchronization
import SystemSupport
import XCTest

final class LibraryTests: EndToEndTestCase {
    private let size: Int64 = 8 << 20
    private let rate = 1 << 20 // per connection: the whole file takes about 2 s

    private var throttledOptions: DownloadOptions {
        var options = DownloadOptions()
        options.connections = 4
        options.minimumSplit = 256 << 10
        return options
    }

    /// A throttled download of a fresh resource, with its events being watched.
    private func throttledDownload(seed: UInt64) -> (Download, Resource, Watch) {
        let resource = Resource.generated(size: size, seed: seed)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(rate)
        let download = Download(url: server.url("f"), destination: .file(path("f")), options: throttledOptions)
        return (download, resource, Watch(download.events))
    }

    /// Consumes an event sequence: the latest bytes done, and every event once the sequence ends.
    private final class Watch: Sendable {
        private final class Latest: Sendable {
            let bytesDone = Atomic<Int64>(0)
        }

        private let latest = Latest()
        private let task: Task<[DownloadEvent], Never>

        init(_ events: AsyncStream<DownloadEvent>) {
            let latest = self.latest
            task = Task {
                var seen: [DownloadEvent] = []
                for await event in events {
                    if case let .progress(progress) = event {
                        latest.bytesDone.store(progress.bytesDone, ordering: .relaxed)
                    }
                    seen.append(event)
                }
                return seen
            }
        }

        var bytesDone: Int64 { latest.bytesDone.load(ordering: .relaxed) }

        /// Every event, once the download has ended.
        var events: [DownloadEvent] {
            get async { await task.value }
        }
    }

    /// Waits, without blocking a thread, until `condition` holds; fails after `timeout` seconds.
    private func waitUntil(
        _ what: String, timeout: Double = 20, file: StaticString = #filePath, line: UInt = #line,
        _ condition: () -> Bool
    ) async {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        XCTAssertTrue(condition(), "timed out waiting until \(what)", file: file, line: line)
    }

    private func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Asserts that `run()` throws `.interrupted`, saying whether the partial download was kept.
    private func assertInterrupted(
        _ download: Download, keptResumeState: Bool, file: StaticString = #filePath,
        line: UInt = #line
    ) async {
        do {
            let result = try await download.run()
            XCTFail("completed instead of being interrupted: \(result)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, .interrupted(keptResumeState: keptResumeState), file: file, line: line)
        }
    }

    // MARK: - Pause and resume

    func testPauseAndResumeMidDownloadGiveTheSameFile() async throws {
        let (download, resource, watch) = throttledDownload(seed: 81)
        let output = path("f")
        XCTAssertEqual(download.state, .ready)
        download.start()
        await waitUntil("2 MiB arrived") { watch.bytesDone >= 2 << 20 }

        download.pause()
        await waitUntil("paused") { download.state == .paused }
        let saved = ManifestFile.doneBytes(output + ".part.json")
        XCTAssertGreaterThanOrEqual(saved, 2 << 20, "the pause saved every byte that had arrived")
        XCTAssertLessThan(saved, size, "paused mid-download")
        let done = ManifestFile.done(output + ".part.json")
        // Every connection is closed (the server sees none open), so nothing
        // more can arrive while paused. (Reading the server's connection count
        // twice around this check, as before, could never fail: it is gone.)
        await waitUntil("every connection closed") { self.server.openConnections == 0 }
        XCTAssertEqual(download.state, .paused)
        server.resetStatistics()
        download.resume()
        let result = try await download.run()
        assertSameBytes(output, resource)
        XCTAssertFalse(exists(output + ".part") || exists(output + ".part.json"), "no leftovers")
        XCTAssertEqual(result.size, size)
        XCTAssertEqual(result.bytesReused, 0, "nothing came from an earlier run")
        XCTAssertGreaterThanOrEqual(result.bytesFetched, size)
        XCTAssertEqual(download.state, .finished(result))

        assertNotAskedAgain(done, in: server.requestedRanges, saved: "at the pause")
        let events = await watch.events
        let resumed = events.compactMap { event -> Int64? in
            if case let .reusing(bytes) = event { return bytes }
            return nil
        }
        XCTAssertEqual(resumed, [saved], "the resume reused the bytes saved at the pause")
        XCTAssertEqual(events.filter(isProbed).count, 2, "probed again on resume")
        let controls = events.compactMap { event -> String? in
            switch event {
            case .paused: return "paused"
            case .resumed: return "resumed"
            case .probed: return "probed"
            default: return nil
            }
        }
        XCTAssertEqual(
            controls, ["probed", "paused", "resumed", "probed"], "the pause and the resume are announced in order")
    }

    func testResumeWhilePausingContinuesAndPauseIsIgnoredWhenNotRunning() async throws {
        let (download, resource, watch) = throttledDownload(seed: 82)
        download.pause()
        XCTAssertEqual(download.state, .ready, "pause before start does nothing")
        download.start()
        await waitUntil("1 MiB arrived") { watch.bytesDone >= 1 << 20 }
        download.pause()
        download.resume()
        download.pause()
        download.resume()
        let result = try await download.run()
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(download.state, .finished(result))
        download.pause()
        download.resume()
        XCTAssertEqual(download.state, .finished(result), "control after the end changes nothing")
    }

    // MARK: - Cancel

    /// NSURLSession's resume data lives only in memory; here the state on disk
    /// lets another process continue without refetching a finished byte.
    func testCancelKeepingResumeStateThenAFreshProcessResumes() async throws {
        let (download, resource, watch) = throttledDownload(seed: 83)
        let output = path("f")
        download.start()
        await waitUntil("2 MiB arrived") { watch.bytesDone >= 2 << 20 }
        download.cancel(keepingResumeState: true)
        await assertInterrupted(download, keptResumeState: true)
        XCTAssertEqual(download.state, .cancelled(keptResumeState: true))
        XCTAssertTrue(exists(output + ".part"))
        let saved = ManifestFile.doneBytes(output + ".part.json")
        XCTAssertGreaterThanOrEqual(saved, 2 << 20, "the cancel saved every byte that had arrived")
        XCTAssertLessThan(saved, size)
        let done = ManifestFile.done(output + ".part.json")

        server.setRatePerConnection(nil)
        server.resetStatistics()
        let run = try CLI.run(["-n", "4", server.url("f"), output], in: directory, timeout: 60, executable: CLI.example)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("resuming: \(saved) bytes already done"), run.stdout)
        assertSameBytes(output, resource)
        XCTAssertFalse(exists(output + ".part.json"))

        let requested = server.requestedRanges
        XCTAssertFalse(requested.isEmpty)
        assertNotAskedAgain(done, in: requested, saved: "in the manifest")
        XCTAssertEqual(covered(requested + done), [0..<size], "the missing bytes were asked for")
        XCTAssertEqual(
            server.statistics.requests.filter { $0.method == "GET" && $0.rangeHeader == nil }.count, 0,
            "no whole-file GET")
    }

    func testCancelDiscardsThePartialDownload() async throws {
        let (download, _, watch) = throttledDownload(seed: 84)
        let output = path("f")
        download.start()
        await waitUntil("1 MiB arrived") { watch.bytesDone >= 1 << 20 }
        download.cancel()
        await assertInterrupted(download, keptResumeState: false)
        XCTAssertEqual(download.state, .cancelled(keptResumeState: false))
        XCTAssertFalse(exists(output + ".part"), ".part deleted")
        XCTAssertFalse(exists(output + ".part.json"), "manifest deleted")
        XCTAssertFalse(exists(output))
        // Every connection is closed: nothing more can be transferred.
        await waitUntil("every connection closed") { self.server.openConnections == 0 }
    }

    func testCancelWhilePausedDiscardsAtOnce() async throws {
        let (download, _, watch) = throttledDownload(seed: 85)
        let output = path("f")
        download.start()
        await waitUntil("1 MiB arrived") { watch.bytesDone >= 1 << 20 }
        download.pause()
        await waitUntil("paused") { download.state == .paused }
        XCTAssertTrue(exists(output + ".part.json"), "paused with its state on disk")
        download.cancel()
        XCTAssertEqual(download.state, .cancelled(keptResumeState: false))
        XCTAssertFalse(exists(output + ".part") || exists(output + ".part.json"), "deleted before cancel() returned")
        await assertInterrupted(download, keptResumeState: false)
        let events = await watch.events
        XCTAssertFalse(events.contains { if case .finished = $0 { return true } else { return false } })
        download.resume()
        XCTAssertEqual(download.state, .cancelled(keptResumeState: false), "no resume after a cancel")
    }

    /// `stop()` while a `start()`ed download is paused: no thread drives it,
    /// and `stop()` dropped the end that `cancel` carries out itself then,
    /// leaving the download between paused and cancelled for good, and
    /// `run()` waiting (issue 36). It ends as `cancel(keepingResumeState: true)`.
    func testStopWhilePausedEndsAtOnceKeepingResumeState() async throws {
        let (download, _, watch) = throttledDownload(seed: 94)
        download.start()
        await waitUntil("1 MiB arrived") { watch.bytesDone >= 1 << 20 }
        download.pause()
        await waitUntil("paused") { download.state == .paused }
        XCTAssertFalse(download.stop(), "no transfer was running")
        guard download.state == .cancelled(keptResumeState: true) else {
            return XCTFail("\(download.state) after stop()")
        }
        await assertInterrupted(download, keptResumeState: true)
        XCTAssertGreaterThan(ManifestFile.doneBytes(path("f.part.json")), 0, "the resume state is kept")
    }

    /// Issue 36: after `cancel()`, which deletes the partial download, the
    /// error said "the partial download is kept for a later download to
    /// resume". The error and its message now say what is left: nothing
    /// after `cancel()`, the partial download after `stop()`.
    func testTheInterruptionSaysWhetherThePartialDownloadWasKept() async throws {
        for keep in [false, true] {
            let (download, _, watch) = throttledDownload(seed: keep ? 95 : 96)
            download.start()
            await waitUntil("1 MiB arrived") { watch.bytesDone >= 1 << 20 }
            if keep { download.stop() } else { download.cancel() }
            do {
                let result = try await download.run()
                XCTFail("completed instead of being interrupted: \(result)")
            } catch {
                XCTAssertEqual(error, .interrupted(keptResumeState: keep))
                XCTAssertEqual(
                    error.description,
                    keep
                        ? "interrupted; the partial download is kept for a later download to resume"
                        : "interrupted; nothing is kept for a later download to resume")
            }
            XCTAssertEqual(download.state, .cancelled(keptResumeState: keep))
            XCTAssertEqual(exists(path("f.part")), keep, "the data file")
            XCTAssertEqual(exists(path("f.part.json")), keep, "the manifest")
        }
    }

    func testCancellingTheAwaitingTaskKeepsResumeState() async throws {
        let (download, _, watch) = throttledDownload(seed: 86)
        let output = path("f")
        let task = Task { () async throws(DownloadError) -> DownloadResult in try await download.run() }
        await waitUntil("1 MiB arrived") { watch.bytesDone >= 1 << 20 }
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("completed despite the cancelled task")
        } catch {
            XCTAssertEqual(error as? DownloadError, .interrupted(keptResumeState: true))
        }
        XCTAssertEqual(download.state, .cancelled(keptResumeState: true))
        XCTAssertGreaterThan(ManifestFile.doneBytes(output + ".part.json"), 0)
    }

    func testRunInAnAlreadyCancelledTaskFetchesNothing() async throws {
        server.setResource(Resource.generated(size: 1 << 20, seed: 91), at: "f")
        let download = Download(url: server.url("f"), destination: .file(path("f")))
        let task = Task { () async throws(DownloadError) -> DownloadResult in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await download.run()
        }
        do {
            _ = try await task.value
            XCTFail("completed despite the cancelled task")
        } catch {
            XCTAssertEqual(error as? DownloadError, .interrupted(keptResumeState: true))
        }
        XCTAssertEqual(download.state, .cancelled(keptResumeState: true))
        XCTAssertTrue(server.statistics.requests.isEmpty, "not even probed")
        XCTAssertFalse(exists(path("f.part")))
    }

    /// Counts a run cannot work with are refused before any request, to a
    /// file and to a reader alike: before, no connection (or none per host)
    /// left a run idle for good, and an empty minimum split made a stream
    /// plan empty pieces, and ask for them, without end.
    func testUnusableCountsAreRefusedBeforeAnyRequest() async throws {
        try await assertRefusedBeforeAnyRequest([
            ("connections must be at least 1", { $0.connections = 0 }),
            ("maxPerHost must be at least 1", { $0.maxPerHost = 0 }),
            ("minimumSplit must be at least 1", { $0.minimumSplit = 0 })
        ])
    }

    /// Times a run cannot work with are refused the same way: an infinite,
    /// NaN or huge (1e16 s) timeout trapped converting to milliseconds for
    /// libcurl, and a retry delay that is NaN, negative or infinite left a
    /// failed piece never ready again, the run polling for good.
    func testUnusableTimesAreRefusedBeforeAnyRequest() async throws {
        var settings: [(String, (inout DownloadOptions) -> Void)] = []
        for value in [Double.infinity, 1e16, .nan, 0, -1] {
            settings += [
                ("connectTimeout must be from", { $0.transfer.connectTimeout = value }),
                ("stallTimeout must be from", { $0.transfer.stallTimeout = value })
            ]
        }
        for value in [Double.infinity, .nan, -1] {
            settings += [
                ("retryWait must be a finite", { $0.retryWait = value }),
                ("retryWaitLimit must be a finite", { $0.retryWaitLimit = value })
            ]
        }
        try await assertRefusedBeforeAnyRequest(settings)
    }

    /// Runs a download to a file and one to a reader with each change made
    /// to the defaults, and checks both fail with a usage error that starts
    /// with its text, before any request and before any `.part` is made.
    private func assertRefusedBeforeAnyRequest(
        _ settings: [(String, (inout DownloadOptions) -> Void)], line: UInt = #line
    ) async throws {
        server.setResource(Resource.generated(size: 64 << 10, seed: 92), at: "f")
        for (expected, change) in settings {
            var options = DownloadOptions()
            change(&options)
            XCTAssertThrowsError(
                try Download(url: server.url("f"), destination: .file(path("f")), options: options)
                    .run { _ in }, line: line
            ) { error in
                guard case let .usage(message, _)? = error as? DownloadError else {
                    return XCTFail("\(error)", line: line)
                }
                XCTAssertTrue(message.hasPrefix(expected), message, line: line)
            }
            do {
                for try await _ in Download.bytes(from: server.url("f"), options: options) {}
                XCTFail("\(expected): the stream ran", line: line)
            } catch {
                guard case let .usage(message, _) = error else { return XCTFail("\(error)", line: line) }
                XCTAssertTrue(message.hasPrefix(expected), message, line: line)
            }
        }
        XCTAssertTrue(
            server.statistics.requests.isEmpty, "not even probed: \(server.statistics.requests.count)", line: line)
        XCTAssertFalse(exists(path("f.part")), line: line)
    }

    /// The blocking form the CLI uses: a pause holds the calling thread until `resume()`.
    func testBlockingRunWaitsWhilePausedAndFinishesAfterResume() throws {
        let (download, resource, watch) = throttledDownload(seed: 92)
        let outcome = Mutex<Result<DownloadResult, DownloadError>?>(nil)
        let progressEvents = Mutex(0)
        // Set just before resume(): run(onEvent:) must not return before it.
        let resumed = Mutex(false)
        let returnedBeforeResume = Mutex(false)
        Thread {
            let result = Result { () throws(DownloadError) in
                try download.run { event in
                    if case .progress = event { progressEvents.withLock { $0 += 1 } }
                }
            }
            returnedBeforeResume.withLock { $0 = !resumed.withLock { $0 } }
            outcome.withLock { $0 = result }
        }.start()
        XCTAssertTrue(wait(timeout: 20) { watch.bytesDone >= 1 << 20 })
        download.pause()
        XCTAssertTrue(wait(timeout: 20) { download.state == .paused })
        XCTAssertEqual(download.state, .paused)

        resumed.withLock { $0 = true }
        download.resume()
        XCTAssertTrue(wait(timeout: 30) { outcome.withLock { $0 } != nil })
        XCTAssertFalse(returnedBeforeResume.withLock { $0 }, "run(onEvent:) waited while paused")
        let result = try XCTUnwrap(outcome.withLock { $0 }).get()
        assertSameBytes(result.path, resource)
        XCTAssertEqual(download.state, .finished(result))
        XCTAssertGreaterThan(progressEvents.withLock { $0 }, 3, "onEvent heard the progress")
    }

    /// Issue 36: `resume()` and at once `pause()`, before the thread parked
    /// in `run(onEvent:)` woke, left that thread parked again on a signal
    /// nobody would send, the state stuck at `.pausing`: neither `resume()`
    /// nor `cancel()` took effect, and `run(onEvent:)` never returned.
    func testResumeThenPauseAtOnceWhileABlockingRunIsPausedNeverHangs() throws {
        let (download, resource, watch) = throttledDownload(seed: 93)
        let outcome = Mutex<Result<DownloadResult, DownloadError>?>(nil)
        Thread {
            let result = Result { () throws(DownloadError) in try download.run { _ in } }
            outcome.withLock { $0 = result }
        }.start()
        XCTAssertTrue(wait(timeout: 20) { watch.bytesDone >= 1 << 20 })
        download.pause()
        for round in 1...3 {
            guard wait(timeout: 10, until: { download.state == .paused }) else {
                return XCTFail("round \(round): \(download.state) instead of paused")
            }
            download.resume()
            download.pause()
        }
        XCTAssertTrue(wait(timeout: 10) { download.state == .paused }, "\(download.state)")
        download.resume()
        XCTAssertTrue(
            wait(timeout: 30) { outcome.withLock { $0 } != nil }, "run(onEvent:) did not return: \(download.state)")
        let result = try XCTUnwrap(outcome.withLock { $0 }).get()
        assertSameBytes(result.path, resource)
        XCTAssertEqual(download.state, .finished(result))
    }

    // MARK: - Events

    func testEventsArriveInOrderToEveryConsumerAndFinalProgressIsTheSize() async throws {
        let size: Int64 = (3 << 20) + 13
        let resource = Resource.generated(size: size, seed: 87)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        var options = DownloadOptions()
        options.connections = 4
        options.minimumSplit = 128 << 10
        let download = Download(url: server.url("f"), destination: .file(path("f")), options: options)
        let first = Watch(download.events)
        let second = Watch(download.events)
        let result = try await download.run()
        assertSameBytes(path("f"), resource)

        let seen = await first.events
        let seenBySecond = await second.events
        XCTAssertEqual(seen.map { "\($0)" }, seenBySecond.map { "\($0)" }, "both consumers saw the same events")
        guard case let .probed(remote)? = seen.first else { return XCTFail("probed comes first: \(seen.prefix(3))") }
        XCTAssertEqual(remote.size, size)
        guard case let .finished(finished)? = seen.last else {
            return XCTFail("finished comes last: \(seen.suffix(3))")
        }
        XCTAssertEqual(finished, result)
        guard case let .fetched(bytes)? = seen.dropLast().last else {
            return XCTFail("fetched comes right before finished: \(seen.suffix(3))")
        }
        XCTAssertEqual(bytes, size)
        XCTAssertEqual(seen.filter(isProbed).count, 1)
        let progress = seen.compactMap { event -> DownloadProgress? in
            if case let .progress(value) = event { return value }
            return nil
        }
        XCTAssertGreaterThan(progress.count, 3)
        XCTAssertEqual(progress.last?.bytesDone, size, "final progress equals the size")
        XCTAssertEqual(progress.last?.totalBytes, size)
        XCTAssertEqual(progress.map(\.bytesDone), progress.map(\.bytesDone).sorted(), "progress never goes back")
        XCTAssertTrue(progress.allSatisfy { $0.totalBytes == size })

        // After the end: the same outcome again, and an empty event sequence.
        let again = try await download.run()
        XCTAssertEqual(again, result)
        for await event in download.events { XCTFail("event after the end: \(event)") }
    }

    /// `fetched` says every byte is there before the file is verified and
    /// made durable (a list starts its next file then): here the commit's
    /// fdatasync takes 0.3 s, and `fetched` comes that much before `finished`.
    func testFetchedComesBeforeTheCommitAndFinishedAfterIt() throws {
        let resource = Resource.generated(size: 256 << 10, seed: 88)
        server.setResource(resource, at: "f")
        var options = DownloadOptions()
        options.systemCalls.fdatasync = { descriptor in
            usleep(300_000)
            return SystemCalls.live.fdatasync(descriptor)
        }
        let download = Download(url: server.url("f"), destination: .file(path("f")), options: options)
        let times = Mutex<(fetched: Double?, finished: Double?)>((nil, nil))
        _ = try download.run { event in
            switch event {
            case .fetched: times.withLock { $0.fetched = MonotonicClock.now() }
            case .finished: times.withLock { $0.finished = MonotonicClock.now() }
            default: break
            }
        }
        assertSameBytes(path("f"), resource)
        let (fetched, finished) = times.withLock { $0 }
        guard let fetched, let finished else {
            return XCTFail("fetched \(String(describing: fetched)), finished \(String(describing: finished))")
        }
        XCTAssertGreaterThanOrEqual(finished - fetched, 0.25, "fetched was sent after the commit")
    }

    // MARK: - Small files in memory

    func testDataReturnsTheBytesOfASmallResource() async throws {
        let resource = Resource.generated(size: 300_001, seed: 88)
        server.setResource(resource, at: "small")
        server.setResource(Resource.data([]), at: "empty")
        let temporaries = rangegetTemporaryDirectories()
        let data = try await Download.data(from: server.url("small"), limit: 1 << 20)
        XCTAssertEqual([UInt8](data), resource.bytes(in: 0..<resource.size))
        let empty = try await Download.data(from: server.url("empty"))
        XCTAssertTrue(empty.isEmpty)
        XCTAssertEqual(rangegetTemporaryDirectories(), temporaries, "the temporary file was removed")
    }

    func testDataRefusesAResourceOverTheLimitWithoutFetchingIt() async throws {
        server.setResource(Resource.generated(size: 2 << 20, seed: 89), at: "big")
        let temporaries = rangegetTemporaryDirectories()
        do {
            let data = try await Download.data(from: server.url("big"), limit: 1 << 20)
            XCTFail("returned \(data.count) bytes over the limit")
        } catch {
            XCTAssertEqual(error, .tooLarge(size: 2 << 20, limit: 1 << 20))
        }
        // The opening request (the probe) asks for the first `limit` bytes at most.
        XCTAssertLessThanOrEqual(server.statistics.bodyBytesSent, 1 << 20, "the probe alone decided")
        XCTAssertEqual(server.statistics.requests.count, 1, "one request: \(server.statistics.requests)")
        XCTAssertEqual(rangegetTemporaryDirectories(), temporaries)
    }

    func testDataStopsAStreamOfUnknownLengthPastTheLimit() async throws {
        let size: Int64 = 8 << 20
        server.setResource(Resource.generated(size: size, seed: 90), at: "stream")
        server.setFaults([FaultRule(.chunkedNoLength, when: .always)])
        server.setRatePerConnection(2 << 20)
        let limit: Int64 = 256 << 10
        do {
            let data = try await Download.data(from: server.url("stream"), limit: limit)
            XCTFail("returned \(data.count) bytes over the limit")
        } catch {
            XCTAssertEqual(error, .tooLarge(size: nil, limit: limit))
        }
        XCTAssertLessThan(server.statistics.bodyBytesSent, size / 2, "stopped soon after the limit")
    }

    // MARK: - Helpers

    private func isProbed(_ event: DownloadEvent) -> Bool {
        if case .probed = event { return true }
        return false
    }

    private func rangegetTemporaryDirectories() -> Set<String> {
        let names =
            (try? FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)) ?? []
        return Set(names.filter { $0.hasPrefix("rangeget-data-") })
    }
}
