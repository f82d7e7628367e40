// DiskProbe: the `SystemCalls` seam the in-process reliability tests run
// under. It lets no byte through unchecked: every pwrite is compared with the
// resource, every fdatasync and fsync recorded, and any of them can fail.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization

/// A `SystemCalls` seam that checks every pwrite to the data file against
/// the expected resource (no unvalidated byte may reach the disk), records
/// what was written and what each fdatasync made durable, and injects failures.
final class DiskProbe: Sendable {
    struct State {
        /// Bytes pwrite'd to the data file so far.
        var written = RangeSet()
        /// Bytes written before the last successful fdatasync and after no failed one.
        var durable = RangeSet()
        /// Bytes that were written (not yet durable) when an fdatasync failed.
        var pendingAtFailedSync = RangeSet()
        /// pwrites whose bytes differ from the resource at their offset.
        var wrongWrites: [String] = []
        var pwriteCalls = 0
        var fdatasyncCalls = 0
        var fsyncCalls = 0
        var failedSyncs = 0
        /// The contents of every regular file at each successful fsync, by the path it had then.
        var synced: [String: Set<Data>] = [:]
    }

    let resource: Resource?
    let state = Mutex(State())
    /// errno for the n-th pwrite to the data file (0-based) given the bytes written before it; nil to pass.
    private let pwriteFault: @Sendable (_ call: Int, _ offset: Int64, _ writtenBefore: Int64) -> Int32?
    /// errno for the n-th fdatasync (0-based); nil to pass.
    private let fdatasyncFault: @Sendable (_ call: Int) -> Int32?
    /// errno for the n-th fsync (0-based, manifest temp files and directories); nil to pass.
    private let fsyncFault: @Sendable (_ call: Int) -> Int32?
    /// A failed fdatasync also loses the pages it could not write: the bytes
    /// pending then read back as zeros (what a preallocated file's blocks
    /// hold), as after the kernel evicts pages it marked clean on a
    /// writeback error. Later fdatasyncs succeed, as Linux reports the error once.
    private let losesPagesAtFailedSync: Bool

    init(
        resource: Resource?,
        pwriteFault: @escaping @Sendable (Int, Int64, Int64) -> Int32? = { _, _, _ in nil },
        fdatasyncFault: @escaping @Sendable (Int) -> Int32? = { _ in nil },
        fsyncFault: @escaping @Sendable (Int) -> Int32? = { _ in nil },
        losesPagesAtFailedSync: Bool = false
    ) {
        self.resource = resource
        self.pwriteFault = pwriteFault
        self.fdatasyncFault = fdatasyncFault
        self.fsyncFault = fsyncFault
        self.losesPagesAtFailedSync = losesPagesAtFailedSync
    }

    var snapshot: State { state.withLock { $0 } }

    var calls: SystemCalls {
        var calls = SystemCalls.live
        calls.pwrite = { [self] descriptor, bytes, count, offset in
            // The manifest and the mark are written with pwrite too.
            guard openPath(descriptor)?.hasSuffix(".part") == true else {
                return Glibc.pwrite(descriptor, bytes, count, off_t(offset))
            }
            let (call, before) = state.withLock { state -> (Int, Int64) in
                defer { state.pwriteCalls += 1 }
                return (state.pwriteCalls, state.written.byteCount)
            }
            if let code = pwriteFault(call, offset, before) {
                errno = code
                return -1
            }
            if let resource, count > 0 {
                let end = offset + Int64(count)
                let expected = end <= resource.size ? resource.bytes(in: offset..<end) : nil
                let actual = [UInt8](UnsafeRawBufferPointer(start: bytes, count: count))
                if expected != actual {
                    state.withLock { $0.wrongWrites.append("\(count) bytes at \(offset)") }
                }
            }
            let result = Glibc.pwrite(descriptor, bytes, count, off_t(offset))
            if result > 0 {
                state.withLock { $0.written.insert(ByteRange(offset, offset + Int64(result))) }
            }
            return result
        }
        calls.fdatasync = { [self] descriptor in
            let (call, writtenNow) = state.withLock { state -> (Int, RangeSet) in
                defer { state.fdatasyncCalls += 1 }
                return (state.fdatasyncCalls, state.written)
            }
            if let code = fdatasyncFault(call) {
                let lost = state.withLock { state -> RangeSet in
                    state.failedSyncs += 1
                    var pending = writtenNow
                    for range in state.durable.ranges { pending.remove(range) }
                    for range in pending.ranges { state.pendingAtFailedSync.insert(range) }
                    return pending
                }
                if losesPagesAtFailedSync {
                    for range in lost.ranges {
                        let zeros = [UInt8](repeating: 0, count: Int(range.count))
                        _ = Glibc.pwrite(descriptor, zeros, zeros.count, off_t(range.start))
                    }
                }
                errno = code
                return -1
            }
            let result = Glibc.fdatasync(descriptor)
            if result == 0 {
                state.withLock { state in
                    // Bytes pending at a failed sync may be lost (fsyncgate): never durable.
                    var durable = writtenNow
                    for range in state.pendingAtFailedSync.ranges { durable.remove(range) }
                    state.durable = durable
                }
            }
            return result
        }
        calls.fsync = { [self] descriptor in
            let call = state.withLock { state -> Int in
                defer { state.fsyncCalls += 1 }
                return state.fsyncCalls
            }
            if let code = fsyncFault(call) {
                errno = code
                return -1
            }
            let result = Glibc.fsync(descriptor)
            if result == 0, let (path, contents) = Self.regularFile(descriptor) {
                state.withLock { _ = $0.synced[path, default: []].insert(contents) }
            }
            return result
        }
        return calls
    }

    /// The contents the file at `path` had at each of its successful fsyncs.
    func synced(_ path: String) -> Set<Data> {
        state.withLock { $0.synced[path] ?? [] }
    }

    /// The path and contents of the regular file open as `descriptor`; nil for a directory.
    private static func regularFile(_ descriptor: Int32) -> (String, Data)? {
        let link = "/proc/self/fd/\(descriptor)"
        guard let path = openPath(descriptor) else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            let contents = FileManager.default.contents(atPath: link)
        else { return nil }
        return (path, contents)
    }
}

/// The path of the file open as `descriptor` now (after any rename), nil if unknown.
func openPath(_ descriptor: Int32) -> String? {
    try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
}
