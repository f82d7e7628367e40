import RangeServer
import Synchronization
import XCTest

@testable import RangeGet

final class ManifestTests: TemporaryDirectoryTestCase {
    private func sample() -> Manifest {
        let remote = RemoteFile(
            url: "https://user:secret@example.test/f.iso?sig=abc", effectiveURL: "https://example.test/f.iso",
            size: 6 << 30, etag: "\"e1\"", lastModified: "Mon, 01 Jan 2024 00:00:00 GMT",
            acceptsRanges: true, contentDisposition: nil)
        var manifest = Manifest(remote: remote, size: 6 << 30)
        manifest.done = RangeSet([ByteRange(0, 1 << 20), ByteRange(1 << 32, (1 << 32) + 5)])
        return manifest
    }

    func testRoundTripsWithoutCredentialsAndWithMode0600() throws {
        let path = directory + "/f.part.json"
        let manifest = sample()
        try manifest.save(to: path)
        XCTAssertEqual(try Manifest.load(from: path), manifest)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertFalse(text.contains("secret"), text)
        XCTAssertTrue(text.contains("sig=abc"), "query strings stay: signed URLs need them")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + ".tmp"))
    }

    func testMissingManifestIsNil() throws {
        XCTAssertNil(try Manifest.load(from: directory + "/absent.json"))
    }

    func testDamagedManifestsAreReportedNotTrusted() throws {
        let path = directory + "/f.part.json"
        let good = String(decoding: try JSONEncoder().encode(sample()), as: UTF8.self)
        let cases: [(String, Data, String)] = [
            ("empty", Data(), "is empty"),
            ("zero-filled", Data(repeating: 0, count: 4096), "holds only zero bytes"),
            ("truncated", Data(good.utf8.prefix(good.utf8.count / 2)), "not a valid manifest"),
            ("not JSON", Data("hello".utf8), "not a valid manifest"),
            (
                "newer version", Data(good.replacingOccurrences(of: "\"version\":1", with: "\"version\":99").utf8),
                "format version 99"
            ),
            (
                "bytes past the end",
                Data(good.replacingOccurrences(of: "\"size\":6442450944", with: "\"size\":10").utf8),
                "beyond the file's size"
            ),
            ("missing field", Data("{\"version\":1}".utf8), "not a valid manifest")
        ]
        for (name, data, problem) in cases {
            _ = FileManager.default.createFile(atPath: path, contents: data)
            XCTAssertThrowsError(try Manifest.load(from: path), name) { error in
                let description = "\(error)"
                XCTAssertTrue(description.contains(problem), "\(name): \(description)")
                // How to recover is the download's to say, in its own terms (the command names --restart).
                guard let damaged = error as? ManifestError else { return XCTFail("\(name): \(error)") }
                XCTAssertEqual(DownloadError.manifest(damaged).remedy, .restart, "\(name): says how to recover")
                XCTAssertTrue(
                    DownloadError.manifest(damaged).description.hasSuffix(
                        "; set DownloadOptions.restart to start over"),
                    "\(name): \(DownloadError.manifest(damaged))")
            }
        }
    }

    func testMismatchNamesWhatChanged() {
        let manifest = sample()
        var remote = RemoteFile(
            url: manifest.url, effectiveURL: manifest.url, size: manifest.size, etag: "\"e1\"",
            lastModified: manifest.lastModified, acceptsRanges: true, contentDisposition: nil)
        XCTAssertNil(manifest.mismatch(with: remote))
        remote.etag = "\"e2\""
        XCTAssertEqual(manifest.mismatch(with: remote), "its ETag changed from \"e1\" to \"e2\"")
        remote.etag = "\"e1\""
        remote.size = 5
        XCTAssertEqual(manifest.mismatch(with: remote), "its size changed from 6442450944 to 5 bytes")
    }
}

