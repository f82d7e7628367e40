// OutputFile: the `.part` file bytes are written into, at their offsets,
// straight from libcurl's buffer. The descriptor never changes after open (a
// file published by a link is closed through it, `retire`), and
// pwrite/fdatasync are safe from several threads, so the file is Sendable.
// Every call that changes the disk goes through the file's `SystemCalls`.
// rangeget creates its data files exclusively and marks them as its own, so
// a `.part` some other program is writing (a browser's) is never taken over.
import CCurlShim
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization
import SystemSupport

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
        self.init(path: path, descriptor: descriptor, isNew: flags & O_CREAT != 0, unnamed: false, temporary: temporary,
                  calls: calls)
    }

    private init(path: String, descriptor: Int32, isNew: Bool, unnamed: Bool, temporary: Bool = false,
                 calls: SystemCalls) {
        self.path = path
        self.descriptor = descriptor
        self.isNew = isNew
        isTemporary = temporary
        markPlace = Mutex(temporary ? .name : .unknown)
        isUnnamed = Atomic(unnamed)
        openOrder = Self.opens.add(1, ordering: .relaxed).newValue
        self.calls = calls
    }

    /// A new file with no name yet in `directory` (`O_TMPFILE`): it gets one
    /// with `link(to:)`, once its data is durable, and a kill before that
    /// leaves nothing on disk. `path`, what messages call it, is the name it
    /// is to have. Nil where the kernel or the file system has no such
    /// files, or without /proc, through which an unprivileged process links
    /// one (`AT_EMPTY_PATH` wants CAP_DAC_READ_SEARCH, which root in a
    /// container often lacks): the caller then claims a `.part` as for any
    /// download. Nothing locks it: no other process can open it, and a second
    /// run fetching the same file finds the final name taken at its commit.
    /// `learned` remembers the directories whose file system refused one,
    /// so a list into NFS tries once, not once per file.
    static func unnamed(in directory: String, naming path: String, calls: SystemCalls,
                        learned: Refusals? = nil) -> OutputFile? {
        guard canLinkOpenFiles, learned?.refuses(.unnamedFile, in: directory) != true else { return nil }
        let descriptor = retryingOnInterrupt { calls.openUnnamed(directory) }
        guard descriptor >= 0 else {
            // EISDIR: a kernel older than O_TMPFILE, which opens the directory.
            if errno == EOPNOTSUPP || errno == EISDIR { learned?.learn(.unnamedFile, in: directory) }
            return nil
        }
        return OutputFile(path: path, descriptor: descriptor, isNew: true, unnamed: true, calls: calls)
    }

    private static let canLinkOpenFiles = access("/proc/self/fd", F_OK) == 0

    /// A small file the caller holds whole, to be committed under its final
    /// name, where the file system has no unnamed files (NFS, FUSE): made at
    /// `files.new`, whose name marks it as rangeget's (nothing else makes
    /// an `OUTPUT.part.new`), so it needs no mark file: one name created,
    /// where a `.part` and its mark file are two, and two removed at the
    /// commit. A kill before its commit leaves a file the next run replaces:
    /// one that another process holds locked is `busy`, any other there (a
    /// killed run's, a link someone planted) loses its name, only that, and
    /// the file is made anew.
    static func temporary(_ files: PartialFiles, calls: SystemCalls) throws(ClaimError) -> OutputFile {
        for _ in 0..<4 {
            let made = try created {
                let file = try OutputFile(creating: files.new, calls: calls, temporary: true)
                guard try file.lockExclusively() else { throw ClaimError.busy }
                return file
            }
            // Another run may have locked it first, taken it for a leftover
            // and removed its name: then try again.
            if let made {
                do {
                    if try made.isStill(named: files.new) { return made }
                } catch {
                    throw .io(error)
                }
                continue
            }
            try removeLeftover(files.new, calls: calls)
        }
        throw .io(IOError("create", files.new, code: EEXIST))
    }

    /// Removes what is at `path`, a `temporary` file's name, unless another
    /// process holds it (`busy`): the name of anything but a regular file,
    /// never opened (a device, a FIFO); a regular file's name only while this
    /// process holds its lock and the name still names it, so two runs that
    /// clear one leftover at once never remove each other's new file.
    private static func removeLeftover(_ path: String, calls: SystemCalls) throws(ClaimError) {
        var named = stat()
        guard lstat(path, &named) == 0 else { return }
        if (named.st_mode & S_IFMT) == S_IFREG {
            // For writing: NFS emulates an exclusive flock with a byte-range
            // lock, which wants a file open for writing (EBADF otherwise).
            let descriptor = retryingOnInterrupt { open(path, O_RDWR | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC) }
            guard descriptor >= 0 else {
                if errno == ENOENT || errno == ELOOP { return }
                throw .io(IOError("open", path))
            }
            defer { close(descriptor) }
            guard retryingOnInterrupt({ calls.flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 else {
                if errno == EWOULDBLOCK { throw .busy }
                throw .io(IOError("lock", path))
            }
            var held = stat()
            guard fstat(descriptor, &held) == 0, lstat(path, &named) == 0, named.st_ino == held.st_ino else { return }
        }
        if retryingOnInterrupt({ calls.unlink(path) }) != 0 && errno != ENOENT { throw .io(IOError("remove", path)) }
    }

    /// The file `create` made, or nil when a name was there (EEXIST); its
    /// other failures as a ClaimError.
    private static func created(_ create: () throws -> OutputFile) throws(ClaimError) -> OutputFile? {
        do {
            return try create()
        } catch let error as IOError where error.code == EEXIST {
            return nil
        } catch let error as IOError {
            throw .io(error)
        } catch {
            throw error as! ClaimError
        }
    }

    /// True for a file made by `temporary`: its name is its mark.
    let isTemporary: Bool

    /// True until an unnamed file (`unnamed(in:naming:calls:)`) is linked to a name.
    private let isUnnamed: Atomic<Bool>
    var hasNoName: Bool { isUnnamed.load(ordering: .relaxed) }

    /// Gives an unnamed file the name `destination`, never over anything
    /// there (EEXIST). The directory's fsync does not make the link durable:
    /// the file's own link count changed too (SyncGroup syncs both).
    func link(to destination: String) throws(IOError) {
        guard retryingOnInterrupt({ calls.linkOpenFile(descriptor, destination) }) == 0 else {
            throw IOError("save", destination)
        }
        isUnnamed.store(false, ordering: .relaxed)
    }

    /// False where the file's file system keeps no user extended attributes:
    /// a read that finds none (ENODATA) costs no write.
    var keepsAttributes: Bool {
        rg_get_attribute(descriptor, FileOrigin.validatorsAttribute, nil, 0) >= 0 || (errno != ENOTSUP && errno != EPERM)
    }

    /// Sets `FileOrigin.validatorsAttribute` to `value` (as `mark` does, on
    /// an unnamed file with no mark to keep); false where the file system
    /// keeps no extended attributes. Other failures are `operation`'s.
    func recordValidators(_ value: [UInt8], failing operation: String = "record the origin of") throws(IOError) -> Bool {
        if retryingOnInterrupt({ calls.fsetxattr(descriptor, FileOrigin.validatorsAttribute, value) }) == 0 { return true }
        if errno == ENOTSUP || errno == EPERM { return false }
        throw IOError(operation, path)
    }

    deinit {
        // A temporary file whose download failed or stopped before its
        // commit (which moved it, or kept it as a `.part`) goes with it. One
        // published by a link is retired: no lookup (a round trip on NFS).
        if isTemporary, !isRetired, !keepsName.load(ordering: .relaxed), (try? isStill(named: path)) == true {
            _ = calls.unlink(path)
        }
        close(descriptor)
    }

    /// Why a data file at `files.data` cannot be this download's.
    enum ClaimError: Error, Equatable {
        /// Another process holds the lock (a second rangeget on the same output).
        case busy
        /// Something rangeget must not write into: why, as the end of a sentence.
        case notOurs(String)
        /// The file system refused.
        case io(IOError)
    }

    /// Opens the data file of `files`, locked, for a download. A missing one
    /// is created exclusively and marked as rangeget's (and removed again if
    /// the disk refuses the lock or the mark). An existing one is
    /// taken only when it is a regular file with no other hard link, and
    /// rangeget's: marked, or with a manifest beside it. Anything else (a
    /// browser's `name.part`, a link someone planted) is never truncated or
    /// written through: it is refused, or with `replacingOthers` (--restart)
    /// its name is removed and a new file created.
    static func claim(_ files: PartialFiles, replacingOthers: Bool, mark: [UInt8],
                      calls: SystemCalls) throws(ClaimError) -> OutputFile {
        // A few rounds: each removal of a name, or a file gone between two
        // calls, may meet another process doing the same.
        for _ in 0..<4 {
            let made = try created {
                let file = try OutputFile(creating: files.data, calls: calls)
                let locked: Bool
                do {
                    locked = try file.lockExclusively()
                    if locked { try file.mark(mark) }
                } catch {
                    // Empty and unmarked, it would look like another program's
                    // file to the next run, which would then refuse it.
                    try? StateFile.remove(files.data, calls: calls)
                    throw error
                }
                guard locked else { throw ClaimError.busy }
                return file
            }
            if let made { return made }
            let problem: String
            do {
                let file = try OutputFile(existing: files.data, calls: calls)
                guard try file.lockExclusively() else { throw ClaimError.busy }
                // Another run publishing by a link (OutputFile.move) lets go
                // of its lock between the link and the removal of this name,
                // which follows at once: waited for, up to 0.1 s. A `.part`
                // that stays its output's second name is a killed run's
                // leftover, judged below as any other (two links: refused).
                var waits = 0
                while waits < 5, try file.isBeingPublished(as: files) {
                    usleep(20_000)
                    waits += 1
                }
                // A `.part` kept from a temporary file (a checksum that
                // failed, a name taken), its run killed before it removed
                // the `.part.new` name, or unable to write the mark file
                // beside it: that second name marks it as rangeget's. It
                // goes once the file is marked (a mark that fails again
                // leaves it), and the file is then judged as any other.
                if try file.isAlsoNamed(files.new) {
                    if !file.isMarked { try file.mark(mark) }
                    if retryingOnInterrupt({ calls.unlink(files.new) }) != 0 && errno != ENOENT {
                        throw IOError("remove", files.new)
                    }
                }
                let found = file.ownershipProblem(manifest: files.manifest)
                // The name may have changed hands since it was opened: that
                // run removed it, and the lock it let go was on its final file.
                guard try file.isStill(named: files.data) else { continue }
                guard let found else {
                    // `ownershipProblem` found where its mark is, if it has one.
                    if ![.attribute, .besideFile].contains(file.markPlace.withLock({ $0 })) {
                        try file.mark(mark)
                    }
                    return file
                }
                problem = found
            } catch let error as IOError where error.code == ENOENT {
                continue
            } catch let error as IOError where error.code == ELOOP {
                problem = "is a symbolic link"
            } catch let error as IOError {
                throw .io(error)
            } catch {
                throw error as! ClaimError
            }
            guard replacingOthers else { throw .notOurs(problem) }
            do { try StateFile.remove(files.data, calls: calls) } catch { throw .io(error) }
        }
        throw .io(IOError("create", files.data, code: EEXIST))
    }

    /// True when this `.part` of `files` is also the output it is for: a
    /// run that published it by a link and has yet to remove this name.
    private func isBeingPublished(as files: PartialFiles) throws(IOError) -> Bool {
        guard files.data.hasSuffix(".part") else { return false }
        let links = try links(named: String(files.data.dropLast(5)))
        return links.count > 1 && links.isNamed
    }

    /// True when this file has two links and `name` is the other one.
    private func isAlsoNamed(_ name: String) throws(IOError) -> Bool {
        let links = try links(named: name)
        return links.count == 2 && links.isNamed
    }

    /// True while `name` names this very file.
    private func isStill(named name: String) throws(IOError) -> Bool {
        try links(named: name).isNamed
    }

    /// The file's link count, and whether `name` names it. By inode number
    /// alone: on overlayfs an `lstat` and the open file's `fstat` can report
    /// other devices for one file (and a file's own directory holds one file system).
    private func links(named name: String) throws(IOError) -> (count: UInt, isNamed: Bool) {
        var info = stat()
        var named = stat()
        guard fstat(descriptor, &info) == 0 else { throw IOError("examine", path) }
        return (UInt(info.st_nlink), lstat(name, &named) == 0 && named.st_ino == info.st_ino)
    }

    /// Why this file is not one rangeget may write into or remove, or nil;
    /// `manifest` is the manifest that would go with it.
    func ownershipProblem(manifest: String) -> String? {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return "cannot be examined: \(String(cString: strerror(errno)))" }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return "is not a regular file" }
        guard info.st_nlink == 1 else { return "has other hard links (\(info.st_nlink) names share its data)" }
        var manifestInfo = stat()
        if isMarked || lstat(manifest, &manifestInfo) == 0 { return nil }
        return "was not made by rangeget (no mark, no manifest beside it), perhaps another program's download"
    }

    /// The mark of a data file of an earlier version, and where this file's
    /// mark is (known once it was written or found).
    private static let legacyMarkAttribute = "user.rangeget.part"
    private let markPlace: Mutex<MarkPlace>
    /// `name`: a `temporary` file, marked by its name.
    private enum MarkPlace { case unknown, attribute, legacyAttribute, besideFile, name }

    /// Marks the file as one rangeget made: `FileOrigin.validatorsAttribute`
    /// set to `value` (the validators of the file it is fetched from, and
    /// a tag of the file's name: `FileOrigin.partMark`), or where the file system has no
    /// attributes, a small file beside it (`OUTPUT.part.mark`) that names
    /// this file's device and inode. An earlier version's mark gives way to it.
    func mark(_ value: [UInt8]) throws(IOError) {
        guard try recordValidators(value, failing: "mark") else {
            try markBeside()
            return
        }
        if markPlace.withLock({ $0 }) == .legacyAttribute {
            _ = retryingOnInterrupt { calls.fremovexattr(descriptor, Self.legacyMarkAttribute) }
        }
        markPlace.withLock { $0 = .attribute }
    }

    /// The mark as a file beside this one (beside `dataPath`, where it is
    /// linked under another name than `path`), where extended attributes
    /// are unsupported.
    func markBeside(dataPath: String? = nil) throws(IOError) {
        let markPath = PartialFiles(data: dataPath ?? path).mark
        guard let identity = FileIdentity(descriptor: descriptor),
              let data = try? JSONEncoder().encode(identity) else { throw IOError("mark", path) }
        // Created in place: a temporary file renamed over it would cost a
        // rename per file and protect nothing (see `StateFile.create`).
        try StateFile.create(markPath, with: data, durable: false, calls: calls)
        markPlace.withLock { $0 = .besideFile }
    }

    /// True when the file carries rangeget's mark (the validators attribute
    /// of a `.part`, an earlier version's, or a mark file naming this very file).
    var isMarked: Bool {
        let place: MarkPlace
        if FileOrigin.marksPartialDownload(descriptor, path: path) {
            place = .attribute
        } else if rg_get_attribute(descriptor, Self.legacyMarkAttribute, nil, 0) >= 0 {
            place = .legacyAttribute
        } else {
            guard let data = try? StateFile.read(PartialFiles(data: path).mark),
                  let identity = try? JSONDecoder().decode(FileIdentity.self, from: data),
                  identity == FileIdentity(descriptor: descriptor) else { return false }
            place = .besideFile
        }
        markPlace.withLock { $0 = place }
        return true
    }

    /// True when the mark is a file beside this one (the file system keeps no attributes).
    var isMarkedBeside: Bool { markPlace.withLock { $0 } == .besideFile }

    /// Removes what marks the file as a partial download: from a finished
    /// file, whose mark attribute becomes its `validators` (best effort: a
    /// mark left there still reads as those validators), or from one about to
    /// be deleted (nil: the attribute goes with it).
    func unmark(keeping validators: [UInt8]?) {
        switch markPlace.withLock({ $0 }) {
        case .attribute:
            if let validators {
                _ = retryingOnInterrupt { calls.fsetxattr(descriptor, FileOrigin.validatorsAttribute, validators) }
            }
        case .legacyAttribute:
            _ = retryingOnInterrupt { calls.fremovexattr(descriptor, Self.legacyMarkAttribute) }
        case .besideFile:
            // Known to be there (this process wrote or read it): removed without a lookup first.
            _ = retryingOnInterrupt { calls.unlink(PartialFiles(data: path).mark) }
        case .unknown:
            _ = retryingOnInterrupt { calls.fremovexattr(descriptor, Self.legacyMarkAttribute) }
            try? StateFile.remove(PartialFiles(data: path).mark, calls: calls)
        case .name:
            break
        }
    }

    /// Takes an exclusive advisory lock without waiting; false if another
    /// process holds it (a second rangeget on the same output).
    func lockExclusively() throws(IOError) -> Bool {
        if retryingOnInterrupt({ calls.flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 { return true }
        if errno == EWOULDBLOCK { return false }
        throw IOError("lock", path)
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

    /// Opens so far in this process, for `openOrder`.
    private static let opens = Atomic<Int>(0)

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

    /// `count` bytes of `descriptor` at `offset` (fewer at its end); nil, with errno, when a read fails.
    private static func read(_ descriptor: Int32, count: Int, at offset: Int64) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                retryingOnInterrupt { pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            }
            guard got >= 0 else { return nil }
            if got == 0 { break }
            done += got
        }
        return Array(bytes.prefix(done))
    }

    /// True when the regular file at `path` (not a link) holds exactly the
    /// `size` bytes this file holds, and is durable (fsynced). Nothing else
    /// there is opened (a FIFO would block, a device could act on it).
    func isSaved(as path: String, size: Int64) -> Bool {
        var named = stat()
        guard lstat(path, &named) == 0, (named.st_mode & S_IFMT) == S_IFREG, Int64(named.st_size) == size else {
            return false
        }
        let other = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard other >= 0 else { return false }
        defer { close(other) }
        // The file opened is the one examined (the name may have changed hands between).
        var info = stat()
        guard fstat(other, &info) == 0, info.st_dev == named.st_dev, info.st_ino == named.st_ino,
              Int64(info.st_size) == size else { return false }
        var offset: Int64 = 0
        while offset < size {
            let count = Int(min(1 << 16, size - offset))
            guard let mine = Self.read(descriptor, count: count, at: offset), mine.count == count,
                  Self.read(other, count: count, at: offset) == mine else { return false }
            offset += Int64(count)
        }
        return retryingOnInterrupt { fsync(other) } == 0
    }

    /// Gives the file the name `destination`. Unless `replacing`, an existing
    /// file there is never replaced, even one that appeared a moment ago: the
    /// move fails with EEXIST (`renameat2` with `RENAME_NOREPLACE`; where the
    /// file system lacks it, a hard link and an unlink; `learned` remembers
    /// where it does, for the moves after). `published` runs once the file
    /// has its new name, while it is still open and locked: the mark
    /// attribute becoming its validators is set through the descriptor, and
    /// the state files beside it go before another run can take its old name.
    func move(to destination: String, replacing: Bool, learned: Refusals? = nil,
              published: () throws(IOError) -> Void = {}) throws(IOError) {
        if replacing {
            guard retryingOnInterrupt({ calls.rename(path, destination) }) == 0 else { throw IOError("rename", path) }
            try published()
            return
        }
        let directory = StateFile.directory(of: destination)
        if learned?.refuses(.renameNoReplace, in: directory) != true {
            if retryingOnInterrupt({ calls.renameNoReplace(path, destination) }) == 0 {
                try published()
                return
            }
            guard errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP else { throw IOError("rename", path) }
            learned?.learn(.renameNoReplace, in: directory)
        }
        guard retryingOnInterrupt({ calls.link(path, destination) }) == 0 else { throw IOError("rename", path) }
        // The old name goes even when `published` fails: the file is in place.
        let failure: IOError?
        do { try published(); failure = nil } catch { failure = error }
        // Closed before its old name goes: NFS renames a file unlinked while
        // open to `.nfsXXXX` and removes it at the close (FUSE's library to
        // `.fuse_hidden`), two more round trips where the directory's
        // operations queue one after another. Its lock goes with it, its
        // mark and manifest gone already: another run that takes the old
        // name in between finds a file with two links and refuses it, or
        // with `--restart` removes that name (then ENOENT here is no failure),
        // and one that opened the name just before finds it no longer names
        // that file once it has the lock (`claim`), and creates its own.
        retire()
        guard retryingOnInterrupt({ calls.unlink(path) }) == 0 || errno == ENOENT else { throw IOError("remove", path) }
        if let failure { throw failure }
    }

    /// Closes the file but keeps its descriptor's number taken, by /dev/null
    /// opened read-only, until `deinit`: no file opened meanwhile gets the
    /// number, a write on it fails (EBADF) and a read finds nothing, never
    /// touching another file; the syncs fail and `device` is nil
    /// (`isRetired`), so nothing takes /dev/null's answers for the file's.
    /// Where /dev/null cannot be opened, the file stays open.
    private func retire() {
        let null = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard null >= 0 else { return }
        defer { close(null) }
        guard retryingOnInterrupt({ dup2(null, descriptor) }) >= 0 else { return }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        retired.store(true, ordering: .releasing)
    }

    /// Keeps a temporary file's name when it goes: linked as its `.part`
    /// where no mark could be written beside it, that name is its mark
    /// (`claim` takes a `.part` that shares its file with it).
    func keepName() { keepsName.store(true, ordering: .relaxed) }
    private let keepsName = Atomic(false)

    /// True once `retire` closed the file.
    private let retired = Atomic(false)
    private var isRetired: Bool { retired.load(ordering: .acquiring) }

}

