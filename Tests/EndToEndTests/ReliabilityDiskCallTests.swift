// RELIABILITY.md case 20 at every disk call (issue 16): ENOSPC and EIO are
// injected in turn at each call of the `SystemCalls` seam a download makes,
// on the file it makes it on, during real downloads from the loopback
// server. A failure that matters stops the download with `DownloadError.io`
// whose one line names the file and the errno; one that does not (the write
// journal, a writeback hint, removing the mark) lets it finish. Either way
// the final name never holds wrong bytes, the manifest left behind matches
// the disk, and a run without the fault finishes with the right bytes. Each
// row also checks that its fault was reached: a call that bypasses the seam
// fails its rows.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

/// A call of the `SystemCalls` seam.
enum DiskCall: Sendable {
    case open, pwrite, ftruncate, posixFallocate, flock, fsetxattr, fremovexattr, fdatasync, fsync, syncfs,
        syncFileRange, rename, renameNoReplace, link, unlink, openUnnamed, linkOpenFile
}

/// Calls of the seam made to fail. Each rule fails one call on one path (by
/// its name, or for a descriptor the name of the file open as it; nil: any),
/// from the rule's `from`-th such call on: `times` calls, or all of them, as
/// a disk that stays full or broken would.
final class DiskFaults: Sendable {
    struct Rule: Sendable {
        var call: DiskCall
        var path: String?
        var from = 0
        var times = Int.max
        var code: Int32
    }

    let rules: [Rule]
    /// Per rule: the matching calls seen, and those made to fail.
    private let counts: Mutex<[(seen: Int, failed: Int)]>

    init(_ rules: [Rule]) {
        self.rules = rules
        counts = Mutex(rules.map { _ in (0, 0) })
    }

    /// How many calls each rule made fail.
    var failed: [Int] { counts.withLock { $0.map(\.failed) } }

    /// The errno a `call` on `path` fails with, nil when it is made.
    private func fault(_ call: DiskCall, _ path: @autoclosure () -> String?) -> Int32? {
        guard rules.contains(where: { $0.call == call }) else { return nil }
        let path = path()
        return counts.withLock { counts in
            var code: Int32?
            for (index, rule) in rules.enumerated() where rule.call == call && (rule.path == nil || rule.path == path) {
                counts[index].seen += 1
                let due = counts[index].seen > rule.from && counts[index].failed < rule.times
                if due, code == nil {
                    counts[index].failed += 1
                    code = rule.code
                }
            }
            return code
        }
    }

    private static func fail(_ code: Int32) -> Int32 {
        errno = code
        return -1
    }

    /// The live calls, but failing as the rules say.
    var calls: SystemCalls {
        let live = SystemCalls.live
        var calls = live
        calls.open = { [self] in fault(.open, $0).map(Self.fail) ?? live.open($0, $1, $2) }
        calls.pwrite = { [self] in
            fault(.pwrite, openPath($0)).map { Int(Self.fail($0)) } ?? live.pwrite($0, $1, $2, $3)
        }
        calls.ftruncate = { [self] in fault(.ftruncate, openPath($0)).map(Self.fail) ?? live.ftruncate($0, $1) }
        calls.posixFallocate = { [self] in
            fault(.posixFallocate, openPath($0)).map(Self.fail) ?? live.posixFallocate($0, $1, $2)
        }
        calls.flock = { [self] in fault(.flock, openPath($0)).map(Self.fail) ?? live.flock($0, $1) }
        calls.fsetxattr = { [self] in fault(.fsetxattr, openPath($0)).map(Self.fail) ?? live.fsetxattr($0, $1, $2) }
        calls.fremovexattr = { [self] in fault(.fremovexattr, openPath($0)).map(Self.fail) ?? live.fremovexattr($0, $1)
        }
        calls.fdatasync = { [self] in fault(.fdatasync, openPath($0)).map(Self.fail) ?? live.fdatasync($0) }
        calls.fsync = { [self] in fault(.fsync, openPath($0)).map(Self.fail) ?? live.fsync($0) }
        calls.syncfs = { [self] in fault(.syncfs, openPath($0)).map(Self.fail) ?? live.syncfs($0) }
        calls.syncFileRange = { [self] in fault(.syncFileRange, openPath($0)).map(Self.fail) ?? live.syncFileRange($0) }
        calls.rename = { [self] in fault(.rename, $0).map(Self.fail) ?? live.rename($0, $1) }
        calls.renameNoReplace = { [self] in fault(.renameNoReplace, $0).map(Self.fail) ?? live.renameNoReplace($0, $1) }
        calls.link = { [self] in fault(.link, $0).map(Self.fail) ?? live.link($0, $1) }
        calls.unlink = { [self] in fault(.unlink, $0).map(Self.fail) ?? live.unlink($0) }
        // A small file's unnamed data file (UnnamedFileTests fault its calls by descriptor).
        calls.openUnnamed = { [self] in fault(.openUnnamed, $0).map(Self.fail) ?? live.openUnnamed($0) }
        calls.linkOpenFile = { [self] in fault(.linkOpenFile, $1).map(Self.fail) ?? live.linkOpenFile($0, $1) }
        return calls
    }
}