final class WriteJournalTests: XCTestCase {
    private var directory: String!
    private var files: PartialFiles!
    private var data: OutputFile!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "rangeget-journal-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        files = PartialFiles(output: directory + "/f")
        _ = FileManager.default.createFile(atPath: files.data, contents: Data(count: 100))
        data = try OutputFile(existing: files.data, calls: .live)
        let remote = RemoteFile(
            url: "http://h/f", effectiveURL: "http://h/f", size: 100, etag: "\"e\"",
            lastModified: nil, acceptsRanges: true, contentDisposition: nil)
        var manifest = Manifest(remote: remote, size: 100)
        manifest.done = RangeSet([ByteRange(0, 10)])
        try manifest.save(to: files.manifest)
    }

    override func tearDownWithError() throws {
        data = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private var loaded: RangeSet? { (try? Manifest.load(from: files.manifest))??.done }

    private func journal(written: RangeSet = RangeSet()) throws -> WriteJournal {
        try XCTUnwrap(try WriteJournal(path: files.journal, file: data, size: 100, slots: 2, written: written))
    }

    /// Each write counts as soon as its slot records it: a transfer in
    /// flight, finished ones, and the bytes the journal started with.
    func testWritesCountAsTheyAreRecorded() throws {
        let journal = try journal(written: RangeSet([ByteRange(90, 100)]))
        XCTAssertEqual(loaded, RangeSet([ByteRange(0, 10), ByteRange(90, 100)]))
        journal.begin(slot: 0, at: 20)
        journal.advance(slot: 0, to: 25)
        XCTAssertEqual(loaded, RangeSet([ByteRange(0, 10), ByteRange(20, 25), ByteRange(90, 100)]), "in flight")
        journal.advance(slot: 0, to: 30)
        journal.end(slot: 0, wrote: ByteRange(20, 30))
        journal.begin(slot: 0, at: 50)
        XCTAssertEqual(
            loaded, RangeSet([ByteRange(0, 10), ByteRange(20, 30), ByteRange(90, 100)]),
            "a finished transfer stays, a new one claims nothing yet")
        journal.begin(slot: 1, at: 40)
        journal.advance(slot: 1, to: 45)
        journal.advance(slot: 0, to: 55)
        XCTAssertEqual(
            loaded,
            RangeSet([
                ByteRange(0, 10), ByteRange(20, 30), ByteRange(40, 45), ByteRange(50, 55),
                ByteRange(90, 100)
            ]))
    }

    /// What a durable save covers leaves the journal; the rest stays.
    func testCompactionKeepsWhatIsNotDurable() throws {
        let journal = try journal()
        journal.begin(slot: 0, at: 20)
        journal.end(slot: 0, wrote: ByteRange(20, 40))
        journal.begin(slot: 1, at: 60)
        journal.end(slot: 1, wrote: ByteRange(60, 70))
        journal.forget(RangeSet([ByteRange(0, 30)]))
        XCTAssertEqual(
            JournalFile.written(at: files.journal, dataPath: files.data, size: 100),
            RangeSet([ByteRange(30, 40), ByteRange(60, 70)]))
        journal.forget(RangeSet([ByteRange(0, 100)]))
        XCTAssertEqual(JournalFile.written(at: files.journal, dataPath: files.data, size: 100), RangeSet())
    }

    /// Bytes that turn out not to count (an answer that ran past its
    /// Content-Range, and what its race partner logged over them: issue 36 g)
    /// leave the journal at once, whatever it logged; the same bytes
    /// fetched again count again.
    func testBytesThatDoNotCountLeaveTheJournal() throws {
        let journal = try journal()
        journal.begin(slot: 0, at: 20)
        journal.end(slot: 0, wrote: ByteRange(20, 60))
        journal.begin(slot: 1, at: 70)
        journal.advance(slot: 1, to: 80)
        journal.forget(RangeSet([ByteRange(40, 60)]))
        XCTAssertEqual(loaded, RangeSet([ByteRange(0, 10), ByteRange(20, 40), ByteRange(70, 80)]))
        journal.begin(slot: 0, at: 40)
        journal.end(slot: 0, wrote: ByteRange(40, 60))
        XCTAssertEqual(loaded, RangeSet([ByteRange(0, 10), ByteRange(20, 60), ByteRange(70, 80)]))
    }

    /// Written bytes count after a killed process (same boot, same data
    /// file), never after a reboot (another boot ID) or for another file.
    func testWrittenBytesCountOnlyInTheSameBootForTheSameDataFile() throws {
        let journal = try journal(written: RangeSet([ByteRange(0, 40), ByteRange(50, 60)]))
        XCTAssertEqual(loaded, RangeSet([ByteRange(0, 40), ByteRange(50, 60)]))
        withExtendedLifetime(journal) {}

        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: files.journal))
        let valid = bytes
        bytes.replaceSubrange(8..<24, with: Data(count: 16))
        try bytes.write(to: URL(fileURLWithPath: files.journal))
        XCTAssertEqual(loaded, RangeSet([ByteRange(0, 10)]), "another boot")

        try valid.write(to: URL(fileURLWithPath: files.journal))
        try FileManager.default.removeItem(atPath: files.data)
        _ = FileManager.default.createFile(atPath: files.data, contents: Data(count: 100))
        XCTAssertEqual(loaded, RangeSet([ByteRange(0, 10)]), "another data file")
    }

    /// What a power cut may leave of the journal (an empty file, zeros, half
    /// a file) is ignored: the durable manifest still loads.
    func testADamagedJournalCostsOnlyItsOwnBytes() throws {
        _ = try journal(written: RangeSet([ByteRange(0, 40)]))
        let valid = try XCTUnwrap(FileManager.default.contents(atPath: files.journal))
        for damaged in [Data(), Data(count: valid.count), valid.prefix(valid.count / 2)] {
            try damaged.write(to: URL(fileURLWithPath: files.journal))
            XCTAssertEqual(loaded, RangeSet([ByteRange(0, 10)]))
        }
    }

    /// The journal never touches the manifest (a file rangeget fsynced).
    func testTheJournalLeavesTheManifestAlone() throws {
        let before = try XCTUnwrap(FileManager.default.contents(atPath: files.manifest))
        var info = stat()
        XCTAssertEqual(stat(files.manifest, &info), 0)
        let journal = try journal()
        journal.begin(slot: 0, at: 20)
        journal.advance(slot: 0, to: 30)
        var after = stat()
        XCTAssertEqual(stat(files.manifest, &after), 0)
        XCTAssertEqual(after.st_ino, info.st_ino)
        XCTAssertEqual(FileManager.default.contents(atPath: files.manifest), before)
    }
}

