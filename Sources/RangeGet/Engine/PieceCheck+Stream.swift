// Pieces hashed on the write path: a piece one transfer writes whole, from
// its first byte to its last in order, is hashed in the write callback right
// after each pwrite, while its bytes are still in the CPU's cache, and its
// verdict is ready the moment its last byte is written. Reading pieces back
// from the page cache on the hashing queue added 0.97 s of CPU per GiB where
// `openssl speed` hashes a GiB in 0.60 (one hot buffer); on the write path
// they add 0.55 to 0.67 (docs/PERFORMANCE-LOG.md, 2026-12-07, "pieces hashed
// on the write path"). With piece hashes the planner cuts at piece boundaries
// (`Planner.grain`), so nearly every piece has one writer; the others (a
// transfer starting or cut inside a piece, bytes a race's other side wrote, a
// resume's pieces written before) are read back as before (PieceCheck).
internal import Digests
import Synchronization

extension PieceCheck {
    /// One connection's running hash: the piece its transfer is writing, if
    /// it wrote every byte of it so far. Engine thread only (the write
    /// callback and the connection's transitions).
    final class Stream {
        let check: PieceCheck
        /// The piece being hashed, its next byte, and the check's epoch when it began.
        private var current: (index: Int, range: ByteRange, next: Int64, epoch: Int, digester: Digester)?

        init(check: PieceCheck) {
            self.check = check
        }

        /// Hashes `count` bytes just written at `offset`. Bytes that do not
        /// follow the piece being hashed end it unfinished (it is read back);
        /// hashing starts again at the next piece boundary.
        func add(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) {
            var bytes = bytes
            var left = Int64(count)
            var offset = offset
            while left > 0 {
                if current?.next != offset {
                    guard let skipped = begin(at: offset, within: left) else { return }
                    bytes += Int(skipped)
                    offset += skipped
                    left -= skipped
                }
                guard let piece = current else { return }
                let taken = min(left, piece.range.end - offset)
                piece.digester.update(UnsafeRawBufferPointer(start: bytes, count: Int(taken)))
                bytes += Int(taken)
                offset += taken
                left -= taken
                current?.next = offset
                if offset == piece.range.end {
                    current = nil
                    check.streamed(
                        Verdict(
                            index: piece.index, range: piece.range,
                            matches: piece.digester.finish() == check.hashes.hex(ofPiece: piece.index),
                            epoch: piece.epoch))
                }
            }
        }

        /// Starts the first piece beginning at or after `offset` and within
        /// `left` bytes of it: the bytes skipped to reach it, or nil (no
        /// piece starts there: nothing is hashed until the next write).
        private func begin(at offset: Int64, within left: Int64) -> Int64? {
            current = nil
            let length = check.hashes.length
            let index = offset / length + (offset % length == 0 ? 0 : 1)
            let start = index * length
            guard start - offset < left, start < check.size, let digester = Digester(check.hashes.algorithm.digest)
            else { return nil }
            current = (
                Int(index), check.hashes.range(ofPiece: Int(index), size: check.size), start, check.epoch, digester
            )
            return start - offset
        }

        /// The piece being hashed is not finished by this transfer: it ended.
        func interrupt() {
            current = nil
        }

        /// The bytes of `range` the transfer wrote do not count: a verdict
        /// on them, given or coming, is void (`PieceCheck.forget`).
        func disown(_ range: ByteRange) {
            current = nil
            check.forget(range)
        }
    }

    /// How many pieces were hashed on the write path and how many read
    /// back, by every download of the process (what the tests and
    /// benchmarks of the write path look at).
    static let hashedAsWritten = Atomic<Int>(0)
    static let readBack = Atomic<Int>(0)
}
