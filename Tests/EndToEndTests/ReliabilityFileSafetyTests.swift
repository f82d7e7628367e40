// Issue 12, the files rangeget keeps (RELIABILITY.md, "Added after the first
// release"): a `.part` that is not rangeget's is never taken over, links are
// never followed, a file that appears at the output is never replaced without
// --force, a server-chosen size never fills the disk, a resume without
// validators never splices a changed file, and a power cut can cost only the
// write journal, never the durable manifest.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class ReliabilityFileSafetyTests: EndToEndTestCase {
    private func inode(_ path: String) -> ino_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_ino : nil
    }

    // MARK: A .part that is not rangeget's

    /// Issue 12 (5): a browser's in-progress `name.part` (no manifest, no
    /// mark) was truncated and reused. It is refused with exit 2 and a way
    /// on; --restart discards it.
    func testAForeignPartFileIsRefusedAndRestartDiscardsIt() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 1201)
        server.setResource(resource, at: "f")
        let output = path("f")
        let foreign = Data("a browser's download in progress".utf8)
        _ = FileManager.default.createFile(atPath: output + ".part", contents: foreign)
        let before = inode(output + ".part")

        let refused = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertEqual(refused.stderr.split(separator: "\n").count, 1, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("not made by rangeget"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--restart"), refused.stderr)
        XCTAssertEqual(FileManager.default.contents(atPath: output + ".part"), foreign, "the foreign file is untouched")
        XCTAssertEqual(inode(output + ".part"), before)
        XCTAssertEqual(directoryEntries(), ["f.part"], "no manifest, journal or mark was added")
        XCTAssertFalse(
            server.statistics.requests.contains { $0.method == "GET" }, "nothing was fetched for a refused file")

        let restarted = try CLI.run(["-q", "--restart", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(restarted.status, 0, restarted.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(directoryEntries(), ["f"])
    }

    /// rangeget's own `.part` of a single stream of unknown length has no
    /// manifest; its mark still makes it rangeget's: killed and run again, it
    /// starts over. One of known length keeps a manifest of the bytes from 0
    /// it has (issue 14): run again while the server still serves no ranges,
    /// it starts over too, saying why.
    func testOwnSingleStreamPartialIsRecognisedWithoutAManifest() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 1202)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        let output = path("f")
        for fault in [Fault.chunkedNoLength, .ignoreRange] {
            server.setFaults([FaultRule(fault)])
            server.setRatePerConnection(2 << 20)
            let child = try launch(["-q", "-o", output, server.url("f")])
            XCTAssertTrue(
                wait(timeout: 20) { fileSize(output + ".part") > 1 << 20 }, "\(fault): the stream is under way")
            child.kill9()
            let knownLength = fault == .ignoreRange
            XCTAssertEqual(
                FileManager.default.fileExists(atPath: output + ".part.json"), knownLength,
                "\(fault): a manifest only where the length is known")

            server.setRatePerConnection(nil)
            let run = try CLI.run(["-o", output, server.url("f")], in: directory)
            XCTAssertEqual(run.status, 0, run.stderr)
            if knownLength { XCTAssertTrue(run.stderr.contains("from the start"), run.stderr) }
            assertSameBytes(output, resource)
            XCTAssertEqual(directoryEntries(), ["f"])
            try FileManager.default.removeItem(atPath: output)
        }
    }

    /// Issue 12 (5): a hard link or a symbolic link at `.part` (to a file
    /// elsewhere) is never written through: refused with exit 2; --restart
    /// removes only the link's name and downloads into a new file.
    func testLinksAtThePartFileAreNeverWrittenThrough() throws {
        let resource = Resource.generated(size: 100_000, seed: 1203)
        server.setResource(resource, at: "f")
        let output = path("f")
        let victim = path("victim")
        let precious = Data("do not touch".utf8)
        for kind in ["hard link", "symbolic link"] {
            _ = FileManager.default.createFile(atPath: victim, contents: precious)
            if kind == "hard link" {
                try FileManager.default.linkItem(atPath: victim, toPath: output + ".part")
            } else {
                try FileManager.default.createSymbolicLink(atPath: output + ".part", withDestinationPath: victim)
            }
            let refused = try CLI.run(["-q", "-o", output, server.url("f")], in: directory)
            XCTAssertEqual(refused.status, 2, "\(kind): \(refused.stderr)")
            XCTAssertTrue(refused.stderr.contains("--restart"), "\(kind): \(refused.stderr)")
            XCTAssertEqual(FileManager.default.contents(atPath: victim), precious, "\(kind): written through")

            let restarted = try CLI.run(["-q", "--restart", "-o", output, server.url("f")], in: directory)
            XCTAssertEqual(restarted.status, 0, "\(kind): \(restarted.stderr)")
            XCTAssertEqual(FileManager.default.contents(atPath: victim), precious, "\(kind): written through")
            assertSameBytes(output, resource)
            XCTAssertEqual(directoryEntries(), ["f", "victim"], kind)
            try FileManager.default.removeItem(atPath: output)
        }
    }

    /// Issue 12 (5): a hard link planted at the manifest's or the write
    /// journal's temporary file was truncated and written through (`O_TRUNC`
    /// without `O_EXCL`); a symbolic link at the manifest is never read.
    func testLinksAtTheManifestAndItsTemporaryFilesAreNeverFollowed() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 1204)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        let output = path("f")
        let precious = Data("do not touch".utf8)
        let victims = [path("victim-manifest"), path("victim-journal")]
        for (victim, name) in zip(victims, [output + ".part.json.tmp", output + ".part.journal.tmp"]) {
            _ = FileManager.default.createFile(atPath: victim, contents: precious)
            try FileManager.default.linkItem(atPath: victim, toPath: name)
        }
        let run = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        for victim in victims {
            XCTAssertEqual(FileManager.default.contents(atPath: victim), precious, "\(victim) was written through")
        }

        let victim = victims[0]
        _ = FileManager.default.createFile(atPath: output + ".part", contents: Data(count: 4096))
        try FileManager.default.createSymbolicLink(atPath: output + ".part.json", withDestinationPath: victim)
        let linked = try CLI.run(["-q", "--force", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(linked.status, 4, linked.stderr)
        XCTAssertTrue(linked.stderr.contains("symbolic link"), linked.stderr)
        XCTAssertTrue(linked.stderr.contains("--restart"), linked.stderr)
        XCTAssertEqual(FileManager.default.contents(atPath: victim), precious)
    }

    // MARK: A file that appears at the output

    /// Issue 12 (6): the final rename replaced a file that appeared at the
    /// output after the start. Without --force it is kept (exit 2), the data
    /// stays complete in `.part`, and --force then finishes without a byte fetched again.
    func testAFileThatAppearsAtTheOutputDuringTheDownloadIsNeverReplaced() throws {
        let size: Int64 = 8 << 20
        let resource = Resource.generated(size: size, seed: 1205)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let child = try launch(["-q", "-n", "4", "-o", output, server.url("f")])
        XCTAssertTrue(wait(timeout: 20) { claimedBytes(output + ".part.json") > 0 }, "the download is under way")
        let precious = Data("appeared meanwhile".utf8)
        _ = FileManager.default.createFile(atPath: output, contents: precious)
        server.setRatePerConnection(nil)
        let run = child.finish(timeout: 60)
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("appeared"), run.stderr)
        XCTAssertTrue(run.stderr.contains("--force"), run.stderr)
        XCTAssertEqual(FileManager.default.contents(atPath: output), precious, "the file that appeared was replaced")
        assertSameBytes(output + ".part", resource)

        server.resetStatistics()
        let forced = try CLI.run(["-q", "--force", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(server.statistics.bodyBytesSent, 0, "nothing fetched again")
        XCTAssertEqual(directoryEntries(), ["f"])
    }

    // MARK: A size that does not fit

    /// Issue 12 (7): a server-chosen size larger than the free space is
    /// refused before a byte is written: exit 4, one line naming the free
    /// space, and no `.part` (nor anything else) left behind. Segmented, and
    /// as one stream (ranges ignored).
    func testAServerChosenSizeBeyondTheFreeSpaceFailsAndLeavesNothing() throws {
        // 1 EiB: more than any disk the tests run on (and than ext4 allows,
        // so the old posix_fallocate failed at once instead of filling the disk).
        let resource = Resource.generated(size: 1 << 60, seed: 1206)
        server.setResource(resource, at: "huge")
        for (name, faults) in [("segmented", [FaultRule]()), ("one stream", [FaultRule(.ignoreRange)])] {
            server.setFaults(faults)
            let run = try CLI.run(["-q", "-n", "4", "-o", path("huge"), server.url("huge")], in: directory, timeout: 30)
            XCTAssertEqual(run.status, 4, "\(name): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "\(name): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("free"), "\(name): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("No space left on device"), "\(name): \(run.stderr)")
            XCTAssertEqual(directoryEntries(), [], "\(name): nothing left behind")
        }
    }

    // MARK: A resume without validators

    /// Interrupts a throttled download of `original` with SIGINT once some of
    /// it is durable, serves `replacement` instead, and runs the same command again.
    private func interruptAndResume(_ original: Resource, then replacement: Resource) throws -> (
        run: Run, done: [Range<Int64>]
    ) {
        server.setResource(original, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let stopped = try interrupted(
            ["-q", "-n", "4", "-o", output, server.url("f")], once: "a checkpoint recorded progress"
        ) {
            ManifestFile.doneBytes(output + ".part.json") >= 2 << 20
        }
        XCTAssertEqual(stopped.status, 130)
        let done = ManifestFile.done(output + ".part.json")
        server.setResource(replacement, at: "f")
        server.setRatePerConnection(nil)
        server.resetStatistics()
        return (try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory), done)
    }

    /// A 16 MiB file whose server sends neither ETag nor Last-Modified.
    private func withoutValidators(seed: UInt64) -> Resource {
        var resource = Resource.generated(size: 16 << 20, seed: seed)
        resource.etag = nil
        resource.lastModified = nil
        return resource
    }

    /// Issue 12 (10): with neither ETag nor Last-Modified, a file that changed
    /// but kept its size was spliced on resume. Samples of the bytes on disk
    /// are compared with the server's first: they differ, so it starts over.
    func testAResumeWithoutValidatorsStartsOverWhenSamplesDiffer() throws {
        let replacement = withoutValidators(seed: 1208)
        let (run, _) = try interruptAndResume(withoutValidators(seed: 1207), then: replacement)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("changed"), run.stderr)
        XCTAssertTrue(run.stderr.contains("no ETag or Last-Modified"), run.stderr)
        assertSameBytes(path("f"), replacement)
    }

    /// The same resume of an unchanged file fetches again only the samples:
    /// at most three small ranges of the bytes already on disk.
    func testAResumeWithoutValidatorsOfAnUnchangedFileFetchesOnlyTheSamplesAgain() throws {
        let resource = withoutValidators(seed: 1209)
        let (run, done) = try interruptAndResume(resource, then: resource)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("resuming"), run.stderr)
        XCTAssertFalse(run.stderr.contains("changed"), run.stderr)
        assertSameBytes(path("f"), resource)
        let again = server.requestedRanges.filter { range in done.contains { $0.overlaps(range) } }
        XCTAssertGreaterThan(again.count, 0, "samples were fetched")
        XCTAssertLessThanOrEqual(again.count, 3, "\(again)")
        for range in again {
            XCTAssertLessThanOrEqual(range.count, 16 << 10, "a sample is small: \(range)")
            XCTAssertTrue(
                done.contains { $0.contains(range.lowerBound) && $0.upperBound >= range.upperBound },
                "a sample lies inside the bytes on disk: \(range)")
        }
    }

    // MARK: A power cut

    /// Issue 12 (13): the quick save (twenty a second) renamed a manifest that
    /// was never fsynced over the durable one; on XFS, or ext4 with
    /// noauto_da_alloc, a power cut can then leave an empty manifest (exit 4,
    /// all progress lost). Every manifest that stands at `OUTPUT.part.json`
    /// after the first durable save must have been fsynced before it got
    /// there, while the write journal still records what was written.
    func testTheManifestIsOnlyEverReplacedByAFsyncedOne() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 1210)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let manifest = output + ".part.json"
        let probe = DiskProbe(resource: resource)
        let seen = Mutex<(samples: Int, unsynced: [String], quickAhead: Bool)>((0, [], false))
        let durableSaved = Atomic<Bool>(false)
        let run = runLibrary(
            [server.url("f")], to: output, probe: probe,
            stopWhen: { [probe] event in
                if case .transfer(.checkpoint) = event { durableSaved.store(true, ordering: .relaxed) }
                guard case .progress = event, durableSaved.load(ordering: .relaxed),
                    let data = FileManager.default.contents(atPath: manifest)
                else { return false }
                let synced = probe.synced(manifest + ".tmp").contains(data)
                let quick = RangeSet(ManifestFile.journalWritten(manifest).map(ByteRange.init))
                seen.withLock { seen in
                    seen.samples += 1
                    if !synced { seen.unsynced.append(String(decoding: data.prefix(200), as: UTF8.self)) }
                    if quick.byteCount > 0 { seen.quickAhead = true }
                }
                return false
            },
            configure: { options in
                options.connections = 4
                options.checkpointInterval = 0.5
            })
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        let result = seen.withLock { $0 }
        XCTAssertGreaterThan(result.samples, 10, "the manifest was sampled while the download ran")
        XCTAssertEqual(
            result.unsynced.count, 0,
            "\(result.unsynced.count) of \(result.samples) samples found a manifest that was never fsynced: "
                + "\(result.unsynced.first ?? "")")
        XCTAssertTrue(result.quickAhead, "the write journal recorded bytes ahead of the durable manifest")
    }

    /// What a power cut can leave of the write journal (an empty file) costs
    /// only the journal: the same command resumes from the durable manifest
    /// (no exit 4) and asks for none of its bytes again.
    func testAPowerCutThatEmptiesTheJournalCostsOnlyTheJournal() throws {
        let size: Int64 = 16 << 20
        let resource = Resource.generated(size: size, seed: 1211)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let manifest = output + ".part.json"
        let child = try launch(["-q", "-n", "4", "-o", output, server.url("f")])
        XCTAssertTrue(
            wait(timeout: 20) {
                let durable = ManifestFile.doneBytes(manifest)
                return durable >= 2 << 20 && claimedBytes(manifest) > durable
            }, "durable progress, and the journal ahead of it")
        child.kill9()
        let done = ManifestFile.done(manifest)
        try Data().write(to: URL(fileURLWithPath: ManifestFile.journalPath(manifest)))

        server.setRatePerConnection(nil)
        server.resetStatistics()
        let run = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("resuming"), run.stderr)
        assertSameBytes(output, resource)
        assertNotAskedAgain(done, in: server.requestedRanges, saved: "durably")
    }
}