final class StateFileTests: TemporaryDirectoryTestCase {
    /// A link planted at a state file's name is never read, and one at its
    /// temporary name is never written through.
    func testLinksAreNeitherReadNorWrittenThrough() throws {
        let victim = directory + "/victim"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        let path = directory + "/f.part.json"
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: victim)
        XCTAssertThrowsError(try StateFile.read(path)) {
            XCTAssertEqual($0 as? StateFile.Unreadable, .init(problem: "is a symbolic link"))
        }
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.linkItem(atPath: victim, toPath: path)
        XCTAssertThrowsError(try StateFile.read(path)) { error in
            XCTAssertTrue((error as? StateFile.Unreadable)?.problem.contains("hard links") == true, "\(error)")
        }
        try FileManager.default.removeItem(atPath: path)

        try FileManager.default.linkItem(atPath: victim, toPath: path + ".tmp")
        try StateFile.replace(path, with: Data("new".utf8), durable: true, calls: .live)
        XCTAssertEqual(try StateFile.read(path), Data("new".utf8))
        XCTAssertEqual(FileManager.default.contents(atPath: victim), Data("precious".utf8))
        try FileManager.default.createSymbolicLink(atPath: path + ".tmp", withDestinationPath: victim)
        try StateFile.replace(path, with: Data("newer".utf8), durable: false, calls: .live)
        XCTAssertEqual(FileManager.default.contents(atPath: victim), Data("precious".utf8))
        XCTAssertNil(try StateFile.read(directory + "/absent"))
    }

    /// A state file's name is removed only when something is there (a
    /// leftover, a planted link): a write that finds its name free looks
    /// for nothing first, and one that cannot remove what is there fails
    /// saying so, with the file there left as it was.
    func testAStateFileIsCreatedWithoutALookupAndALeftoverThatStaysFailsIt() throws {
        let path = directory + "/f.part.json"
        let unlinked = Mutex<[String]>([])
        var calls = SystemCalls.live
        calls.unlink = { name in
            unlinked.withLock { $0.append(name) }
            errno = EACCES
            return -1
        }
        try StateFile.replace(path, with: Data("first".utf8), durable: true, calls: calls)
        XCTAssertEqual(try StateFile.read(path), Data("first".utf8))
        XCTAssertEqual(unlinked.withLock { $0 }, [], "a name was removed that was not there")

        try Data("leftover".utf8).write(to: URL(fileURLWithPath: path + ".tmp"))
        XCTAssertThrowsError(try StateFile.replace(path, with: Data("second".utf8), durable: false, calls: calls)) {
            XCTAssertEqual(($0 as? IOError)?.description.hasPrefix("cannot remove \(path).tmp"), true, "\($0)")
        }
        XCTAssertEqual(unlinked.withLock { $0 }, [path + ".tmp"])
        XCTAssertEqual(try StateFile.read(path), Data("first".utf8))
        XCTAssertEqual(FileManager.default.contents(atPath: path + ".tmp"), Data("leftover".utf8))
    }

    /// Where the file system has no extended attributes, the mark is a file
    /// beside the data naming it; a mark left by another file does not count.
    func testTheMarkBesideTheFileNamesThatFile() throws {
        let files = PartialFiles(output: directory + "/f")
        let file = try OutputFile(creating: files.data, calls: .live)
        XCTAssertFalse(file.isMarked)
        try file.markBeside()
        XCTAssertTrue(file.isMarked)
        XCTAssertTrue(FileManager.default.fileExists(atPath: files.mark))
        // Another file under the same name (the first stays open, so its inode is not reused).
        try FileManager.default.removeItem(atPath: files.data)
        XCTAssertFalse(try OutputFile(creating: files.data, calls: .live).isMarked, "a mark left by a deleted file")
        file.unmark(keeping: nil)
        XCTAssertFalse(FileManager.default.fileExists(atPath: files.mark))
    }

    /// The mark attribute counts only with three lines whose third is the
    /// file's own name: not on the finished file (two lines, or three when
    /// the last rewrite was lost, naming the `.part` it was), nor when the
    /// server's Last-Modified reads like a name.
    func testTheMarkAttributeNamesItsOwnFile() throws {
        let output = directory + "/a"
        let files = PartialFiles(output: output)
        let origin = FileOrigin(url: nil, etag: "\"e\"", lastModified: "partial")
        let file = try OutputFile(creating: files.data, calls: .live)
        try file.mark(origin.partMark(path: files.data))
        XCTAssertTrue(file.isMarked)
        try file.move(to: output, replacing: false)
        let moved = try OutputFile(existing: output, calls: .live)
        XCTAssertFalse(moved.isMarked, "the mark of a.part, the rewrite after the rename lost")
        file.unmark(keeping: origin.validators(stamping: file.descriptor))
        XCTAssertFalse(try OutputFile(existing: output, calls: .live).isMarked, "ETAG LF partial")
        let saved = try XCTUnwrap(FileOrigin(path: output))
        XCTAssertEqual(FileOrigin(url: saved.url, etag: saved.etag, lastModified: saved.lastModified), origin)
        XCTAssertEqual(saved.stamp?.count, 16, "the stamp of the file as saved")
    }

    /// A run that opens an earlier run's `.part` just as that run finishes
    /// it (a link to the final name, then the old name removed, the lock let
    /// go between: OutputFile.move on a file system without renameat2) gets
    /// the lock on the finished file. It sees that the name no longer names
    /// that file and creates its own `.part`, never taking over (and then
    /// truncating) the finished one.
    func testAPartWhoseNameChangedHandsWhileItWasOpenedIsNotTakenOver() throws {
        let output = directory + "/a"
        let files = PartialFiles(output: output)
        let origin = FileOrigin(url: nil, etag: "\"e\"", lastModified: nil)
        let first = try OutputFile(creating: files.data, calls: .live)
        try first.mark(origin.partMark(path: files.data))
        let bytes = Array("finished".utf8)
        try first.write(bytes, count: bytes.count, at: 0)
        let finished = Atomic(false)
        var calls = SystemCalls.live
        calls.flock = { descriptor, operation in
            if !finished.exchange(true, ordering: .relaxed) {
                XCTAssertEqual(link(files.data, output), 0)
                XCTAssertEqual(unlink(files.data), 0)
            }
            return SystemCalls.live.flock(descriptor, operation)
        }
        let second = try OutputFile.claim(
            files, replacingOthers: false, mark: origin.partMark(path: files.data),
            calls: calls)
        XCTAssertTrue(finished.load(ordering: .relaxed), "the claim never took a lock on the earlier .part")
        XCTAssertTrue(second.isNew, "the claim took over the file the earlier run finished")
        XCTAssertNotEqual(FileIdentity(descriptor: second.descriptor), FileIdentity(path: output))
        XCTAssertEqual(FileManager.default.contents(atPath: output), Data("finished".utf8))
    }

    /// A run that finds an earlier run's `.part` also named as its output
    /// (that run linked it there, let go of its lock, and is about to remove
    /// the `.part` name) waits for the name to go, then creates its own.
    /// One that stays (a run killed there) is refused as any file with two
    /// links is, after that wait.
    func testAPartAlsoNamedAsItsOutputIsWaitedForThenRefused() throws {
        let output = directory + "/b"
        let files = PartialFiles(output: output)
        let origin = FileOrigin(url: nil, etag: "\"e\"", lastModified: nil)
        let mark = origin.partMark(path: files.data)
        var first = try OutputFile(creating: files.data, calls: .live)
        try first.mark(mark)
        XCTAssertEqual(link(files.data, output), 0)
        let removed = DispatchSemaphore(value: 0)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.03) {
            XCTAssertEqual(unlink(files.data), 0)
            removed.signal()
        }
        let second = try OutputFile.claim(files, replacingOthers: true, mark: mark, calls: .live)
        XCTAssertEqual(removed.wait(timeout: .now() + 5), .success)
        XCTAssertTrue(second.isNew, "the claim took the file being published instead of waiting for its name to go")
        XCTAssertNotEqual(FileIdentity(descriptor: second.descriptor), FileIdentity(path: output))
        XCTAssertEqual(
            FileIdentity(path: files.data), FileIdentity(descriptor: second.descriptor),
            "the new .part was created before the old name went, and went with it")

        // A run killed between its link and its unlink: the two names stay.
        try FileManager.default.removeItem(atPath: files.data)
        first = try OutputFile(creating: files.data, calls: .live)
        try first.mark(mark)
        try FileManager.default.removeItem(atPath: output)
        XCTAssertEqual(link(files.data, output), 0)
        XCTAssertThrowsError(try OutputFile.claim(files, replacingOthers: false, mark: mark, calls: .live)) {
            guard case let .notOurs(problem)? = $0 as? OutputFile.ClaimError else { return XCTFail("\($0)") }
            XCTAssertTrue(problem.contains("hard links"), problem)
        }
    }

    /// Two runs meet one leftover `.part.new` (a killed run's small file):
    /// the one that gets the old file's lock after the other already made
    /// its own file there sees that the name no longer names the file it
    /// locked, removes nothing, and finds the other's file held: busy.
    func testALeftoverPartNewIsClearedOnceWhenTwoRunsMeetIt() throws {
        let files = PartialFiles(output: directory + "/c")
        try Data("a killed run's".utf8).write(to: URL(fileURLWithPath: files.new))
        try assertBusyAndTheOtherRunsFileKeepsItsName(files)
    }

    /// A run that kept a small file's data as its `.part` (linked from its
    /// `.part.new`) and was killed before removing the `.part.new` name
    /// left a `.part` with two links: the next claim removes that second
    /// name and takes the `.part`, where it used to refuse it.
    func testAPartKeptFromATemporaryFileLosesItsSecondName() throws {
        let files = PartialFiles(output: directory + "/k")
        let origin = FileOrigin(url: nil, etag: "\"e\"", lastModified: nil)
        let mark = origin.partMark(path: files.data)
        try OutputFile(creating: files.data, calls: .live).mark(mark)
        XCTAssertEqual(link(files.data, files.new), 0)
        let claimed = try OutputFile.claim(files, replacingOthers: false, mark: mark, calls: .live)
        XCTAssertFalse(claimed.isNew)
        XCTAssertFalse(FileManager.default.fileExists(atPath: files.new), "the .part.new name stayed")
        XCTAssertTrue(FileManager.default.fileExists(atPath: files.data))
    }

    /// The same `.part` with no mark at all (its run could not write the
    /// mark file beside it, where the file system keeps no attributes):
    /// the `.part.new` name it shares marks it as rangeget's, so the claim
    /// takes it and marks it, where it used to refuse it as another program's.
    func testAnUnmarkedPartThatIsAlsoItsPartNewIsTakenAndMarked() throws {
        let files = PartialFiles(output: directory + "/u")
        let mark = FileOrigin(url: nil, etag: "\"e\"", lastModified: nil).partMark(path: files.data)
        try Data("kept".utf8).write(to: URL(fileURLWithPath: files.data))
        XCTAssertEqual(link(files.data, files.new), 0)
        let claimed = try OutputFile.claim(files, replacingOthers: false, mark: mark, calls: .live)
        XCTAssertFalse(claimed.isNew)
        XCTAssertFalse(FileManager.default.fileExists(atPath: files.new), "the .part.new name stayed")
        XCTAssertEqual(FileManager.default.contents(atPath: files.data), Data("kept".utf8))
        XCTAssertTrue(Manifest.isPartialDownload(dataFile: files.data), "the claimed .part was not marked")
    }

    /// Another run locks a new `.part.new` before the run that made it
    /// does, takes it for a leftover, removes its name and makes its own:
    /// the first run sees, once it holds its lock, that the name is no
    /// longer its file's, and never writes a file another run will publish.
    func testAPartNewWhoseNameIsTakenBeforeItIsLockedIsNotUsed() throws {
        try assertBusyAndTheOtherRunsFileKeepsItsName(PartialFiles(output: directory + "/d"))
    }

    /// `OutputFile.temporary` for `files` while another run, at this run's
    /// first lock, removes the `.part.new` name and makes its own file there,
    /// which it holds: this run is busy, and the other's file keeps its name.
    private func assertBusyAndTheOtherRunsFileKeepsItsName(
        _ files: PartialFiles,
        line: UInt = #line
    ) throws {
        let other = Mutex<Int32>(-1)
        var calls = SystemCalls.live
        calls.flock = { descriptor, operation in
            if other.withLock({ $0 }) < 0 {
                XCTAssertEqual(unlink(files.new), 0)
                let made = open(files.new, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                XCTAssertEqual(flock(made, LOCK_EX | LOCK_NB), 0)
                other.withLock { $0 = made }
            }
            return SystemCalls.live.flock(descriptor, operation)
        }
        defer { close(other.withLock { $0 }) }
        XCTAssertThrowsError(try OutputFile.temporary(files, calls: calls), line: line) {
            XCTAssertEqual($0 as? OutputFile.ClaimError, .busy, line: line)
        }
        XCTAssertEqual(
            FileIdentity(path: files.new), FileIdentity(descriptor: other.withLock { $0 }),
            "the other run's new file lost its name", line: line)
    }
}