final class ReliabilityDiskCallTests: EndToEndTestCase {
    /// A file of a download to OUTPUT, by its role.
    enum File {
        case data, manifest, manifestTemporary, journal, journalTemporary, output, directory

        func path(output: String) -> String {
            switch self {
            case .data: return output + ".part"
            case .manifest: return output + ".part.json"
            case .manifestTemporary: return output + ".part.json.tmp"
            case .journal: return output + ".part.journal"
            case .journalTemporary: return output + ".part.journal.tmp"
            case .output: return output
            case .directory: return (output as NSString).deletingLastPathComponent
            }
        }
    }

    /// The download a fault is injected into.
    enum Scenario {
        /// A new download, fast, with no checkpoint before the end.
        case fresh
        /// A new download slow enough for checkpoints ten times a second.
        case checkpointing
        /// A new download with `overwrite` (--force): renamed over whatever has the final name.
        case replacing
        /// `--restart` over a partial download (data, manifest and journal).
        case restart
    }

    /// What a fault must lead to.
    enum Outcome {
        /// `DownloadError.io` saying "cannot OPERATION FILE: ERRNO TEXT";
        /// `published`: the final name is there already (the failure came after the rename).
        case fails(_ operation: String, published: Bool = false)
        /// The download finishes regardless (the call's failure costs nothing the result needs).
        case finishes
    }

    /// A call on a file in a scenario; `from`: the calls of it on that file
    /// that pass first; `setup`: faults beside it (a renameat2 the file
    /// system does not support), the same in every run of the row.
    struct Row {
        var call: DiskCall
        var file: File
        var from: Int
        var scenario: Scenario
        var outcome: Outcome
        var setup: [(call: DiskCall, file: File, code: Int32)]

        init(
            _ call: DiskCall, _ file: File, from: Int = 0, _ scenario: Scenario, _ outcome: Outcome,
            setup: [(call: DiskCall, file: File, code: Int32)] = []
        ) {
            (self.call, self.file, self.from, self.scenario, self.outcome, self.setup) =
                (call, file, from, scenario, outcome, setup)
        }

        var name: String { "\(call) on \(file)\(from > 0 ? " after \(from)" : "") in a \(scenario) download" }
    }

