import Synchronization
import SystemSupport

// OutputFile: the `.part` file bytes are written into, at their offsets,
// straight from libcurl's buffer. The descriptor never changes after open (a
// file published by a link is closed through it, `retire`), and
// pwrite/fdatasync are safe from several threads, so the file is Sendable.
// Every call that changes the disk goes through the file's `SystemCalls`.
// This file holds the open, the descriptor's I/O and syncs; the claim and the
// marks are in OutputFile+Claim.swift, the publishing in OutputFile+Publish.swift.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An open data file: positioned writes, sync, size, an exclusive lock.
final class OutputFile: Sendable {
    let path: String
    let descriptor: Int32
    /// True when this open created the file (it is empty, and nothing was beside it to discard).
    let isNew: Bool
    /// When this open came among the opens of this process: a batch's
    /// first-opened file is the one its `syncfs` reports errors since.
    let openOrder: Int
    /// The disk calls used on this file and the state files beside it.
    let calls: SystemCalls

    /// Creates the file at `path` for reading and writing; fails with EEXIST
    /// when anything is there, a link included (`O_CREAT | O_EXCL`).
    convenience init(creating path: String, calls: SystemCalls, temporary: Bool = false) throws(IOError) {
        try self.init(path: path, flags: O_CREAT | O_EXCL, calls: calls, temporary: temporary)
    }

    /// Opens the existing file at `path` for reading and writing. A symbolic
    /// link there is refused (ELOOP), never followed: it could point anywhere.
    convenience init(existing path: String, calls: SystemCalls) throws(IOError) {
        try self.init(path: path, flags: 0, calls: calls)
    }

