// SystemCalls: every POSIX call by which a download changes the disk, behind
// a seam so tests can inject ENOSPC, EIO, EINTR and short writes without a
// real disk. Each closure of `live` is the C call and nothing more; retrying
// on EINTR is `retryingOnInterrupt`'s alone, around the seam, so an injected
// EINTR is retried like a real one. Reads (`read`, `pread`, `fstat`,
// `fgetxattr`) and `close` stay outside: they cannot run out of space, and
// what is durable never depends on them.
import CCurlShim
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The calls the store makes to change files and names on disk; `live` is
/// the real thing. Each returns -1 with `errno` set on failure.
package struct SystemCalls: Sendable {
    /// `open(2)`: a descriptor, or -1. Every file a download writes, and every directory it syncs, is opened here.
    package var open: @Sendable (_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32
    /// `pwrite(2)`: bytes written, or -1.
    package var pwrite: @Sendable (_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ offset: Int64) -> Int
    /// `ftruncate(2)`: 0 or -1.
    package var ftruncate: @Sendable (_ descriptor: Int32, _ length: Int64) -> Int32
    /// `posix_fallocate(3)`: 0 or -1 (the C function returns the error number; here it goes to `errno`, as for every other call).
    package var posixFallocate: @Sendable (_ descriptor: Int32, _ offset: Int64, _ length: Int64) -> Int32
    /// `flock(2)`: 0 or -1.
    package var flock: @Sendable (_ descriptor: Int32, _ operation: Int32) -> Int32
    /// `fsetxattr(2)` with no flags: 0 or -1.
    package var fsetxattr: @Sendable (_ descriptor: Int32, _ name: String, _ value: [UInt8]) -> Int32
    /// `fremovexattr(2)`: 0 or -1.
    package var fremovexattr: @Sendable (_ descriptor: Int32, _ name: String) -> Int32
    /// `fdatasync(2)`: 0 or -1.
    package var fdatasync: @Sendable (_ descriptor: Int32) -> Int32
    /// `fsync(2)`: 0 or -1.
    package var fsync: @Sendable (_ descriptor: Int32) -> Int32
    /// `syncfs(2)`: 0 or -1.
    package var syncfs: @Sendable (_ descriptor: Int32) -> Int32
    /// `sync_file_range(2)` of the whole file with `SYNC_FILE_RANGE_WRITE`: 0 or -1.
    package var syncFileRange: @Sendable (_ descriptor: Int32) -> Int32
    /// `rename(2)`: 0 or -1.
    package var rename: @Sendable (_ from: String, _ to: String) -> Int32
    /// `renameat2(2)` with `RENAME_NOREPLACE`: 0 or -1.
    package var renameNoReplace: @Sendable (_ from: String, _ to: String) -> Int32
    /// `link(2)`: 0 or -1.
    package var link: @Sendable (_ existing: String, _ new: String) -> Int32
    /// `unlink(2)`: 0 or -1.
    package var unlink: @Sendable (_ path: String) -> Int32
    /// `open(2)` of a file with no name in `directory` (`O_TMPFILE`): a descriptor, or -1.
    package var openUnnamed: @Sendable (_ directory: String) -> Int32
    /// `linkat(2)` of such a file to the name `new`, never over anything there: 0 or -1.
    package var linkOpenFile: @Sendable (_ descriptor: Int32, _ new: String) -> Int32

    /// The calls of the operating system.
    package static let live = SystemCalls(
        open: { Glibc.open($0, $1, $2) },
        pwrite: { Glibc.pwrite($0, $1, $2, off_t($3)) },
        ftruncate: { Glibc.ftruncate($0, off_t($1)) },
        posixFallocate: { descriptor, offset, length in
            let result = Glibc.posix_fallocate(descriptor, off_t(offset), off_t(length))
            if result == 0 { return 0 }
            errno = result
            return -1
        },
        flock: { lockFile($0, $1) },
        fsetxattr: { descriptor, name, value in rg_set_attribute(descriptor, name, value, value.count) },
        fremovexattr: { rg_remove_attribute($0, $1) },
        fdatasync: { Glibc.fdatasync($0) },
        fsync: { Glibc.fsync($0) },
        syncfs: { rg_sync_file_system($0) },
        syncFileRange: { rg_start_writeback($0) },
        rename: { Glibc.rename($0, $1) },
        renameNoReplace: { rg_rename_noreplace($0, $1) },
        link: { Glibc.link($0, $1) },
        unlink: { Glibc.unlink($0) },
        openUnnamed: { rg_open_unnamed($0) },
        linkOpenFile: { rg_link_open_file($0, $1) }
    )

    /// The calls of a system without Linux's own (`O_TMPFILE` and `linkat`
    /// of an open file, `renameat2`, `syncfs`, `sync_file_range`,
    /// `posix_fallocate`, extended attributes): each of those fails as a
    /// file system without it answers (EOPNOTSUPP; EINVAL for a rename that
    /// cannot refuse to replace), so the store takes its portable way: a
    /// named `.part` (no unnamed file), a link then an unlink for a rename
    /// that must not replace, an `fdatasync` of each file for a batch's
    /// `syncfs`, `ftruncate` for the preallocation, no attributes (with
    /// no record of the save, a rerun asks for a checksum before it calls
    /// a finished file complete). The suite runs
    /// downloads on these (`PortableCallsTests`), so the portable ways are
    /// tested on Linux; a port would make `live` these.
    package static let portable: SystemCalls = {
        var calls = SystemCalls.live
        let unsupported: @Sendable () -> Int32 = {
            errno = EOPNOTSUPP
            return -1
        }
        calls.openUnnamed = { _ in unsupported() }
        calls.linkOpenFile = { _, _ in unsupported() }
        calls.renameNoReplace = { _, _ in
            errno = EINVAL
            return -1
        }
        calls.syncfs = { _ in unsupported() }
        calls.syncFileRange = { _ in unsupported() }
        calls.posixFallocate = { _, _, _ in unsupported() }
        calls.fsetxattr = { _, _, _ in unsupported() }
        calls.fremovexattr = { _, _ in unsupported() }
        return calls
    }()

    /// Writes all of `count` bytes at `offset` of the file `path` open as
    /// `descriptor`, looping over short writes (`pwrite`).
    func writeAll(
        _ descriptor: Int32, path: String, _ bytes: UnsafeRawPointer, count: Int,
        at offset: Int64
    ) throws(IOError) {
        var done = 0
        while done < count {
            let written = retryingOnInterrupt {
                self.pwrite(descriptor, bytes + done, count - done, offset + Int64(done))
            }
            guard written > 0 else { throw IOError("write", path, code: written == 0 ? EIO : errno) }
            done += written
        }
    }
}

/// `flock(2)`: inside `SystemCalls` the name is the member's, and
/// `Glibc.flock` is the C struct of the same name.
private func lockFile(_ descriptor: Int32, _ operation: Int32) -> Int32 {
    flock(descriptor, operation)
}

/// A failed system call: the operation, the path and `errno`.
public struct IOError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was being done, e.g. "write" or "sync".
    public let operation: String
    /// The file it was done to.
    public let path: String
    /// The `errno` value.
    public let code: Int32

    /// Captures the current `errno`.
    init(_ operation: String, _ path: String, code: Int32 = errno) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    public var description: String {
        "cannot \(operation) \(path): \(String(cString: strerror(code)))"
    }
}

