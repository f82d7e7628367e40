// WriteJournal: the bytes written to a data file and not yet durable,
// recorded where they are written, `OUTPUT.part.journal`. The file is mapped
// into memory (MAP_SHARED); after every pwrite, the connection that made it
// stores its new position in its slot there: one store to memory, no system
// call. A killed process (kill -9, a crash) loses nothing the kernel already
// has, data or journal, so the next run in the same boot fetches again only
// what was still in the sockets, plus at most the one write per connection
// that had not been recorded yet. A timer-driven save lost everything
// written since the last one, a burst's worth per connection.
//
// Layout (native 64-bit words): a header (magic, boot ID, the data file's
// device and inode, its size, the slot count, the log capacity, which log is
// active); one slot per connection, `[start, position)` of its transfer in
// flight; two logs of finished ranges, each a count and its records. Every
// update keeps the file valid at each store, so a kill between two stores
// never makes it claim a byte that was not written:
// - a transfer begins: its slot's start goes to "none" first, then the
//   position, then the start;
// - a transfer ends: its range is appended to the active log (the record,
//   then the count), then its slot is cleared;
// - a durable checkpoint covers some ranges (or some turn out not to count):
//   the survivors are written to the inactive log, which then becomes the
//   active one (a single store).
//
// The journal's blocks are allocated when it is created (posix_fallocate):
// a store into a hole of a mapped file on a full disk kills the process
// with SIGBUS, where an allocation that fails only means no journal.
//
// After a reboot (another boot ID) the journal counts for nothing: only the
// manifest's durable `done` does, and a power cut can cost only the bytes
// since the last durable save. The journal is never renamed over the
// manifest.
import CCurlShim
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Bytes written but not yet durable, one store per write, for the next run in this boot.
final class WriteJournal {
    private let base: UnsafeMutablePointer<Int64>
    private let words: Int
    private let descriptor: Int32
    private let slotCount: Int
    private let capacity: Int
    private var active: Int
    private var counts: [Int] = [0, 0]

    /// Records per log; a log holds the ranges finished between two durable saves.
    static let logCapacity = 8192
    private static let magic = JournalFile.magic
    private static let headerWords = JournalFile.headerWords
    /// A slot's start when it holds no transfer.
    private static let none = Int64.max

    /// Creates the journal at `path` for `file` (`size` bytes) with a slot per
    /// connection, holding `written` (bytes already known to be written, not
    /// necessarily durable) from the start. It is built under a temporary
    /// name and renamed into place, so an older journal stays valid until
    /// this one replaces it. Nil where the boot or the file cannot be identified.
    init?(path: String, file: OutputFile, size: Int64, slots: Int, written: RangeSet) throws(IOError) {
        guard let boot = JournalFile.currentBoot(), let identity = FileIdentity(descriptor: file.descriptor) else {
            return nil
        }
        slotCount = max(1, slots)
        capacity = Self.logCapacity
        words = Self.headerWords + 2 * slotCount + 2 * (1 + capacity)
        let bytes = words * 8
        let temporary = path + ".tmp"
        let calls = file.calls
        if retryingOnInterrupt({ calls.unlink(temporary) }) != 0 && errno != ENOENT {
            throw IOError("remove", temporary)
        }
        let descriptor = retryingOnInterrupt {
            calls.open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        }
        guard descriptor >= 0 else { throw IOError("create", temporary) }
        func abandon(_ operation: String) -> IOError {
            let error = IOError(operation, temporary)
            close(descriptor)
            _ = calls.unlink(temporary)
            return error
        }
        guard retryingOnInterrupt({ calls.posixFallocate(descriptor, 0, Int64(bytes)) }) == 0 else {
            throw abandon("allocate space for")
        }
        guard let mapped = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0),
            mapped != MAP_FAILED
        else { throw abandon("map") }
        self.descriptor = descriptor
        base = mapped.bindMemory(to: Int64.self, capacity: words)
        active = 0
        base[1] = boot.0
        base[2] = boot.1
        base[3] = Int64(bitPattern: identity.device)
        base[4] = Int64(bitPattern: identity.inode)
        base[5] = size
        base[6] = Int64(slotCount)
        base[7] = Int64(capacity)
        base[8] = 0
        for slot in 0..<slotCount { base[slotIndex(slot)] = Self.none }
        for range in written.ranges.prefix(capacity) { append(range) }
        rg_store_release(base, Self.magic)
        guard retryingOnInterrupt({ calls.rename(temporary, path) }) == 0 else {
            let error = IOError("rename", temporary)
            _ = calls.unlink(temporary)
            throw error
        }
    }

    deinit {
        munmap(base, words * 8)
        close(descriptor)
    }

    /// Removes the journal at `path` after an fdatasync of its data file
    /// failed: the kernel may have dropped the pages it could not write, and
    /// reports that once (a later fdatasync, on any descriptor, returns 0),
    /// so the bytes the journal lists are no longer good, even in this boot.
    /// What the manifest lists (its last durable save) is all a later run
    /// trusts; it fetches the rest again. Best effort: the sync's error is
    /// the one to report.
    static func discard(at path: String, calls: SystemCalls) {
        try? StateFile.remove(path, calls: calls)
    }

    private func slotIndex(_ slot: Int) -> Int { Self.headerWords + 2 * slot }
    private func logIndex(_ log: Int) -> Int { Self.headerWords + 2 * slotCount + log * (1 + capacity) }

    /// Connection `slot` starts writing at `start`.
    func begin(slot: Int, at start: Int64) {
        guard slot < slotCount else { return }
        let index = slotIndex(slot)
        rg_store_release(base + index, Self.none)
        rg_store_release(base + index + 1, start)
        rg_store_release(base + index, start)
    }

    /// Connection `slot` wrote everything below `position` of its transfer.
    func advance(slot: Int, to position: Int64) {
        guard slot < slotCount else { return }
        rg_store_release(base + slotIndex(slot) + 1, position)
    }

    /// Connection `slot`'s transfer ended having written `range`.
    func end(slot: Int, wrote range: ByteRange) {
        if !range.isEmpty { append(range) }
        guard slot < slotCount else { return }
        rg_store_release(base + slotIndex(slot), Self.none)
    }

    /// Drops what `ranges` covers from the log: bytes the manifest now lists
    /// as done (a durable save), or bytes that turned out not to count (an
    /// answer that ran past its Content-Range), which no resume may trust.
    func forget(_ ranges: RangeSet) {
        let log = logIndex(active)
        var kept = RangeSet()
        for record in 0..<counts[active] {
            let start = base[log + 1 + 2 * record]
            kept.insert(ByteRange(start, base[log + 2 + 2 * record]))
        }
        for range in ranges.ranges { kept.remove(range) }
        let survivors = kept.ranges.prefix(capacity)
        let next = 1 - active
        let target = logIndex(next)
        for (record, range) in survivors.enumerated() {
            base[target + 1 + 2 * record] = range.start
            base[target + 2 + 2 * record] = range.end
        }
        rg_store_release(base + target, Int64(survivors.count))
        rg_store_release(base + 8, Int64(next))
        counts[next] = survivors.count
        active = next
    }

    /// Appends `range` to the active log; a full log drops it (those bytes
    /// are then fetched again after a kill, nothing worse).
    private func append(_ range: ByteRange) {
        let count = counts[active]
        guard count < capacity else { return }
        let log = logIndex(active)
        base[log + 1 + 2 * count] = range.start
        base[log + 2 + 2 * count] = range.end
        rg_store_release(base + log, Int64(count + 1))
        counts[active] = count + 1
    }
}