    private convenience init(path: String, flags: Int32, calls: SystemCalls, temporary: Bool = false) throws(IOError) {
        let descriptor = retryingOnInterrupt { calls.open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | flags, 0o644) }
        guard descriptor >= 0 else { throw IOError("open", path) }
        self.init(
            path: path, descriptor: descriptor, isNew: flags & O_CREAT != 0, unnamed: false, temporary: temporary,
            calls: calls)
    }

    /// The one initializer every open ends in (also `unnamed`'s, in OutputFile+Claim.swift).
    init(path: String, descriptor: Int32, isNew: Bool, unnamed: Bool, temporary: Bool = false, calls: SystemCalls) {
        self.path = path
        self.descriptor = descriptor
        self.isNew = isNew
        isTemporary = temporary
        markPlace = Mutex(temporary ? .name : .unknown)
        isUnnamed = Atomic(unnamed)
        openOrder = Self.opens.add(1, ordering: .relaxed).newValue
        self.calls = calls
    }

    /// True for a file made by `temporary`: its name is its mark.
    let isTemporary: Bool

    /// True until an unnamed file (`unnamed(in:naming:calls:)`) is linked to a name
    /// (`link(to:)`, in OutputFile+Publish.swift).
    let isUnnamed: Atomic<Bool>
    var hasNoName: Bool { isUnnamed.load(ordering: .relaxed) }

    /// Where this file's mark is (known once it was written or found): the
    /// marks of OutputFile+Claim.swift set and read it.
    let markPlace: Mutex<MarkPlace>
    /// `name`: a `temporary` file, marked by its name.
    enum MarkPlace { case unknown, attribute, legacyAttribute, besideFile, name }

    /// Set by `keepName` (OutputFile+Publish.swift): the deinit keeps a temporary file's name.
    let keepsName = Atomic(false)

    /// True once `retire` (OutputFile+Publish.swift) closed the file.
    let retired = Atomic(false)
    private var isRetired: Bool { retired.load(ordering: .acquiring) }

    /// Opens so far in this process, for `openOrder`.
    private static let opens = Atomic<Int>(0)

    deinit {
        // A temporary file whose download failed or stopped before its
        // commit (which moved it, or kept it as a `.part`) goes with it. One
        // published by a link is retired: no lookup (a round trip on NFS).
        if isTemporary, !isRetired, !keepsName.load(ordering: .relaxed), (try? isStill(named: path)) == true {
            _ = calls.unlink(path)
        }
        close(descriptor)
    }

    /// Writes all of `count` bytes at `offset`, looping over short writes.
    func write(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws(IOError) {
        try calls.writeAll(descriptor, path: path, bytes, count: count, at: offset)
    }

    /// Makes every byte written so far durable (`fdatasync`).
    func synchronize() throws(IOError) {
        guard !isRetired else { throw IOError("sync", path, code: EBADF) }
        guard retryingOnInterrupt({ calls.fdatasync(descriptor) }) == 0 else { throw IOError("sync", path) }
    }

    /// Makes the file's data and its inode durable (`fsync`): its link count too.
    func synchronizeWithInode() throws(IOError) {
        guard !isRetired else { throw IOError("sync", path, code: EBADF) }
        guard retryingOnInterrupt({ calls.fsync(descriptor) }) == 0 else { throw IOError("sync", path) }
    }

    /// Writes back every dirty file of this file's file system and waits
    /// (`syncfs`): one call for a batch of files, where an `fdatasync` each
    /// would wait for each in turn. True when it succeeded and that vouches
    /// for every file on the file system opened since this descriptor was:
    /// see `SystemCalls.syncfsVouches`. False otherwise; each file's
    /// `synchronize` then reports its own errors. Called once, never again
    /// on EINTR: the kernel consumes the error it reports (it advances this
    /// descriptor's error sequence even when the sync failed), so a retry
    /// could succeed over a lost write.
    func synchronizeFileSystem() -> Bool {
        !isRetired && calls.syncfs(descriptor) == 0 && SystemCalls.syncfsVouches(forFileSystemOf: descriptor)
    }

    /// The file system the file is on (`st_dev`), nil when it cannot be examined.
    var device: UInt? {
        var info = stat()
        return !isRetired && fstat(descriptor, &info) == 0 ? UInt(info.st_dev) : nil
    }

    /// Starts writeback of the file's dirty pages without waiting for it
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so the next `synchronize`
    /// finds little left. Durability still comes only from `synchronize`.
    /// (`posix_fadvise(DONTNEED)`, used before, also starts writeback, but
    /// walks and drops the file's whole page cache on every call, which
    /// cost a fifth of loopback's wall time; docs/PERFORMANCE-LOG.md.)
    func startWriteback() {
        _ = retryingOnInterrupt { calls.syncFileRange(descriptor) }
    }

    /// Sets the length, dropping or zero-extending the end.
    func truncate(to size: Int64) throws(IOError) {
        guard retryingOnInterrupt({ calls.ftruncate(descriptor, size) }) == 0 else { throw IOError("truncate", path) }
    }

    /// Fails with ENOSPC, before any byte is written, when the file system
    /// has less room than the `size` bytes the file will hold (`fstatvfs`;
    /// blocks the file holds already count as room).
    func checkFreeSpace(for size: Int64) throws(IOError) {
        var volume = statvfs()
        var info = stat()
        // A file system that reports no size (some FUSE ones) cannot be judged.
        guard fstatvfs(descriptor, &volume) == 0, volume.f_blocks > 0, fstat(descriptor, &info) == 0 else { return }
        let (available, overflow) = Int64(clamping: volume.f_bavail)
            .multipliedReportingOverflow(by: Int64(clamping: volume.f_frsize))
        let room = overflow ? Int64.max : available
        let needed = size - Int64(info.st_blocks) * 512
        guard needed > room else { return }
        throw IOError("store \(size) bytes (\(room) free on its file system) in", path, code: ENOSPC)
    }

    /// Reserves `size` bytes on disk so a full disk fails now, not mid-run:
    /// first compares them with the free space, then allocates them; falls
    /// back to a sparse length where the file system cannot allocate.
    func preallocate(size: Int64) throws(IOError) {
        guard size > 0 else { return }
        try checkFreeSpace(for: size)
        if retryingOnInterrupt({ calls.posixFallocate(descriptor, 0, size) }) == 0 { return }
        if errno == EOPNOTSUPP || errno == EINVAL {
            if currentSize() < size { try truncate(to: size) }
            return
        }
        throw IOError("allocate space for", path)
    }

    /// The file's current length.
    func currentSize() -> Int64 {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int64(info.st_size) : 0
    }

    /// Reads `count` bytes at `offset` (fewer at the end of the file).
    func read(count: Int, at offset: Int64) throws(IOError) -> [UInt8] {
        guard let bytes = Self.read(descriptor, count: count, at: offset) else { throw IOError("read", path) }
        return bytes
    }

    /// `count` bytes of `descriptor` at `offset` (fewer at its end); nil, with
    /// errno, when a read fails. (Also `isSaved`'s, in OutputFile+Publish.swift.)
    static func read(_ descriptor: Int32, count: Int, at offset: Int64) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                retryingOnInterrupt {
                    pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                }
            }
            guard got >= 0 else { return nil }
            if got == 0 { break }
            done += got
        }
        return Array(bytes.prefix(done))
    }
}
