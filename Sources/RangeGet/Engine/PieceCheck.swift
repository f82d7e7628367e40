// PieceCheck: each piece of a file checked against its published digest
// (PieceHashes) as soon as all its bytes are written. A piece one transfer
// wrote whole, in order, was hashed on the write path as it came
// (PieceCheck+Stream.swift); any other is read back from the `.part` (from
// the page cache, just written) on a queue of its own, so the loop's thread
// never reads: its bytes may come from several transfers, steals and races,
// in any order. The engine hands in what is written each turn and takes the
// verdicts back (Engine+Pieces.swift); the loop is woken when one is ready.
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Its vars are the loop thread's; the hashing queue touches only `pending`
/// and `verdicts` (Mutexes) and the constants.
final class PieceCheck: @unchecked Sendable {
    /// A piece hashed: whether its bytes, as read, have its digest.
    struct Verdict: Sendable {
        let index: Int
        let range: ByteRange
        let matches: Bool
        /// `forget`s before the check began: a verdict older than the last
        /// one is about bytes that may have changed since, and is dropped.
        let epoch: Int
    }

    let hashes: PieceHashes
    let size: Int64
    /// Pieces whose bytes matched, as byte ranges (loop thread).
    private(set) var verified: RangeSet
    /// Pieces sent to be hashed and not answered yet (loop thread).
    private var checking = RangeSet()
    /// Bumped by every `forget` (loop thread).
    private(set) var epoch = 0
    /// Verdicts of pieces hashed on the write path, not taken yet (loop thread).
    private var streamedVerdicts: [Verdict] = []
    private let descriptor: Int32
    private let queue = DispatchQueue(label: "rangeget.pieces")
    private let verdicts = Mutex<[Verdict]>([])
    /// Pieces waiting to be hashed.
    private let pending = Mutex<[Job]>([])

    /// A piece waiting to be hashed.
    private struct Job: Sendable {
        let index: Int
        let range: ByteRange
        let epoch: Int
        /// Hashed before the others (written by a mirror not proven yet).
        let urgent: Bool
    }
    private let wake: @Sendable () -> Void

    /// Checks `hashes` on the file open at `descriptor`, `size` bytes, whose
    /// pieces in `verified` were checked already; `wake` wakes the loop when
    /// a verdict is ready. Nil when the hashes do not describe that size.
    init?(hashes: PieceHashes, size: Int64, descriptor: Int32, verified: RangeSet, wake: @escaping @Sendable () -> Void)
    {
        guard hashes.fits(size: size) else { return nil }
        self.hashes = hashes
        self.size = size
        self.descriptor = descriptor
        self.wake = wake
        // Only whole pieces count as verified.
        var whole = RangeSet()
        for range in verified.ranges {
            for index in Self.pieces(inside: range, length: hashes.length, size: size) {
                whole.insert(hashes.range(ofPiece: index, size: size))
            }
        }
        self.verified = whole
    }

    /// True when every piece matched.
    var isComplete: Bool { verified.contains(ByteRange(0, size)) }

    /// True while no piece is being hashed.
    var isIdle: Bool { checking.isEmpty }

    /// Sends every piece wholly inside `written`, neither verified nor
    /// being checked, to be hashed; those `urgent` says so of first.
    func submit(within written: RangeSet, urgent: (ByteRange) -> Bool) {
        let candidates = written.subtracting(verified).subtracting(checking)
        guard !candidates.isEmpty else { return }
        var jobs: [Job] = []
        for range in candidates.ranges {
            for index in Self.pieces(inside: range, length: hashes.length, size: size) {
                let piece = hashes.range(ofPiece: index, size: size)
                checking.insert(piece)
                jobs.append(Job(index: index, range: piece, epoch: epoch, urgent: urgent(piece)))
            }
        }
        pending.withLock { $0.append(contentsOf: jobs) }
        for _ in jobs { queue.async { [self] in hashNext() } }
    }

    /// Hashes the most urgent piece waiting (each submitted piece sends one
    /// call here), on the queue.
    private func hashNext() {
        let next = pending.withLock { pending -> Job? in
            guard let pick = pending.firstIndex(where: \.urgent) ?? pending.indices.first else { return nil }
            return pending.remove(at: pick)
        }
        guard let job = next else { return }
        Self.readBack.add(1, ordering: .relaxed)
        let matches = hashes.matches(
            piece: job.index, descriptor: descriptor, offset: job.range.start, count: job.range.count)
        let first = verdicts.withLock {
            $0.append(Verdict(index: job.index, range: job.range, matches: matches, epoch: job.epoch))
            return $0.count == 1
        }
        // One wake-up for the verdicts the loop has not taken yet: the
        // first of them wakes it, the rest are taken on the same turn.
        if first { wake() }
    }

    /// A piece hashed on the write path (`Stream`): taken with the others.
    func streamed(_ verdict: Verdict) {
        Self.hashedAsWritten.add(1, ordering: .relaxed)
        checking.insert(verdict.range)
        streamedVerdicts.append(verdict)
    }

    /// The verdicts ready since the last call; each is acted on only if
    /// `accept` takes it.
    func takeVerdicts() -> [Verdict] {
        var ready = verdicts.withLock { ready in
            defer { ready = [] }
            return ready
        }
        if !streamedVerdicts.isEmpty {
            ready += streamedVerdicts
            streamedVerdicts = []
        }
        for verdict in ready { checking.remove(verdict.range) }
        return ready
    }

    /// True when `verdict` is about the bytes written now (no `forget`
    /// since its check began, also by an earlier verdict of the same
    /// batch); a piece that matched is verified from now on.
    func accept(_ verdict: Verdict) -> Bool {
        guard verdict.epoch == epoch else { return false }
        if verdict.matches { verified.insert(verdict.range) }
        return true
    }

    /// `range` is no longer written as it was: the pieces it touches are
    /// checked again once written anew, and checks under way are void.
    func forget(_ range: ByteRange) {
        guard !range.isEmpty else { return }
        let first = range.start / hashes.length * hashes.length
        let last = min(size, (range.end - 1) / hashes.length * hashes.length + hashes.length)
        verified.remove(ByteRange(first, last))
        epoch += 1
    }

    /// Waits for the hashing under way (before the file is closed).
    func waitUntilIdle() {
        queue.sync {}
    }

    /// The pieces wholly inside `range`.
    static func pieces(inside range: ByteRange, length: Int64, size: Int64) -> Range<Int> {
        let first = (range.start + length - 1) / length
        // The last piece may be short: it counts once the range reaches the file's end.
        let end = range.end >= size ? (size + length - 1) / length : range.end / length
        return Int(first)..<Int(max(first, end))
    }
}