final class SpotCheckTests: XCTestCase {
    /// Samples lie inside the bytes done, never across a gap, sorted and disjoint.
    func testSamplesLieInsideTheBytesDone() {
        var random = SplitMix64(seed: 10)
        let cases: [(done: [ByteRange], count: Int, length: Int64)] = [
            ([ByteRange(0, 100)], 3, 16),
            ([ByteRange(0, 10), ByteRange(50, 55), ByteRange(90, 200)], 3, 16),
            ([ByteRange(5, 6)], 3, 16),
            ([ByteRange((1 << 32) - 3, (1 << 32) + 3)], 2, 4),
            ([], 3, 16)
        ]
        for (done, count, length) in cases {
            let set = RangeSet(done)
            for _ in 0..<200 {
                let samples = SpotCheck.samples(of: set, count: count, length: length, using: &random)
                XCTAssertEqual(samples.isEmpty, done.isEmpty, "\(done)")
                XCTAssertLessThanOrEqual(samples.count, count)
                for sample in samples {
                    XCTAssertTrue(set.contains(sample), "\(sample) outside \(done)")
                    XCTAssertLessThanOrEqual(sample.count, length)
                    XCTAssertFalse(sample.isEmpty)
                }
                XCTAssertEqual(samples, RangeSet(samples).ranges, "sorted and disjoint")
            }
        }
    }

