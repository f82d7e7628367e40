// The ranges spread over a file (SpotCheck.samples) that MirrorVote compares across mirrors: one in each equal stripe of
// the file, the whole file when it is small.
import XCTest

@testable import RangeGet

final class SpreadSampleTests: XCTestCase {
    func testSamplesAreSpreadOverTheFile() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<100 {
            let samples = SpotCheck.samples(size: 1 << 20, count: 4, length: 16 << 10, using: &random)
            XCTAssertEqual(samples.count, 4)
            for (index, sample) in samples.enumerated() {
                XCTAssertGreaterThanOrEqual(sample.start, Int64(index) << 18, "\(samples)")
                XCTAssertLessThanOrEqual(sample.end, Int64(index + 1) << 18, "\(samples)")
                XCTAssertEqual(sample.count, 16 << 10)
            }
        }
    }

    func testASmallFileIsComparedWhole() {
        var random = SystemRandomNumberGenerator()
        XCTAssertEqual(SpotCheck.samples(size: 1000, count: 4, length: 16 << 10, using: &random), [ByteRange(0, 1000)])
        XCTAssertEqual(SpotCheck.samples(size: 0, count: 4, length: 16 << 10, using: &random), [])
    }

    /// The size the mirrors agree on (MirrorVote.majority): most of them, a tie to the first.
    func testTheMostCommonValueWinsAndATieGoesToTheFirst() {
        XCTAssertNil(MirrorVote.majority([Int64]()))
        let cases: [([Int64?], Int64?)] = [
            ([5], 5),
            ([537_395_601_464, 0, 0], 0),
            ([0, 537_395_601_464, 7], 0),
            ([7, 0, 0, 7, 7], 7),
            ([nil, 3, nil], nil),
            ([3, nil], 3)
        ]
        for (values, expected) in cases {
            XCTAssertEqual(MirrorVote.majority(values), .some(expected), "\(values)")
        }
    }

    /// The mirrors a download keeps and `bench` calls the same bytes
    /// (MirrorVote.largestGroup): the largest group of equal answers, a tie
    /// to the group of the first; a mirror with no answer joins none.
    func testTheLargestGroupOfEqualAnswersWinsAndATieGoesToTheFirst() {
        let cases: [([String?], [Int])] = [
            ([], []),
            ([nil, nil], []),
            (["a"], [0]),
            (["a", "b"], [0]),
            (["b", "a", "a"], [1, 2]),
            (["a", nil, "b", "b", "a", "b"], [2, 3, 5]),
            ([nil, "b", "a"], [1])
        ]
        for (answers, expected) in cases {
            XCTAssertEqual(MirrorVote.largestGroup(answers), expected, "\(answers)")
        }
    }
}
