// StateFile: the small files kept beside a download (the manifest, its write
// journal, the mark where a file system has no extended attributes). They are
// read without following a link, and written only into a file created afresh
// (a manifest into a temporary one, renamed over it), so a symbolic or hard
// link planted at any of their names never makes rangeget read, truncate or
// write some other file.
import FoundationEssentials
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

package enum StateFile {
    /// The largest state file read; a manifest of a fragmented 1 TiB download is far smaller.
    static let sizeLimit = 64 << 20

    /// Why a state file that exists cannot be read, as the end of a sentence.
    struct Unreadable: Error, Equatable {
        let problem: String
    }

    /// The contents of the regular file at `path`; nil when there is none. A
    /// symbolic link, a file with other hard links or anything but a regular
    /// file is refused (`open` with `O_NOFOLLOW`, then `fstat`).
    static func read(_ path: String) throws(Unreadable) -> Data? {
        // O_NONBLOCK: a FIFO planted here must not hang the open.
        let descriptor = retryingOnInterrupt { open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP { throw Unreadable(problem: "is a symbolic link") }
            throw Unreadable(problem: "cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw Unreadable(problem: "cannot be read: \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw Unreadable(problem: "is not a regular file") }
        guard info.st_nlink == 1 else { throw Unreadable(problem: "has other hard links (\(info.st_nlink) names)") }
        guard info.st_size <= sizeLimit else { throw Unreadable(problem: "is too large (\(info.st_size) bytes)") }
        var data = Data(count: Int(info.st_size))
        var filled = 0
        let failed = data.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) -> Bool in
            while filled < buffer.count {
                let count = retryingOnInterrupt {
                    Glibc.read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
                }
                if count == 0 { return false }
                if count < 0 { return true }
                filled += count
            }
            return false
        }
        if failed { throw Unreadable(problem: "cannot be read: \(String(cString: strerror(errno)))") }
        return data.prefix(filled)
    }

    /// Replaces the file at `path` with `data`: written to a new `path.tmp`
    /// (`create`), then renamed over `path`. `durable` fsyncs the file before
    /// the rename and the directory after it.
    static func replace(_ path: String, with data: Data, durable: Bool, calls: SystemCalls) throws(IOError) {
        let temporary = path + ".tmp"
        try create(temporary, with: data, durable: durable, calls: calls)
        guard retryingOnInterrupt({ calls.rename(temporary, path) }) == 0 else { throw IOError("rename", temporary) }
        if durable { try synchronizeDirectory(of: path, calls: calls) }
    }

    /// Writes `data` to a file created at `path`, mode 0600, exclusively: a
    /// name there already (a leftover of a killed run, or a link someone
    /// planted) is removed, only the name, and the create tried again. Alone,
    /// for a file whose torn or missing contents read the same (the mark: a
    /// kill before its rename left the data file as unmarked as a kill in
    /// the middle of its write does), it saves a rename; on a network file
    /// system each name looked up or changed is a round trip. `durable` fsyncs it.
    static func create(_ path: String, with data: Data, durable: Bool, calls: SystemCalls) throws(IOError) {
        let create = {
            retryingOnInterrupt { calls.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600) }
        }
        // The name is removed only when it is there: looking for it first cost
        // each state file written a lookup that almost always found nothing.
        var descriptor = create()
        if descriptor < 0, errno == EEXIST {
            if retryingOnInterrupt({ calls.unlink(path) }) != 0 && errno != ENOENT { throw IOError("remove", path) }
            descriptor = create()
        }
        guard descriptor >= 0 else { throw IOError("create", path) }
        defer { close(descriptor) }
        try data.withUnsafeBytes { buffer in
            Result { () throws(IOError) in
                guard let bytes = buffer.baseAddress else { return }
                try calls.writeAll(descriptor, path: path, bytes, count: buffer.count, at: 0)
            }
        }.get()
        if durable, retryingOnInterrupt({ calls.fsync(descriptor) }) != 0 { throw IOError("sync", path) }
    }

    /// Removes the file at `path`; nothing there is fine.
    static func remove(_ path: String, calls: SystemCalls) throws(IOError) {
        // unlink takes the directory's lock for writing even to find nothing:
        // the lanes of a list, creating and renaming files in one directory,
        // queued on it (14% of a 1000-file run's CPU was that spinning).
        var info = stat()
        if lstat(path, &info) != 0 && errno == ENOENT { return }
        if retryingOnInterrupt({ calls.unlink(path) }) != 0 && errno != ENOENT { throw IOError("remove", path) }
    }

    /// The directory part of `path`, "." for a bare name.
    package static func directory(of path: String) -> String {
        // Searched as bytes, as the kernel splits a path (as Characters, a '/'
        // with a combining mark after it was no separator), and 4x faster.
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Makes a rename or unlink in `path`'s directory durable.
    static func synchronizeDirectory(of path: String, calls: SystemCalls) throws(IOError) {
        try synchronize(directory: directory(of: path), calls: calls)
    }

    /// Makes the entries of `directory` (renames, removals) durable.
    static func synchronize(directory: String, calls: SystemCalls) throws(IOError) {
        let descriptor = retryingOnInterrupt { calls.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0) }
        guard descriptor >= 0 else { throw IOError("open directory", directory) }
        defer { close(descriptor) }
        guard retryingOnInterrupt({ calls.fsync(descriptor) }) == 0 else { throw IOError("sync directory", directory) }
    }
}