    static let rows: [Row] = [
        // Claiming the data file: a failure leaves nothing that makes the next run refuse it.
        Row(.open, .data, .fresh, .fails("open")),
        Row(.flock, .data, .fresh, .fails("lock")),
        Row(.fsetxattr, .data, .fresh, .fails("mark")),
        Row(.posixFallocate, .data, .fresh, .fails("allocate space for")),
        // The first manifest, and (the same code) every checkpoint's. (Its
        // temporary name is removed only when a leftover is there:
        // StateFileTests.testAStateFileIsCreatedWithoutALookupAndALeftoverThatStaysFailsIt.)
        Row(.open, .manifestTemporary, .fresh, .fails("create")),
        Row(.pwrite, .manifestTemporary, .fresh, .fails("write")),
        Row(.rename, .manifestTemporary, .fresh, .fails("rename")),
        // The data, straight from libcurl's buffer.
        Row(.pwrite, .data, .fresh, .fails("write")),
        // The write journal is a help, not a need: without it the download goes on.
        Row(.unlink, .journalTemporary, .fresh, .finishes),
        Row(.open, .journalTemporary, .fresh, .finishes),
        Row(.posixFallocate, .journalTemporary, .fresh, .finishes),
        Row(.rename, .journalTemporary, .fresh, .finishes),
        // The end: data durable, origin recorded (the mark, the validators, stays), renamed, state files
        // removed, directory durable.
        Row(.fdatasync, .data, .fresh, .fails("sync")),
        Row(.fsetxattr, .data, from: 1, .fresh, .fails("record the origin of")),
        Row(.renameNoReplace, .data, .fresh, .fails("rename")),
        Row(.rename, .data, .replacing, .fails("rename")),
        // Where renameat2 is unsupported: a hard link, then the old name removed.
        Row(.link, .data, .fresh, .fails("rename"), setup: [(.renameNoReplace, .data, EINVAL)]),
        Row(.unlink, .data, .fresh, .fails("remove", published: true), setup: [(.renameNoReplace, .data, EINVAL)]),
        // There the state files go before the `.part` is closed: one that cannot, fails the download.
        Row(.unlink, .manifest, .fresh, .fails("remove", published: true), setup: [(.renameNoReplace, .data, EINVAL)]),
        Row(.unlink, .journal, .fresh, .fails("remove", published: true)),
        Row(.unlink, .manifest, .fresh, .fails("remove", published: true)),
        Row(.open, .directory, .fresh, .fails("open directory", published: true)),
        Row(.fsync, .directory, .fresh, .fails("sync directory", published: true)),
        // A checkpoint: data durable, then the manifest and its directory; writeback hints in between.
        Row(.fdatasync, .data, .checkpointing, .fails("sync")),
        Row(.fsync, .manifestTemporary, .checkpointing, .fails("sync")),
        Row(.open, .directory, .checkpointing, .fails("open directory")),
        Row(.fsync, .directory, .checkpointing, .fails("sync directory")),
        Row(.syncFileRange, .data, .checkpointing, .finishes),
        // Discarding a partial download: the journal, the manifest, then the data emptied.
        Row(.unlink, .journal, .restart, .fails("remove")),
        Row(.unlink, .manifest, .restart, .fails("remove")),
        Row(.ftruncate, .data, .restart, .fails("truncate"))
    ]

    private var resource: Resource!

    override func setUpWithError() throws {
        try super.setUpWithError()
        resource = Resource.generated(size: 2 << 20, seed: 220)
        server.setResource(resource, at: "f")
    }

    /// ENOSPC and EIO at each call in turn: the outcome the row names, a
    /// clear error, no wrong byte under the final name, and a clean resume.
    func test20EveryDiskCallFailsCleanlyAndTheDownloadResumes() throws {
        var run = 0
        for row in Self.rows {
            for code in [ENOSPC, EIO] {
                run += 1
                check(row, code: code, times: .max, output: path("f\(run)"))
            }
        }
    }

    /// The same, each download's commit handed off to a group's committer
    /// (`runHandingOffCommit`, as every file of a list): a failure there
    /// ends the download with the same error and leaves the same state.
    /// A group per run: one that met a file system without renameat2 (a
    /// row's setup) links the files after at once (Refusals).
    func test20EveryDiskCallFailsCleanlyWhenTheCommitIsHandedOff() throws {
        var run = 0
        for row in Self.rows {
            for code in [ENOSPC, EIO] {
                run += 1
                check(row, code: code, times: .max, output: path("h\(run)"), handingOffTo: SyncGroup())
            }
        }
    }

