// Issue 15: a list into a directory on a network file system (NFS, a
// FUSE mount). Such a file system has no unnamed files (O_TMPFILE), no
// extended attributes and no renameat2(RENAME_NOREPLACE), and each name it
// looks up or changes is a round trip, taken one at a time per directory (a
// directory's operations hold its lock). Here the `SystemCalls` seam refuses
// those three calls as NFS does, and counts the names a list changes: two
// created per file (its `.part` and the mark beside it), one linked and two
// removed, none removed that is not there, and no `.part` removed while
// still open (NFS would rename it to `.nfsXXXX` and remove that at the close,
// two more round trips). (Lookups, `lstat`, do not go through the seam:
// `Benchmarks/run small-slowmeta` counts them in its wall time.)
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
            errno = EOPNOTSUPP
            return -1
        }
        calls.fsetxattr = { _, _, _ in
            errno = ENOTSUP
            return -1
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
            if path.hasSuffix(".part"), Self.isOpen(path) { counts.removedOpen.withLock { $0.append(path) } }
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

    /// Downloads `count` small files into out/ as a list does: at once,
    /// committed through one SyncGroup, with the directory read once.
    private func downloadList(_ count: Int, size: Int64 = 16 << 10, calls: SystemCalls) throws -> [Resource] {
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
                do { _ = try download.run { _ in } } catch { failures.withLock { $0.append("f\(index).bin: \(error)") } }
                finished.leave()
            }
        }
        XCTAssertEqual(finished.wait(timeout: .now() + 60), .success, "the list never ended")
        XCTAssertEqual(failures.withLock { $0 }, [])
        for (index, resource) in resources.enumerated() { assertSameBytes(path("out/f\(index).bin"), resource) }
        return resources
    }

    /// Each file: its `.part` and its mark created, the `.part` linked to
    /// the final name, then both removed, and nothing else: no temporary
    /// mark renamed into place, no removal that finds nothing, renameat2
    /// tried once in the whole run, and every `.part` closed before its name goes.
    func testAListIntoANetworkFileSystemChangesFiveNamesPerFile() throws {
        let counts = NameCalls()
        let count = 6
        _ = try downloadList(count, calls: networkCalls(counting: counts))
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted()
        XCTAssertEqual(names, (0..<count).map { "f\($0).bin" }.sorted(), "only the final names are left")
        XCTAssertEqual(counts.creates.withLock { $0 }.sorted(), Array(repeating: ".part", count: count)
            + Array(repeating: ".part.mark", count: count))
        XCTAssertEqual(counts.unlinks.withLock { $0 }.sorted(), Array(repeating: ".part", count: count)
            + Array(repeating: ".part.mark", count: count))
        XCTAssertEqual(counts.failedUnlinks.withLock { $0 }, [], "a removal found no name there")
        XCTAssertEqual(counts.renames.load(ordering: .relaxed), 0, "a mark or a file was renamed")
        XCTAssertEqual(counts.links.load(ordering: .relaxed), count)
        XCTAssertEqual(counts.renamesNoReplace.load(ordering: .relaxed), 1,
                       "renameat2 was tried again after the file system refused it")
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
        _ = try downloadList(3, calls: networkCalls(counting: NameCalls()))
        XCTAssertEqual(FileManager.default.contents(atPath: victim), Data("precious".utf8))
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted()
        XCTAssertEqual(names, ["f0.bin", "f1.bin", "f2.bin"])
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
            if path.hasSuffix(".part") { _ = unlink(path) }
        }
        _ = try downloadList(3, calls: networkCalls(counting: counts))
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted()
        XCTAssertEqual(names, ["f0.bin", "f1.bin", "f2.bin"])
    }
}
