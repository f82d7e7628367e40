// Byte ranges as the tests meet them: the one range a request's `Range`
// header asks for, what a server was asked for, the union of several, the
// check that a resume asks for no byte saved before, and the library's
// `ByteRange` as a Swift half-open range and back.
import RangeGet
import RangeServer
import XCTest

/// The single range `bytes=a-b` asks for, as a half-open range; nil for any
/// other header. Given the resource's `size`, `bytes=a-` runs to its end and
/// no range runs past it.
func requestedRange(_ header: String?, size: Int64? = nil) -> Range<Int64>? {
    guard let header, header.hasPrefix("bytes=") else { return nil }
    let bounds = header.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
    guard bounds.count == 2, let first = Int64(bounds[0]) else { return nil }
    let end: Int64
    if let last = Int64(bounds[1]) {
        end = last + 1
    } else if bounds[1].isEmpty, let size {
        end = size
    } else {
        return nil
    }
    let clipped = size.map { min(end, $0) } ?? end
    return first < clipped ? first..<clipped : nil
}

/// The last `count` splits of a file of `size` bytes (where an end
/// reserve lies, `Planner.endReserve`): as one range, and split by split.
func lastSplits(_ count: Int64, of size: Int64, split: Int64) -> (all: Range<Int64>, pieces: [Range<Int64>]) {
    let start = size - count * split
    return (start..<size, (0..<count).map { start + $0 * split..<start + ($0 + 1) * split })
}

extension RangeServer {
    /// The ranges its ranged requests asked for, in the order they came.
    var requestedRanges: [Range<Int64>] { statistics.requests.compactMap { requestedRange($0.rangeHeader) } }
}

/// Asserts that no range of `requested` asks again for a byte of `done`, the
/// ranges an earlier run saved (`saved` says when or how, for the message).
func assertNotAskedAgain(
    _ done: [Range<Int64>], in requested: [Range<Int64>], saved: String,
    file: StaticString = #filePath, line: UInt = #line
) {
    for range in requested {
        XCTAssertFalse(
            done.contains { $0.overlaps(range) }, "\(range) asks again for bytes saved \(saved)",
            file: file, line: line)
    }
}

/// The union of `ranges`: sorted, merged where they overlap or touch.
func covered(_ ranges: [Range<Int64>]) -> [Range<Int64>] {
    RangeSet(ranges.map(ByteRange.init)).ranges.map(Range.init)
}

extension ByteRange {
    /// The bytes of `range`.
    init(_ range: Range<Int64>) { self.init(range.lowerBound, range.upperBound) }
}

extension Range<Int64> {
    /// The bytes of `range`.
    init(_ range: ByteRange) { self = range.start..<range.end }
}