    /// A download whose commit is handed off returns once it is verified,
    /// before its data is flushed (here, a 0.3 s fdatasync); the committer
    /// ends it, with the file in place and the `finished` event first.
    func test20AHandedOffCommitReturnsBeforeTheFlushAndEndsWhenItIsDone() throws {
        let small = Resource.generated(size: 256 << 10, seed: 224)
        server.setResource(small, at: "s")
        var options = DownloadOptions()
        options.syncGroup = SyncGroup()
        options.systemCalls = Self.batching(.live)
        let output = path("handed-off")
        let download = Download(url: server.url("s"), destination: .file(output), options: options)
        let order = Mutex<[String]>([])
        let ended = DispatchSemaphore(value: 0)
        download.runHandingOffCommit(
            onEvent: { event in
                if case .finished = event { order.withLock { $0.append("finished event") } }
            },
            ended: { outcome in
                if case let .failure(error) = outcome { XCTFail("\(error)") }
                order.withLock {
                    $0.append(FileManager.default.fileExists(atPath: output) ? "ended, saved" : "ended, not saved")
                }
                ended.signal()
            })
        order.withLock { $0.append("returned") }
        XCTAssertEqual(ended.wait(timeout: .now() + 30), .success, "the handed-off commit never ended the download")
        XCTAssertEqual(order.withLock { $0 }, ["returned", "finished event", "ended, saved"])
        assertSameBytes(output, small)
        guard case .finished = download.state else { return XCTFail("the download is \(download.state), not finished") }
    }

    /// EINTR once at each call: retried, and every download finishes.
    func test20AnInterruptedDiskCallIsRetried() throws {
        for (run, row) in Self.rows.enumerated() {
            var interrupted = row
            interrupted.outcome = .finishes
            check(interrupted, code: EINTR, times: 1, output: path("f\(run)"))
        }
    }

    /// A batch of finished files is written back with one syncfs, whose
    /// failure is left to each file's own fdatasync: every download finishes.
    func test20AFailedSyncfsOfABatchIsLeftToEachFile() throws {
        let small = Resource.generated(size: 256 << 10, seed: 221)
        server.setResource(small, at: "s")
        let group = SyncGroup()
        for code in [ENOSPC, EIO] {
            let faults = DiskFaults([DiskFaults.Rule(call: .syncfs, path: nil, code: code)])
            let calls = Self.batching(faults.calls)
            let outputs = (0..<4).map { path("s\(code)-\($0)") }
            let results = downloadTogether(server.url("s"), to: outputs, group: group, calls: calls)
            XCTAssertGreaterThan(faults.failed[0], 0, "errno \(code): no batch was committed with syncfs")
            for output in outputs {
                if case let .failure(error)? = results[output] { XCTFail("errno \(code): \(output): \(error)") }
                assertSameBytes(output, small)
            }
        }
    }

