// StreamWindow: the sink of a download read in order (`rangeget -o -`,
// `Download.bytes(from:)`) instead of a file. A ring buffer holds the file's
// bytes from `released`, the first byte the reader has not finished with, to
// `released + capacity`. The connections write there at their offsets (the
// engine hands out pieces in file order and only inside the window, and a
// single stream pauses at its edge); the reader takes the bytes in order as
// soon as they are contiguous, and each byte it releases makes room ahead.
// Memory is the ring, at most `capacity` bytes, however slow the reader;
// it is given back as soon as no byte of it can be read any more (the reader
// stopped, or the download ended), not when the window goes.
//
// Threads: the loop's thread writes; one reader at a time takes and releases
// (a thread of the CLI, or the task iterating the sequence); the download's
// thread waits for the reader to finish and ends the window. Everything
// shared is in `state`; the ring's bytes between `released` and `taken` are
// the reader's alone (writers skip what lies below `taken`), and the rest
// the writers' alone.
internal import Digests
import Dispatch
import Synchronization

final class StreamWindow: ByteSink {
    /// Bytes the ring holds: the most of the file kept in memory at once.
    let capacity: Int64
    /// The smallest window: libcurl may hand over this much in one write.
    static let minimumCapacity: Int64 = 1 << 20
    nonisolated(unsafe) private let ring: UnsafeMutableRawPointer
    /// The digest of the bytes in order, updated by the reader (one at a time) as it releases them.
    nonisolated(unsafe) private let digester: Digester?
    private let state = Mutex(State())

    private struct State {
        /// The first byte the reader has not released.
        var released: Int64 = 0
        /// The first byte not yet lent to the reader (`released` ≤ `taken`).
        var taken: Int64 = 0
        /// Bytes written, from `taken` on (and a prefix below it).
        var filled = RangeSet()
        /// The file's length, once every byte is written.
        var size: Int64?
        /// How the download ended; nil while it may still go on.
        var ending: Result<Void, DownloadError>?
        /// True once the reader stopped reading (a closed pipe, a dropped sequence).
        var abandoned = false
        /// Who waits: the reader for bytes, the download for the reader to finish.
        var reader: Waiter?
        var drain: Waiter?
        /// Wakes the loop when the reader makes room, once a transfer or the plan waits for it.
        var wake: (@Sendable () -> Void)?
        var roomWanted = false
        /// The most bytes held at once (written and not yet released).
        var peak: Int64 = 0
        /// The file as the first probe found it: later attempts must find the same.
        var remote: RemoteFile?
        /// True once the ring was given back.
        var ringFreed = false

        /// True once the download ended and the reader can take no more: it failed, or every byte was taken.
        var isOver: Bool {
            switch ending {
            case .failure?: return true
            case .success?: return size.map { taken >= $0 } == true
            case nil: return false
            }
        }

        /// True when the next byte to lend is written.
        var hasNext: Bool {
            guard let first = filled.ranges.first else { return false }
            return first.start <= taken && first.end > taken
        }
    }

    /// Someone blocked on the window: a thread or a task.
    private enum Waiter {
        case thread(DispatchSemaphore)
        case task(CheckedContinuation<Void, Never>)

        func resume() {
            switch self {
            case let .thread(semaphore): semaphore.signal()
            case let .task(continuation): continuation.resume()
            }
        }
    }

    /// What the reader gets next.
    private enum Next {
        /// `count` bytes at `index` of the ring.
        case bytes(index: Int, count: Int)
        /// Every byte was read and the download succeeded.
        case end
        case failed(DownloadError)
    }

    /// A window of `capacity` bytes (at least `minimumCapacity`), computing
    /// the `digest` of the bytes as they are read when given. The ring's
    /// pages are touched only as bytes come: a small file costs its size.
    init(capacity: Int64, digest: DigestAlgorithm?) {
        self.capacity = max(Self.minimumCapacity, capacity)
        ring = UnsafeMutableRawPointer.allocate(byteCount: Int(self.capacity), alignment: 16)
        digester = digest.flatMap(Digester.init)
    }

    deinit {
        if !state.withLock(\.ringFreed) { ring.deallocate() }
    }

    /// Gives the ring back once no byte of it can be lent again (the reader
    /// stopped, the download failed, or every byte was read) and none is lent
    /// now. Nothing writes to it then: writes stop once the reader stops or
    /// the download ends.
    private func freeRingIfDone(_ state: inout State) {
        guard !state.ringFreed, state.taken == state.released, state.abandoned || state.isOver else { return }
        ring.deallocate()
        state.ringFreed = true
    }