extension SystemCalls {
    /// True when a `syncfs` that returns 0 on the file system of `descriptor`
    /// proves every byte written there since the descriptor was opened
    /// durable, so files it vouches for need no `fdatasync` of their own.
    /// That takes a kernel that reports both writeback errors (the
    /// superblock's error sequence, Linux 5.8) and the file system's own
    /// sync errors (`sync_filesystem` returning `->sync_fs`'s, 5.17), and a
    /// file system whose `syncfs` flushes the disk itself: ext4, XFS, btrfs
    /// (and tmpfs, where nothing is durable anyway). Not FUSE (its `syncfs`
    /// reaches no daemon but virtiofs's), overlayfs (its errors land on the
    /// upper file system's superblock), network file systems or others
    /// unknown: there each file is fdatasynced.
    package static func syncfsVouches(forFileSystemOf descriptor: Int32) -> Bool {
        guard kernelReportsSyncErrors else { return false }
        let type = rg_file_system_type(descriptor)
        return type >= 0 && vouchingFileSystems.contains(UInt64(type))
    }

    /// ext4 (and ext2/3), XFS, btrfs, tmpfs: `statfs`'s `f_type`.
    private static let vouchingFileSystems: Set<UInt64> = [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994]

    /// True on Linux 5.17 and later (see `syncfsVouches`).
    private static let kernelReportsSyncErrors: Bool = {
        var name = utsname()
        guard uname(&name) == 0 else { return false }
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let numbers = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard numbers.count == 2 else { return false }
        return (numbers[0], numbers[1]) >= (5, 17)
    }()
}