    /// A batch whose syncfs succeeds (where it vouches: Linux 5.17 on, ext4,
    /// XFS, btrfs) is durable without an fdatasync per file, each a disk flush.
    func test20ABatchWhoseSyncfsSucceedsNeedsNoFdatasyncPerFile() throws {
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(folder) }
        try XCTSkipUnless(
            SystemCalls.syncfsVouches(forFileSystemOf: folder),
            "a kernel before 5.17 or a file system whose syncfs vouches for nothing")
        let small = Resource.generated(size: 256 << 10, seed: 222)
        server.setResource(small, at: "s")
        let counts = SyncCounts()
        var calls = Self.batching(.live) { counts.syncs.add(1, ordering: .relaxed) }
        calls.syncfs = { descriptor in
            counts.fileSystemSyncs.add(1, ordering: .relaxed)
            return SystemCalls.live.syncfs(descriptor)
        }
        let outputs = (0..<4).map { path("batch-\($0)") }
        downloadAllTogether(server.url("s"), small, to: outputs, calls: calls)
        XCTAssertGreaterThan(counts.fileSystemSyncs.load(ordering: .relaxed), 0, "no batch was committed with syncfs")
        XCTAssertLessThan(
            counts.syncs.load(ordering: .relaxed), outputs.count, "every file was fdatasynced all the same")
    }

    /// Small files are linked from no name (UnnamedFileTests), which changes
    /// their inodes too: a batch's second syncfs, after the links, makes
    /// their names durable; where it fails, each linked file is fsynced,
    /// then its directory. Every download finishes.
    func test20ALinkedBatchWhoseSyncfsFailsIsSyncedFileByFile() throws {
        let small = Resource.generated(size: 16 << 10, seed: 223)
        server.setResource(small, at: "t")
        let counts = SyncCounts()
        var calls = Self.batching(.live)
        calls.syncfs = { _ in
            counts.fileSystemSyncs.add(1, ordering: .relaxed)
            errno = EIO
            return -1
        }
        calls.fsync = { descriptor in
            var info = stat()
            if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                counts.fileSyncs.add(1, ordering: .relaxed)
            }
            return SystemCalls.live.fsync(descriptor)
        }
        let outputs = (0..<4).map { path("linked-\($0)") }
        downloadAllTogether(server.url("t"), small, to: outputs, calls: calls)
        XCTAssertGreaterThanOrEqual(
            counts.fileSystemSyncs.load(ordering: .relaxed), 2,
            "no batch of several linked files was committed")
        XCTAssertEqual(
            counts.fileSyncs.load(ordering: .relaxed), outputs.count,
            "each linked file is fsynced once, its link count with it")
    }

    /// `calls` with a slow fdatasync (0.3 s, after `counted`): it holds the
    /// group's turn (its first file commits alone) while the other files
    /// finish and queue, so they commit as one batch.
    private static func batching(_ calls: SystemCalls, counted: @escaping @Sendable () -> Void = {}) -> SystemCalls {
        var slowed = calls
        slowed.fdatasync = { descriptor in
            counted()
            usleep(300_000)
            return calls.fdatasync(descriptor)
        }
        return slowed
    }

    /// Downloads `url`, which serves `resource`, to each of `outputs` at once
    /// through one SyncGroup: each must end saved with its bytes.
    private func downloadAllTogether(
        _ url: String, _ resource: Resource, to outputs: [String], calls: SystemCalls,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let results = downloadTogether(url, to: outputs, group: SyncGroup(), calls: calls)
        for output in outputs {
            if case let .failure(error)? = results[output] { XCTFail("\(output): \(error)", file: file, line: line) }
            assertSameBytes(output, resource, file: file, line: line)
        }
    }

    /// Downloads `url` to each of `outputs` at once, on threads of their own,
    /// committing through `group` with `calls`; the result of each.
    private func downloadTogether(
        _ url: String, to outputs: [String], group: SyncGroup,
        calls: SystemCalls
    ) -> [String: Result<DownloadResult, DownloadError>] {
        let results = Mutex<[String: Result<DownloadResult, DownloadError>]>([:])
        let finished = DispatchGroup()
        for output in outputs {
            var options = DownloadOptions()
            options.syncGroup = group
            options.systemCalls = calls
            let download = Download(url: url, destination: .file(output), options: options)
            finished.enter()
            Thread.detachNewThread {
                let result = Result { () throws(DownloadError) in try download.run { _ in } }
                results.withLock { $0[output] = result }
                finished.leave()
            }
        }
        XCTAssertEqual(finished.wait(timeout: .now() + 60), .success)
        return results.withLock { $0 }
    }

    /// One run of `row` with `code` injected, then a run without it.
    private func check(
        _ row: Row, code: Int32, times: Int, output: String, handingOffTo group: SyncGroup? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let name = "\(row.name), errno \(code)"
        let target = row.file.path(output: output)
        if row.scenario == .restart, !makePartialDownload(at: output, name: name) { return }
        let faults = DiskFaults(
            [DiskFaults.Rule(call: row.call, path: target, from: row.from, times: times, code: code)]
                + row.setup.map { DiskFaults.Rule(call: $0.call, path: $0.file.path(output: output), code: $0.code) })
        let url = server.url("f")
        server.setRatePerConnection(row.scenario == .checkpointing ? 512 << 10 : nil)
        let faulted = runLibrary([url], to: output, handingOffTo: group) { options in
            // The URL too, for every attribute call there is.
            options.recordOriginURL = true
            options.connections = 4
            options.minimumSplit = 256 << 10
            options.checkpointInterval = row.scenario == .checkpointing ? 0.1 : 1000
            options.restart = row.scenario == .restart
            options.overwrite = row.scenario == .replacing
            options.systemCalls = faults.calls
        }
        server.setRatePerConnection(nil)
        for (rule, failed) in zip(faults.rules, faults.failed) where failed == 0 {
            XCTFail(
                "\(name): \(rule.call) on \(rule.path ?? "any file") was never made to fail", file: file, line: line)
        }
        switch row.outcome {
        case .finishes:
            if let error = faulted.error { XCTFail("\(name): \(error)", file: file, line: line) }
            assertSameBytes(output, resource, file: file, line: line)
            return
        case let .fails(operation, published):
            guard case let .io(error)? = faulted.error else {
                return XCTFail(
                    "\(name): expected DownloadError.io, got \(String(describing: faulted.error))",
                    file: file, line: line)
            }
            XCTAssertEqual(error.code, code, "\(name): \(error)", file: file, line: line)
            // The one line the command prints after "rangeget: " (exit 4).
            XCTAssertEqual(
                faulted.error?.description, "cannot \(operation) \(target): \(String(cString: strerror(code)))",
                name, file: file, line: line)
            if published {
                assertSameBytes(output, resource, file: file, line: line)
            } else {
                XCTAssertFalse(
                    FileManager.default.fileExists(atPath: output), "\(name): a final file", file: file, line: line)
            }
        }
        let manifest = File.manifest.path(output: output)
        let data = File.data.path(output: output)
        if FileManager.default.fileExists(atPath: manifest), FileManager.default.fileExists(atPath: data) {
            assertManifestMatchesDisk(manifest, data: data, resource, mayBeEmpty: true, file: file, line: line)
        }
        let resumed = runLibrary([url], to: output) { $0.connections = 4 }
        if let error = resumed.error { XCTFail("\(name): the run without the fault: \(error)", file: file, line: line) }
        assertSameBytes(output, resource, file: file, line: line)
    }

    /// Leaves a partial download at `output` (data, manifest, journal), stopped at its first checkpoint.
    private func makePartialDownload(at output: String, name: String) -> Bool {
        server.setRatePerConnection(512 << 10)
        defer { server.setRatePerConnection(nil) }
        let stopped = runLibrary(
            [server.url("f")], to: output,
            stopWhen: { event in
                if case .transfer(.checkpoint) = event { return true }
                return false
            },
            configure: { options in
                options.connections = 4
                options.minimumSplit = 256 << 10
                options.checkpointInterval = 0.1
            })
        let left = [File.data, .manifest, .journal].map { $0.path(output: output) }
        guard stopped.error == .interrupted(keptResumeState: true), left.allSatisfy(FileManager.default.fileExists)
        else {
            XCTFail("\(name): no partial download to restart (\(String(describing: stopped.error)))")
            return false
        }
        return true
    }
}

/// Disk flushes counted by the batch tests.
private final class SyncCounts: Sendable {
    let syncs = Atomic<Int>(0)
    let fileSystemSyncs = Atomic<Int>(0)
    let fileSyncs = Atomic<Int>(0)
}
