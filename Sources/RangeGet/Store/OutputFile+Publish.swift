import Synchronization
import SystemSupport

// OutputFile+Publish: how a finished file gets its final name: a link for
// an unnamed file, a rename that never replaces another file (or a link and
// an unlink), the descriptor then retired; whether a name another run gave
// meanwhile holds the same bytes; and the calls a run's file systems refused.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension OutputFile {
    /// Gives an unnamed file the name `destination`, never over anything
    /// there (EEXIST). The directory's fsync does not make the link durable:
    /// the file's own link count changed too (SyncGroup syncs both).
    func link(to destination: String) throws(IOError) {
        guard retryingOnInterrupt({ calls.linkOpenFile(descriptor, destination) }) == 0 else {
            throw IOError("save", destination)
        }
        isUnnamed.store(false, ordering: .relaxed)
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
            Int64(info.st_size) == size
        else { return false }
        var offset: Int64 = 0
        while offset < size {
            let count = Int(min(1 << 16, size - offset))
            guard let mine = Self.read(descriptor, count: count, at: offset), mine.count == count,
                Self.read(other, count: count, at: offset) == mine
            else { return false }
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
    func move(
        to destination: String, replacing: Bool, learned: Refusals? = nil,
        published: () throws(IOError) -> Void = {}
    ) throws(IOError) {
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
        do {
            try published()
            failure = nil
        } catch { failure = error }
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
