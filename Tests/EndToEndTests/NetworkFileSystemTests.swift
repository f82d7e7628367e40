// Issue 15: a list into a directory on a network file system (NFS, a
// FUSE mount). Such a file system has no unnamed files (O_TMPFILE), no
// extended attributes and no renameat2(RENAME_NOREPLACE), and each name it
// looks up or changes is a round trip, taken one at a time per directory (a
// directory's operations hold its lock). Here the `SystemCalls` seam refuses
// those three calls as NFS does, and counts the names a list changes: for a
// small file fetched whole, three (its `OUTPUT.part.new` created, linked to
// the final name, removed); for a larger one, five (its `.part` and the mark
// beside it created, the `.part` linked, both removed); none removed that is
// not there, and no data file removed while still open (NFS would rename it
// to `.nfsXXXX` and remove that at the close, two more round trips).
// (Lookups, `lstat`, do not go through the seam: `Benchmarks/run
// small-slowmeta` counts them in its wall time.)
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class NetworkFileSystemTests: EndToEndTestCase {
    /// The names a run changed, by call: each entry the name's suffix after the file's own name.
    private final class NameCalls: Sendable {
        let creates = Mutex<[String]>([])
        let unlinks = Mutex<[String]>([])
        let failedUnlinks = Mutex<[String]>([])
        let renames = Atomic<Int>(0)
        let renamesNoReplace = Atomic<Int>(0)
        let unnamedOpens = Atomic<Int>(0)
        let links = Atomic<Int>(0)
        /// `.part` files removed while this process had them open.
        let removedOpen = Mutex<[String]>([])
        /// `.part` files removed while their manifest was still beside them.
        let manifestsAtUnlink = Mutex<[String]>([])
        /// Runs before each unlink, with its path.
        let beforeUnlink: @Sendable (String) -> Void

        init(beforeUnlink: @escaping @Sendable (String) -> Void = { _ in }) {
            self.beforeUnlink = beforeUnlink
        }
    }

    /// The live calls, but refusing what NFS refuses, and counted in `counts`.
    private func networkCalls(counting counts: NameCalls) -> SystemCalls {
        let live = SystemCalls.live
        var calls = live
        calls.openUnnamed = { _ in
            counts.unnamedOpens.add(1, ordering: .relaxed)
            errno = EOPNOTSUPP
            return -1
        }
        calls.fsetxattr = { _, _, _ in
            errno = ENOTSUP
            return -1
        }
        // NFS emulates flock with a byte-range lock: an exclusive one wants a file open for writing.
        calls.flock = { descriptor, operation in
            if operation & LOCK_EX != 0, fcntl(descriptor, F_GETFL) & O_ACCMODE == O_RDONLY {
                errno = EBADF
                return -1
            }
            return live.flock(descriptor, operation)
        }
        calls.renameNoReplace = { _, _ in
            counts.renamesNoReplace.add(1, ordering: .relaxed)
            errno = EINVAL
            return -1
        }
        calls.open = { path, flags, mode in
            if flags & O_CREAT != 0 { counts.creates.withLock { $0.append(Self.suffix(path)) } }
            return live.open(path, flags, mode)
        }
        calls.unlink = { path in
            if Self.isData(path), Self.isOpen(path) { counts.removedOpen.withLock { $0.append(path) } }
            if path.hasSuffix(".part"), FileManager.default.fileExists(atPath: path + ".json") {
                counts.manifestsAtUnlink.withLock { $0.append(path) }
            }
            counts.beforeUnlink(path)
            let result = live.unlink(path)
            let code = errno
            if result == 0 {
                counts.unlinks.withLock { $0.append(Self.suffix(path)) }
            } else {
                counts.failedUnlinks.withLock { $0.append(Self.suffix(path)) }
            }
            errno = code
            return result
        }
        calls.rename = { from, to in
            counts.renames.add(1, ordering: .relaxed)
            return live.rename(from, to)
        }
        calls.link = { from, to in
            counts.links.add(1, ordering: .relaxed)
            return live.link(from, to)
        }
        return calls
    }

    /// True for a data file's name: `.part`, or `.part.new` (a small file's).
    private static func isData(_ path: String) -> Bool { path.hasSuffix(".part") || path.hasSuffix(".part.new") }

    /// What follows the file's own name `fN.bin` in `path` ("" for the final name).
    private static func suffix(_ path: String) -> String {
        let name = (path as NSString).lastPathComponent
        guard let end = name.range(of: ".bin")?.upperBound else { return name }
        return String(name[end...])
    }

    /// True when this process has the file named `path` open (compared by
    /// device and inode: a path spelt through a symbolic link still counts).
    private static func isOpen(_ path: String) -> Bool {
        var named = stat()
        guard lstat(path, &named) == 0 else { return false }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.contains { fd in
            var info = stat()
            guard let number = Int32(fd), fstat(number, &info) == 0 else { return false }
            return info.st_dev == named.st_dev && info.st_ino == named.st_ino
        }
    }

    /// Downloads `count` small files into out/ as a list does: at once
    /// (unless `inTurn`: each after the one before has ended), committed
    /// through one SyncGroup, with the directory read once.
    private func downloadList(
        _ count: Int, size: Int64 = 16 << 10, inTurn: Bool = false,
        calls: SystemCalls
    ) throws -> [Resource] {
        let out = path("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let resources = (0..<count).map { Resource.generated(size: size, seed: 2300 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: "f\(index).bin") }
        // Read as a list reads its directory when its run begins.
        let shared = try XCTUnwrap(SharedDirectory(directory: out, limit: 64))
        let group = SyncGroup()
        let failures = Mutex<[String]>([])
        let finished = DispatchGroup()
        for index in 0..<count {
            var options = DownloadOptions()
            options.syncGroup = group
            options.sharedDirectory = shared
            options.systemCalls = calls
            let download = Download(url: server.url("f\(index).bin"), destination: .directory(out), options: options)
            finished.enter()
            Thread.detachNewThread {
                do { _ = try download.run { _ in } } catch {
                    failures.withLock { $0.append("f\(index).bin: \(error)") }
                }
                finished.leave()
            }
            if inTurn { XCTAssertEqual(finished.wait(timeout: .now() + 60), .success, "f\(index).bin never ended") }
        }
        XCTAssertEqual(finished.wait(timeout: .now() + 60), .success, "the list never ended")
        XCTAssertEqual(failures.withLock { $0 }, [])
        for (index, resource) in resources.enumerated() { assertSameBytes(path("out/f\(index).bin"), resource) }
        return resources
    }

    /// Each small file: its `.part.new` created, linked to the final name,
    /// then removed, and nothing else: no mark, no removal that finds
    /// nothing, renameat2 tried once in the whole run, and every file closed
    /// before its old name goes.
    func testAListOfSmallFilesIntoANetworkFileSystemChangesThreeNamesPerFile() throws {
        let counts = NameCalls()
        let count = 6
        _ = try downloadList(count, calls: networkCalls(counting: counts))
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted()
        XCTAssertEqual(names, (0..<count).map { "f\($0).bin" }.sorted(), "only the final names are left")
        XCTAssertEqual(counts.creates.withLock { $0 }, Array(repeating: ".part.new", count: count))
        XCTAssertEqual(counts.unlinks.withLock { $0 }, Array(repeating: ".part.new", count: count))
        XCTAssertEqual(counts.failedUnlinks.withLock { $0 }, [], "a removal found no name there")
        XCTAssertEqual(counts.renames.load(ordering: .relaxed), 0, "a file was renamed")
        XCTAssertEqual(counts.links.load(ordering: .relaxed), count)
        XCTAssertEqual(
            counts.renamesNoReplace.load(ordering: .relaxed), 1,
            "renameat2 was tried again after the file system refused it")
        XCTAssertEqual(counts.removedOpen.withLock { $0 }, [], "a data file was removed while still open")
    }

    /// A file system without unnamed files is asked for one once per run
    /// and directory, not once per file: the files after the first go
    /// straight to their `.part.new`.
    func testUnnamedFilesAreTriedOnceWhereTheFileSystemRefusedOne() throws {
        let counts = NameCalls()
        _ = try downloadList(3, inTurn: true, calls: networkCalls(counting: counts))
        XCTAssertEqual(
            counts.unnamedOpens.load(ordering: .relaxed), 1,
            "an unnamed file was asked for again after the file system refused one")
        XCTAssertEqual(counts.creates.withLock { $0 }, Array(repeating: ".part.new", count: 3))
    }

    /// A larger file: its `.part` and its mark created, the `.part` linked,
    /// both removed; the mark written in place, never renamed into place.
    func testALargerFileKeepsItsPartAndAMarkWrittenInPlace() throws {
        let counts = NameCalls()
        _ = try downloadList(2, size: 3 << 20, calls: networkCalls(counting: counts))
        let data = counts.creates.withLock { $0 }.filter {
            !$0.hasPrefix(".part.json") && !$0.hasPrefix(".part.journal")
        }
        XCTAssertEqual(data.sorted(), [".part", ".part", ".part.mark", ".part.mark"])
        XCTAssertEqual(
            counts.unlinks.withLock { $0 }.filter { !$0.hasPrefix(".part.json") && !$0.hasPrefix(".part.journal") }
                .sorted(), [".part", ".part", ".part.mark", ".part.mark"])
        XCTAssertEqual(counts.links.load(ordering: .relaxed), 2)
        XCTAssertEqual(counts.removedOpen.withLock { $0 }, [], "a .part was removed while still open")
    }

    /// The mark is written in place, not through a temporary file: what a
    /// killed run left at its name (a mark of a file long gone, or a link
    /// someone planted) is removed, only its name, and never written through.
    func testAMarkLeftAtItsNameIsReplacedNotWrittenThrough() throws {
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
        let victim = path("victim")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: path("out/f0.bin.part.mark"), withDestinationPath: victim)
        try FileManager.default.linkItem(atPath: victim, toPath: path("out/f1.bin.part.mark"))
        try Data("{\"device\":1,\"inode\":2}".utf8).write(to: URL(fileURLWithPath: path("out/f2.bin.part.mark")))
        _ = try downloadList(3, size: 3 << 20, calls: networkCalls(counting: NameCalls()))
        XCTAssertEqual(FileManager.default.contents(atPath: victim), Data("precious".utf8))
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted()
        XCTAssertEqual(names, ["f0.bin", "f1.bin", "f2.bin"])
    }

    /// What a killed run left at a small file's `.part.new` (its file, or a
    /// link someone planted) is replaced, only its name removed, never
    /// written through; one another run holds (locked) is that run's: the
    /// file fails as busy, and the file there is left alone.
    func testAPartNewLeftBehindIsReplacedAndOneInUseIsLeftAlone() throws {
        let out = path("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let victim = path("victim")
        try Data("precious".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: out + "/f0.bin.part.new", withDestinationPath: victim)
        try FileManager.default.linkItem(atPath: victim, toPath: out + "/f1.bin.part.new")
        try Data("a killed run's".utf8).write(to: URL(fileURLWithPath: out + "/f2.bin.part.new"))
        _ = try downloadList(3, calls: networkCalls(counting: NameCalls()))
        XCTAssertEqual(FileManager.default.contents(atPath: victim), Data("precious".utf8))
        XCTAssertEqual(
            ((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).sorted(),
            ["f0.bin", "f1.bin", "f2.bin"])

        let busy = out + "/held.bin.part.new"
        try Data("another run's".utf8).write(to: URL(fileURLWithPath: busy))
        let holder = open(busy, O_RDWR | O_CLOEXEC)
        defer { close(holder) }
        XCTAssertEqual(flock(holder, LOCK_EX | LOCK_NB), 0)
        server.setResource(Resource.generated(size: 16 << 10, seed: 2399), at: "held.bin")
        var options = DownloadOptions()
        options.systemCalls = networkCalls(counting: NameCalls())
        let download = Download(url: server.url("held.bin"), destination: .directory(out), options: options)
        XCTAssertThrowsError(try download.run { _ in }) { error in
            XCTAssertTrue("\(error)".contains("another rangeget"), "\(error)")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: busy), Data("another run's".utf8))
        XCTAssertFalse(FileManager.default.fileExists(atPath: out + "/held.bin"))
    }

    /// A file with a manifest (larger than one response brings whole):
    /// its manifest is gone before the `.part` is closed and its name
    /// removed, so a run that takes that name in between never finds the
    /// manifest that would make the finished file look like its partial
    /// download to resume (and truncate).
    func testTheManifestIsGoneBeforeTheLockIsLet() throws {
        let counts = NameCalls()
        _ = try downloadList(2, size: 3 << 20, calls: networkCalls(counting: counts))
        XCTAssertEqual(counts.links.load(ordering: .relaxed), 2, "the files were not published by a link")
        XCTAssertEqual(counts.manifestsAtUnlink.withLock { $0 }, [], "a .part was let go with its manifest beside it")
        XCTAssertEqual(counts.removedOpen.withLock { $0 }, [], "a .part was removed while still open")
    }

    /// Another run (`--restart`) removes the old name between the link and
    /// the unlink: the file is in place, and the download is no failure.
    func testAnOldNameAnotherRunRemovedIsNoFailure() throws {
        let counts = NameCalls { path in
            if Self.isData(path) { _ = unlink(path) }
        }
        _ = try downloadList(3, calls: networkCalls(counting: counts))
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted()
        XCTAssertEqual(names, ["f0.bin", "f1.bin", "f2.bin"])
    }

    /// A small file `name` served, to be fetched into out/, and the
    /// network calls that have another program take its final name just
    /// before the link that would give it that name.
    private func smallFileTakenMeanwhile(
        _ name: String, seed: UInt64
    ) throws -> (out: String, output: String, resource: Resource, calls: SystemCalls) {
        let out = path("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let resource = Resource.generated(size: 16 << 10, seed: seed)
        server.setResource(resource, at: name)
        let output = out + "/" + name
        var calls = networkCalls(counting: NameCalls())
        let link = calls.link
        calls.link = { from, to in
            if to == output { try? Data("someone else's".utf8).write(to: URL(fileURLWithPath: output)) }
            return link(from, to)
        }
        return (out, output, resource, calls)
    }

    /// A small file whose final name another program takes while it is
    /// fetched: its data moves from `.part.new` to a marked `.part`, with a
    /// manifest that says it is complete, as the message says; the file
    /// there is left alone.
    func testASmallFileWhoseNameIsTakenMeanwhileStaysAsItsPart() throws {
        let (out, output, resource, calls) = try smallFileTakenMeanwhile("taken.bin", seed: 2398)
        var options = DownloadOptions()
        options.systemCalls = calls
        let download = Download(url: server.url("taken.bin"), destination: .directory(out), options: options)
        XCTAssertThrowsError(try download.run { _ in }) { error in
            XCTAssertTrue(
                "\(error)".contains("appeared during the download (the data stays in \(output).part)"), "\(error)")
        }
        XCTAssertEqual(FileManager.default.contents(atPath: output), Data("someone else's".utf8))
        assertSameBytes(output + ".part", resource)
        XCTAssertTrue(
            Manifest.isPartialDownload(dataFile: output + ".part"), "the kept .part is not marked as rangeget's")
        XCTAssertEqual(
            ((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).sorted(),
            ["taken.bin", "taken.bin.part", "taken.bin.part.json", "taken.bin.part.mark"])
    }

    /// The same, where the mark file beside the kept `.part` cannot be
    /// written: the download fails saying so, and the `.part.new` name,
    /// only rangeget's, stays as the mark, so a later run takes the
    /// `.part` where it would refuse an unmarked one (with no manifest, it
    /// fetches the file again). The next run meets the same failure, and
    /// leaves the `.part.new` name too: it goes only once the `.part` is marked.
    func testAKeptSmallFileWhoseMarkCannotBeWrittenKeepsItsPartNewAsTheMark() throws {
        var (out, output, resource, calls) = try smallFileTakenMeanwhile("nomark.bin", seed: 2396)
        let open = calls.open
        let failingMark: @Sendable (String, Int32, mode_t) -> Int32 = { path, flags, mode in
            if path.hasSuffix(".part.mark") {
                errno = EIO
                return -1
            }
            return open(path, flags, mode)
        }
        calls.open = failingMark
        var options = DownloadOptions()
        options.systemCalls = calls
        let download = Download(url: server.url("nomark.bin"), destination: .directory(out), options: options)
        XCTAssertThrowsError(try download.run { _ in })
        assertSameBytes(output + ".part", resource)
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: output + ".part.new"), "the .part.new name, its mark, went")

        // The next run, with the name free again, cannot mark the `.part` either.
        try FileManager.default.removeItem(atPath: output)
        var again = DownloadOptions()
        again.systemCalls = networkCalls(counting: NameCalls())
        again.systemCalls.open = failingMark
        XCTAssertThrowsError(
            try Download(url: server.url("nomark.bin"), destination: .directory(out), options: again)
                .run { _ in })
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: output + ".part.new"),
            "the .part.new name went before the .part was marked")

        // The run after, where the mark can be written: it takes the `.part`.
        try assertTheNextRunSaves("nomark.bin", into: out, resource, calls: networkCalls(counting: NameCalls()))
    }

    /// Runs a download of `name` into `out` and checks that it saves
    /// `resource` there, leaving nothing else in the directory.
    private func assertTheNextRunSaves(
        _ name: String, into out: String, _ resource: Resource,
        calls: SystemCalls = .live
    ) throws {
        var options = DownloadOptions()
        options.systemCalls = calls
        let result = try Download(url: server.url(name), destination: .directory(out), options: options).run { _ in }
        XCTAssertEqual(result.path, out + "/" + name)
        assertSameBytes(out + "/" + name, resource)
        XCTAssertEqual(((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []).sorted(), [name])
    }

    /// The same where unnamed files work but extended attributes do not
    /// (tmpfs before Linux 6.6): the unnamed file is linked as its
    /// `.part.new` before its `.part`, so that name marks it while the
    /// mark file cannot be written, and a later run takes the `.part`.
    func testAKeptUnnamedFileWhoseMarkCannotBeWrittenIsMarkedByItsPartNew() throws {
        let out = path("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let resource = Resource.generated(size: 16 << 10, seed: 2395)
        server.setResource(resource, at: "unnamed.bin")
        let output = out + "/unnamed.bin"
        var calls = SystemCalls.live
        calls.fsetxattr = { _, _, _ in
            errno = ENOTSUP
            return -1
        }
        let linkOpenFile = calls.linkOpenFile
        calls.linkOpenFile = { descriptor, to in
            if to == output { try? Data("someone else's".utf8).write(to: URL(fileURLWithPath: output)) }
            return linkOpenFile(descriptor, to)
        }
        let unnamedOpens = Atomic<Int>(0)
        let openUnnamed = calls.openUnnamed
        calls.openUnnamed = { directory in
            unnamedOpens.add(1, ordering: .relaxed)
            return openUnnamed(directory)
        }
        // While the mark file is tried, another run that met the `.part.new` would find it held.
        let heldWhileMarking = Mutex<Bool?>(nil)
        let open = calls.open
        calls.open = { path, flags, mode in
            if path.hasSuffix(".part.mark") {
                let other = Glibc.open(output + ".part.new", O_RDWR | O_CLOEXEC)
                heldWhileMarking.withLock {
                    $0 = other >= 0 && flock(other, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK
                }
                if other >= 0 { close(other) }
                errno = EIO
                return -1
            }
            return open(path, flags, mode)
        }
        var options = DownloadOptions()
        options.systemCalls = calls
        XCTAssertThrowsError(
            try Download(url: server.url("unnamed.bin"), destination: .directory(out), options: options)
                .run { _ in })
        XCTAssertEqual(unnamedOpens.load(ordering: .relaxed), 1, "the file was not fetched into an unnamed file")
        XCTAssertEqual(heldWhileMarking.withLock { $0 }, true, "the .part.new was not locked while it marked the .part")
        assertSameBytes(output + ".part", resource)
        XCTAssertTrue(FileManager.default.fileExists(atPath: output + ".part.new"), "no .part.new marks the .part")

        try FileManager.default.removeItem(atPath: output)
        try assertTheNextRunSaves("unnamed.bin", into: out, resource)
    }

    /// A small file whose write fails: the download fails saying so, and
    /// its `.part.new` goes with it (the next run would replace it, but a
    /// run that fetches the file another way would never see it).
    func testASmallFileThatFailsLeavesNoPartNew() throws {
        let out = path("out")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        server.setResource(Resource.generated(size: 16 << 10, seed: 2397), at: "fails.bin")
        var options = DownloadOptions()
        var calls = networkCalls(counting: NameCalls())
        let pwrite = calls.pwrite
        calls.pwrite = { descriptor, bytes, count, offset in
            if openPath(descriptor)?.hasSuffix(".part.new") == true {
                errno = EIO
                return -1
            }
            return pwrite(descriptor, bytes, count, offset)
        }
        options.systemCalls = calls
        let download = Download(url: server.url("fails.bin"), destination: .directory(out), options: options)
        XCTAssertThrowsError(try download.run { _ in }) { error in
            XCTAssertTrue("\(error)".contains("cannot write"), "\(error)")
        }
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? [], [])
    }
}