    /// `firstDifference` with the bytes of `resource` on disk, against a
    /// server whose answers `faults` bend (and which serves `served`).
    private func firstDifference(
        of resource: Resource, served: Resource, faults: [FaultRule], size: Int64,
        samples: [ByteRange]
    ) throws -> Result<ByteRange?, DownloadError> {
        let server = RangeServer()
        server.setResource(served, at: "f")
        server.setFaults(faults)
        try server.start()
        defer { server.stop() }
        let path = NSTemporaryDirectory() + "spot-check-\(UUID().uuidString)"
        try Data(resource.bytes(in: 0..<resource.size)).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try OutputFile(existing: path, calls: .live)
        return Result { () throws(DownloadError) in
            try SpotCheck.firstDifference(
                in: file, url: server.url("f"), headersGivenFor: server.url("f"), size: size, samples: samples,
                options: TransferOptions())
        }
    }

    /// A sample fetched where a redirect of the user's URL led (another
    /// origin: another port) carries only the headers that cannot hold a
    /// credential, as the redirect itself would; at the URL's own origin,
    /// all of them.
    func testASampleAtAnotherOriginGetsNoCredential() throws {
        let resource = Resource.generated(size: 64 << 10, seed: 91)
        let server = RangeServer()
        server.setResource(resource, at: "f")
        try server.start()
        defer { server.stop() }
        var options = TransferOptions()
        options.headerLines = ["Authorization: Bearer secret", "User-Agent: sampler"]
        let elsewhere = "http://127.0.0.1:1/f"
        _ = try RangeFetch(
            url: server.url("f"), range: ByteRange(0, 1024), options: options, headersGivenFor: elsewhere)
        _ = try RangeFetch(
            url: server.url("f"), range: ByteRange(0, 1024), options: options, headersGivenFor: server.url("f"))
        let sent = server.statistics.requests.map(\.headers)
        XCTAssertEqual(sent.count, 2)
        XCTAssertNil(sent[0]["authorization"], "a credential went to another origin: \(sent[0])")
        XCTAssertEqual(sent[0]["user-agent"], "sampler")
        XCTAssertEqual(sent[1]["authorization"], "Bearer secret")
    }

