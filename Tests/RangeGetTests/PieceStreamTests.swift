// Pieces hashed on the write path (PieceCheck.Stream): a piece gets a
// verdict only when one connection wrote every byte of it, in order; a
// piece it began inside, a gap, an interrupted transfer or bytes taken back
// leave that piece to the read-back.
import Digests
import Glibc
import XCTest

@testable import RangeGet

final class PieceStreamTests: XCTestCase {
    private let length: Int64 = 4096
    /// Ten whole pieces and a short last one.
    private lazy var bytes: [UInt8] = (0..<(10 * 4096 + 1000)).map {
        UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13)
    }
    private var size: Int64 { Int64(bytes.count) }

    private func hashes(of bytes: [UInt8]) -> PieceHashes {
        let digests = stride(from: 0, to: bytes.count, by: Int(length)).map { start in
            bytes[start..<min(start + Int(length), bytes.count)].withUnsafeBytes { DigestAlgorithm.sha256.hex(of: $0) }
        }
        return PieceHashes(algorithm: .sha256, length: length, hexDigests: digests)!
    }

    private func check() -> PieceCheck {
        // The stream never reads the file: the descriptor is only the read-back's.
        PieceCheck(hashes: hashes(of: bytes), size: size, descriptor: -1, verified: RangeSet(), wake: {})!
    }

    /// Feeds `bytes[range]` to `stream` in chunks of `chunk` bytes.
    private func write(_ range: Range<Int>, chunk: Int, to stream: PieceCheck.Stream, from data: [UInt8]? = nil) {
        let data = data ?? bytes
        data.withUnsafeBytes { all in
            for start in stride(from: range.lowerBound, to: range.upperBound, by: chunk) {
                let end = min(start + chunk, range.upperBound)
                stream.add(all.baseAddress! + start, count: end - start, at: Int64(start))
            }
        }
    }

    func testAWholeFileWrittenInOrderGetsAVerdictForEveryPieceAsItsLastByteIsWritten() {
        let check = check()
        let stream = PieceCheck.Stream(check: check)
        write(0..<4096 * 3 - 1, chunk: 3000, to: stream)
        // Until the engine takes their verdicts, they count as being checked:
        // the turn's read-back submission skips them.
        XCTAssertFalse(check.isIdle)
        XCTAssertEqual(check.takeVerdicts().map(\.index), [0, 1], "piece 2 lacks its last byte")
        write(4096 * 3 - 1..<bytes.count, chunk: 5000, to: stream)
        let verdicts = check.takeVerdicts()
        XCTAssertEqual(verdicts.map(\.index), Array(2...10))
        XCTAssertTrue(verdicts.allSatisfy(\.matches))
        XCTAssertEqual(verdicts.last?.range, ByteRange(40960, size), "the short last piece")
        for verdict in verdicts { XCTAssertTrue(check.accept(verdict)) }
        XCTAssertTrue(check.isIdle)
    }

    func testAPieceBegunInsideOrBrokenByAGapIsLeftToTheReadBack() {
        let check = check()
        let stream = PieceCheck.Stream(check: check)
        // Begins inside piece 1: hashing starts at piece 2.
        write(5000..<4096 * 4, chunk: 1500, to: stream)
        XCTAssertEqual(check.takeVerdicts().map(\.index), [2, 3])
        // A gap inside piece 5 (bytes a race's other side wrote): piece 5 is
        // left, piece 6 is hashed.
        write(4096 * 5..<4096 * 5 + 100, chunk: 4096, to: stream)
        write(4096 * 5 + 200..<4096 * 7, chunk: 4096, to: stream)
        XCTAssertEqual(check.takeVerdicts().map(\.index), [6])
        // A transfer that ends inside piece 8, and the next that goes on
        // from the same byte: piece 8 had two writers, and is left.
        write(4096 * 8..<4096 * 8 + 10, chunk: 4096, to: stream)
        stream.interrupt()
        write(4096 * 8 + 10..<4096 * 10, chunk: 4096, to: stream)
        XCTAssertEqual(check.takeVerdicts().map(\.index), [9])
    }

    func testAFlippedByteIsABadVerdictForItsPieceAlone() {
        let check = check()
        let stream = PieceCheck.Stream(check: check)
        var damaged = bytes
        damaged[4096 * 4 + 17] ^= 1
        write(0..<bytes.count, chunk: 65536, to: stream, from: damaged)
        let verdicts = check.takeVerdicts()
        XCTAssertEqual(verdicts.count, 11)
        XCTAssertEqual(verdicts.filter { !$0.matches }.map(\.index), [4])
    }

    func testBytesTakenBackVoidTheirVerdicts() {
        let check = check()
        let stream = PieceCheck.Stream(check: check)
        write(0..<4096 * 2, chunk: 4096, to: stream)
        let given = check.takeVerdicts()
        XCTAssertTrue(check.accept(given[0]))
        // Piece 1's verdict is not acted on yet when the bytes from 6000 are taken back.
        stream.disown(ByteRange(6000, 4096 * 2))
        XCTAssertFalse(check.accept(given[1]), "a verdict about bytes taken back")
        XCTAssertEqual(check.verified, RangeSet([ByteRange(0, 4096)]))
        // The same range written again: a fresh verdict.
        write(4096..<4096 * 2, chunk: 4096, to: stream)
        let again = check.takeVerdicts()
        XCTAssertEqual(again.map(\.index), [1])
        XCTAssertTrue(check.accept(again[0]))
        XCTAssertEqual(check.verified, RangeSet([ByteRange(0, 4096 * 2)]))
    }
}