    /// False once the ring's memory was given back.
    var holdsRing: Bool {
        !state.withLock(\.ringFreed)
    }

    // MARK: - The engine's side (the loop's thread)

    func accept(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws(IOError) -> Bool {
        let (taken, waiter) = state.withLock { state -> (Bool, Waiter?) in
            // Nobody reads any more: the bytes go nowhere, and the download is being stopped.
            if state.abandoned || state.ending != nil { return (true, nil) }
            let end = offset + Int64(count)
            // Bytes the reader has (a single stream that starts over from byte 0) are not taken back.
            let start = max(offset, state.taken)
            guard start < end else { return (true, nil) }
            guard end <= state.released + capacity else {
                state.roomWanted = true
                return (false, nil)
            }
            copy(bytes + Int(start - offset), count: Int(end - start), to: start)
            state.filled.insert(ByteRange(start, end))
            state.peak = max(state.peak, end - state.released)
            guard state.hasNext, let reader = state.reader else { return (true, nil) }
            state.reader = nil
            return (true, reader)
        }
        waiter?.resume()
        return taken
    }

    func hasRoom(at offset: Int64) -> Bool {
        state.withLock { state in
            let room = state.released + capacity - offset >= min(capacity, Self.minimumCapacity / 2)
            if !room { state.roomWanted = true }
            return room
        }
    }

    /// Copies `count` bytes to the ring at the place of file offset `offset`, wrapping at its end.
    private func copy(_ bytes: UnsafeRawPointer, count: Int, to offset: Int64) {
        let index = Int(offset % capacity)
        let first = min(count, Int(capacity) - index)
        (ring + index).copyMemory(from: bytes, byteCount: first)
        if first < count { ring.copyMemory(from: bytes + first, byteCount: count - first) }
    }

    /// The first byte past the window: pieces must end at or before it.
    var limit: Int64 {
        state.withLock { $0.released + capacity }
    }

    /// Sets what wakes the writer (the engine's loop) when the reader makes
    /// room that a piece or a paused transfer waits for.
    func onRoom(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// Asks for the wakeup once the reader makes room (a piece waits for it).
    func wantRoom() {
        state.withLock { $0.roomWanted = true }
    }

    /// The bytes no transfer needs to fetch again: those read, and those written ahead.
    var done: RangeSet {
        state.withLock { state in
            var done = state.filled
            if state.taken > 0 { done.insert(ByteRange(0, state.taken)) }
            return done
        }
    }

    /// Records the file a probe found, the first time; returns the file as first recorded.
    func record(_ remote: RemoteFile) -> RemoteFile {
        state.withLock { state in
            if state.remote == nil { state.remote = remote }
            return state.remote!
        }
    }

    /// Forgets every byte written, to start the file over, unless the
    /// reader has taken some (they cannot be taken back): then false.
    func restart() -> Bool {
        state.withLock { state in
            guard state.taken == 0 else { return false }
            state.filled = RangeSet()
            state.remote = nil
            return true
        }
    }

    /// The most bytes the window held at once (written, not yet released by the reader).
    var peakBytesHeld: Int64 {
        state.withLock(\.peak)
    }

    /// Bytes the reader has released.
    var bytesRead: Int64 {
        state.withLock(\.released)
    }

    // MARK: - The download's side

    /// Every byte of the `size`-byte file is written; waits until the reader
    /// has released them all. Throws `.interrupted` (nothing kept) when the
    /// reader stops first, or how the download ended when it ended meanwhile.
    func finishWriting(size: Int64) async throws(DownloadError) {
        let reader = state.withLock { state -> Waiter? in
            state.size = size
            defer { state.reader = nil }
            return state.reader
        }
        reader?.resume()
        while true {
            // Decided under the lock, or waited for without a thread until the reader moves.
            var outcome = Result<Bool, DownloadError>.success(false)
            await withCheckedContinuation { (drain: CheckedContinuation<Void, Never>) in
                let decided = state.withLock { state -> Result<Bool, DownloadError>? in
                    if state.abandoned { return .failure(.interrupted(keptResumeState: false)) }
                    if case let .failure(error)? = state.ending { return .failure(error) }
                    if state.released >= size { return .success(true) }
                    state.drain = .task(drain)
                    return nil
                }
                if let decided {
                    outcome = decided
                    drain.resume()
                }
            }
            switch outcome {
            case .success(true): return
            case .success(false): continue
            case let .failure(error): throw error
            }
        }
    }

    /// The digest of every byte read, once the reader has released them all (`finishWriting`).
    func finishDigest() -> String? {
        digester?.finish()
    }

    /// Ends the window with the download's outcome: the reader gets the end
    /// of the file after its last byte, or the error. The first ending stays.
    func end(_ outcome: Result<Void, DownloadError>) {
        let waiters = state.withLock { state -> [Waiter] in
            if state.ending == nil { state.ending = outcome }
            freeRingIfDone(&state)
            defer { (state.reader, state.drain) = (nil, nil) }
            return [state.reader, state.drain].compactMap { $0 }
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The reader stops reading: writes are dropped from now on, and whoever waits is woken.
    func abandon() {
        let waiters = state.withLock { state -> [Waiter] in
            state.abandoned = true
            freeRingIfDone(&state)
            defer { (state.reader, state.drain) = (nil, nil) }
            return [state.reader, state.drain].compactMap { $0 }
        }
        for waiter in waiters { waiter.resume() }
    }

    /// True once the reader stopped reading before the end.
    var isAbandoned: Bool {
        state.withLock(\.abandoned)
    }

    // MARK: - The reader's side

    /// Waits for the next bytes in file order and lends them to `body` (at
    /// most `limit`, never across the ring's end); false once every byte was
    /// read and the download succeeded. Throws how the download ended
    /// otherwise (`.interrupted` after `abandon()`).
    func read(atMost limit: Int, _ body: (UnsafeRawBufferPointer) -> Void) throws(DownloadError) -> Bool {
        let semaphore = DispatchSemaphore(value: 0)
        while true {
            let next = state.withLock { state -> Next? in
                if let next = take(&state, atMost: limit) { return next }
                state.reader = .thread(semaphore)
                return nil
            }
            switch next {
            case nil:
                semaphore.wait()
            case let .bytes(index, count)?:
                let bytes = UnsafeRawBufferPointer(start: ring + index, count: count)
                body(bytes)
                release(bytes)
                return true
            case .end?:
                return false
            case let .failed(error)?:
                throw error
            }
        }
    }

    /// The next bytes in file order (at most `limit`), copied out of the
    /// window; nil once every byte was read and the download succeeded.
    func next(atMost limit: Int) async throws(DownloadError) -> [UInt8]? {
        while true {
            switch state.withLock({ take(&$0, atMost: limit) }) {
            case nil:
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let ready = state.withLock { state -> Bool in
                        if state.hasNext || state.abandoned || state.ending != nil
                            || state.size.map({ state.taken >= $0 }) == true
                        {
                            return true
                        }
                        state.reader = .task(continuation)
                        return false
                    }
                    if ready { continuation.resume() }
                }
            case let .bytes(index, count)?:
                let bytes = UnsafeRawBufferPointer(start: ring + index, count: count)
                let chunk = [UInt8](bytes)
                release(bytes)
                return chunk
            case .end?:
                return nil
            case let .failed(error)?:
                throw error
            }
        }
    }

    /// Lends the next written bytes, or says how the stream ended; nil: wait.
    private func take(_ state: inout State, atMost limit: Int) -> Next? {
        if state.abandoned { return .failed(.interrupted(keptResumeState: false)) }
        if case let .failure(error)? = state.ending { return .failed(error) }
        if state.hasNext, let first = state.filled.ranges.first {
            let index = Int(state.taken % capacity)
            let count = min(Int64(max(1, limit)), first.end - state.taken, capacity - Int64(index))
            state.taken += count
            return .bytes(index: index, count: Int(count))
        }
        if let size = state.size, state.taken >= size, case .success? = state.ending { return .end }
        return nil
    }

    /// Gives back bytes the reader is done with (the oldest lent), adding them to the digest first.
    private func release(_ bytes: UnsafeRawBufferPointer) {
        digester?.update(bytes)
        let (wake, drain) = state.withLock { state -> ((@Sendable () -> Void)?, Waiter?) in
            state.released += Int64(bytes.count)
            freeRingIfDone(&state)
            var drain: Waiter?
            if let size = state.size, state.released >= size {
                drain = state.drain
                state.drain = nil
            }
            guard state.roomWanted else { return (nil, drain) }
            state.roomWanted = false
            return (state.wake, drain)
        }
        drain?.resume()
        wake?()
    }
}