    /// The same bytes agree; other bytes, or another length in a 206, are a difference.
    func testOtherBytesOrAnotherLengthAreADifference() throws {
        let resource = Resource.generated(size: 100_000, seed: 20)
        let samples = [ByteRange(1_000, 2_000), ByteRange(50_000, 50_016)]
        XCTAssertEqual(
            try firstDifference(of: resource, served: resource, faults: [], size: 100_000, samples: samples),
            .success(nil))
        XCTAssertEqual(
            try firstDifference(
                of: resource, served: Resource.generated(size: 100_000, seed: 21), faults: [],
                size: 100_000, samples: samples),
            .success(ByteRange(1_000, 2_000)))
        XCTAssertEqual(
            try firstDifference(
                of: resource, served: resource,
                faults: [FaultRule(.wrongContentRangeTotal(99_999))], size: 100_000,
                samples: samples),
            .success(ByteRange(1_000, 2_000)))
    }

    /// A 416 naming another length, like a 206 naming one, means the file
    /// changed (RELIABILITY.md 3). (It failed the check, and every later run alike.)
    func testA416NamingAnotherLengthIsADifference() throws {
        let resource = Resource.generated(size: 100_000, seed: 22)
        XCTAssertEqual(
            try firstDifference(
                of: resource, served: Resource.generated(size: 10_000, seed: 22), faults: [],
                size: 100_000, samples: [ByteRange(50_000, 50_016)]),
            .success(ByteRange(50_000, 50_016)))
    }

    /// A coded answer's offsets are not the file's, even where (as here) the
    /// coding is only a label: nothing is compared, the check fails and the
    /// partial download is kept. (Its body was compared as file bytes.)
    func testACodedAnswerIsNotCompared() throws {
        let resource = Resource.generated(size: 100_000, seed: 23)
        let result = try firstDifference(
            of: resource, served: resource, faults: [FaultRule(.gzipEncoding)], size: 100_000,
            samples: [ByteRange(1_000, 2_000)])
        guard case let .failure(.server(_, message, _)) = result else { return XCTFail("compared: \(result)") }
        XCTAssertTrue(
            message.contains("bytes 1000..<2000 were not served as asked (ranged response with Content-Encoding gzip)"),
            message)
    }
}
