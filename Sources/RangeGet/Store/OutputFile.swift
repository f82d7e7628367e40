// OutputFile: the `.part` file bytes are written into, at their offsets,
// straight from libcurl's buffer. The descriptor never changes after open, and
// pwrite/fdatasync are safe from several threads, so the file is Sendable.
import CCurlShim
import Glibc

/// An open data file: positioned writes, sync, size, an exclusive lock.
final class OutputFile: Sendable {
    let path: String
    let descriptor: Int32
    private let calls: SystemCalls

    /// Opens (creating if needed) `path` for reading and writing. A symbolic
    /// link there is refused, never followed: it could point anywhere.
    init(path: String, calls: SystemCalls = .live) throws(IOError) {
        let descriptor = retryingOnInterrupt { open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) }
        guard descriptor >= 0 else { throw IOError("open", path) }
        self.path = path
        self.descriptor = descriptor
        self.calls = calls
    }

    deinit {
        close(descriptor)
    }

    /// Takes an exclusive advisory lock without waiting; false if another
    /// process holds it (a second rangeget on the same output).
    func lockExclusively() throws(IOError) -> Bool {
        if retryingOnInterrupt({ flock(descriptor, LOCK_EX | LOCK_NB) }) == 0 { return true }
        if errno == EWOULDBLOCK { return false }
        throw IOError("lock", path)
    }

    /// Writes all of `count` bytes at `offset`, looping over short writes.
    func write(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws(IOError) {
        var done = 0
        while done < count {
            let written = retryingOnInterrupt {
                calls.pwrite(descriptor, bytes + done, count - done, offset + Int64(done))
            }
            guard written > 0 else { throw IOError("write", path, code: written == 0 ? EIO : errno) }
            done += written
        }
    }

    /// Makes every byte written so far durable (`fdatasync`).
    func synchronize() throws(IOError) {
        guard retryingOnInterrupt({ calls.fdatasync(descriptor) }) == 0 else { throw IOError("sync", path) }
    }

    /// Starts writeback of the file's dirty pages without waiting for it
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so the next `synchronize`
    /// finds little left. Durability still comes only from `synchronize`.
    /// (`posix_fadvise(DONTNEED)`, used before, also starts writeback, but
    /// walks and drops the file's whole page cache on every call: 1 GiB over
    /// loopback took 1.06-1.09 s with it and 0.87-0.88 s with this.)
    func startWriteback() {
        _ = rg_start_writeback(descriptor)
    }

    /// Sets the length, dropping or zero-extending the end.
    func truncate(to size: Int64) throws(IOError) {
        guard retryingOnInterrupt({ ftruncate(descriptor, off_t(size)) }) == 0 else { throw IOError("truncate", path) }
    }

    /// Reserves `size` bytes on disk so a full disk fails now, not mid-run;
    /// falls back to a sparse length where the file system cannot reserve.
    func preallocate(size: Int64) throws(IOError) {
        guard size > 0 else { return }
        let result = posix_fallocate(descriptor, 0, off_t(size))
        if result == 0 { return }
        if result == EOPNOTSUPP || result == EINVAL {
            if currentSize() < size { try truncate(to: size) }
            return
        }
        throw IOError("allocate space for", path, code: result)
    }

    /// The file's current length.
    func currentSize() -> Int64 {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? Int64(info.st_size) : 0
    }
}