/// The calls the file systems of a run's directories refused, learned by
/// the run's first try in each: the files after it take the way that works
/// at once, without a call that fails first. One per run (its SyncGroup),
/// so what one run learned never steers another's files.
final class Refusals: Sendable {
    enum Call: Hashable, Sendable {
        /// `renameat2` with `RENAME_NOREPLACE` (NFS, most FUSE mounts): a
        /// link and an unlink instead (`OutputFile.move`). The refused call
        /// looks both names up, round trips on a network file system.
        case renameNoReplace
        /// `open` with `O_TMPFILE` (NFS, FUSE): an `OUTPUT.part.new`
        /// instead (`OutputFile.unnamed`, `OutputFile.temporary`).
        case unnamedFile
    }

    private struct Refusal: Hashable {
        let call: Call
        let directory: String
    }

    private let refused = Mutex<Set<Refusal>>([])

    func refuses(_ call: Call, in directory: String) -> Bool {
        refused.withLock { $0.contains(Refusal(call: call, directory: directory)) }
    }

    func learn(_ call: Call, in directory: String) {
        refused.withLock { _ = $0.insert(Refusal(call: call, directory: directory)) }
    }
}

extension Manifest {
    /// True when the file at `dataFile` is a partial download rangeget made
    /// (it carries rangeget's mark), with or without a manifest beside it.
    package static func isPartialDownload(dataFile: String) -> Bool {
        (try? OutputFile(existing: dataFile, calls: .live))?.isMarked ?? false
    }
}
