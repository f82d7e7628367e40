// OutputFile+Claim: how a data file becomes this download's. rangeget
// creates its data files exclusively (or with no name, or as an
// `OUTPUT.part.new`) and marks them as its own; it takes an existing one only
// locked and when it is its own, so a `.part` some other program is writing
// (a browser's) is never taken over.
import CCurlShim
import FoundationEssentials
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension OutputFile {
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
    static func unnamed(
        in directory: String, naming path: String, calls: SystemCalls,
        learned: Refusals? = nil
    ) -> OutputFile? {
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
    static func claim(
        _ files: PartialFiles, replacingOthers: Bool, mark: [UInt8],
        calls: SystemCalls
    ) throws(ClaimError) -> OutputFile {
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

    /// True while `name` names this very file. (Also the deinit's.)
    func isStill(named name: String) throws(IOError) -> Bool {
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

    /// The mark of a data file of an earlier version.
    private static let legacyMarkAttribute = "user.rangeget.part"

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
            let data = try? JSONEncoder().encode(identity)
        else { throw IOError("mark", path) }
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
                identity == FileIdentity(descriptor: descriptor)
            else { return false }
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

    /// False where the file's file system keeps no user extended attributes:
    /// a read that finds none (ENODATA) costs no write.
    var keepsAttributes: Bool {
        rg_get_attribute(descriptor, FileOrigin.validatorsAttribute, nil, 0) >= 0
            || (errno != ENOTSUP && errno != EPERM)
    }

    /// Sets `FileOrigin.validatorsAttribute` to `value` (as `mark` does, on
    /// an unnamed file with no mark to keep); false where the file system
    /// keeps no extended attributes. Other failures are `operation`'s.
    func recordValidators(_ value: [UInt8], failing operation: String = "record the origin of") throws(IOError) -> Bool
    {
        if retryingOnInterrupt({ calls.fsetxattr(descriptor, FileOrigin.validatorsAttribute, value) }) == 0 {
            return true
        }
        if errno == ENOTSUP || errno == EPERM { return false }
        throw IOError(operation, path)
    }

    /// Takes an exclusive advisory lock without waiting; false if another
    /// process holds it (a second rangeget on the same output).
    func lockExclusively() throws(IOError) -> Bool {
        if retryingOnInterrupt({ calls.flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 { return true }
        if errno == EWOULDBLOCK { return false }
        throw IOError("lock", path)
    }
}
