// Issue 12 items 2 and 3, the library's part: the planner and the progress
// figures take any value a library caller (or a server's Content-Length)
// can hand them, sizes and minimum splits up to Int64.max, rates that are 0,
// infinite or NaN, and never trap. Seeded, so a failure replays.
import RangeServer
import XCTest

@testable import RangeGet

final class SaturatingArithmeticTests: XCTestCase {
    private let edges: [Int64] = [
        1, 2, 3, 1 << 20, (1 << 31) - 1, 1 << 32, 1 << 40, (1 << 62) - 1, 1 << 62, (1 << 62) + 1,
        Int64.max / 2, Int64.max / 2 + 1, Int64.max - 1, Int64.max
    ]
    private let rates: [Double?] = [nil, 0, 1e-300, 1, 1_048_576, 1e18, 9.3e18, 1e300, .infinity, .nan, -1]

    private func value(_ random: inout SplitMix64) -> Int64 {
        random.next() % 2 == 0
            ? edges[Int(random.next() % UInt64(edges.count))] : Int64.random(in: 1...Int64.max, using: &random)
    }

    /// `--min-split 5000000T` trapped in `2 * minimumSplit`; a library caller
    /// could do the same with any minimum split above Int64.max / 2.
    func testPlansNearInt64MaxCoverTheBytesWithoutATrap() {
        var random = SplitMix64(seed: 12_02)
        for _ in 0..<20_000 {
            let size = value(&random)
            let start = Int64.random(in: 0...(Int64.max - size), using: &random)
            let missing = RangeSet([ByteRange(start, start + size)])
            let minimum = random.next() % 8 == 0 ? Int64.random(in: -5...0, using: &random) : value(&random)
            let connections = Int.random(in: 1...64, using: &random)
            // A piece hash's length to cut on, now and then.
            let grain = random.next() % 2 == 0 ? 1 : max(1, value(&random))
            let plan = Planner(connections: connections, minimumSplit: minimum, grain: grain).plan(missing)
            XCTAssertEqual(RangeSet(plan), missing, "size \(size) at \(start), minimum \(minimum)")
            XCTAssertLessThanOrEqual(plan.count, connections)
            XCTAssertEqual(plan, plan.sorted())
            if plan.count > 1 {
                XCTAssertTrue(plan.allSatisfy { $0.count >= max(1, minimum) }, "no piece below the minimum: \(plan)")
            }
        }
    }

    func testStealsNearInt64MaxStayInsideTheRemainingRange() {
        var random = SplitMix64(seed: 12_03)
        for _ in 0..<20_000 {
            let size = value(&random)
            let start = Int64.random(in: 0...(Int64.max - size), using: &random)
            let remaining = ByteRange(start, start + size)
            let minimum = value(&random)
            let planner = Planner(
                connections: 8, minimumSplit: minimum, grain: random.next() % 2 == 0 ? 1 : max(1, value(&random)))
            let victim = rates[Int(random.next() % UInt64(rates.count))]
            let thief = rates[Int(random.next() % UInt64(rates.count))]
            let delay = [0, 0.1, 1e300, -1][Int(random.next() % 4)]
            if let stolen = planner.steal(from: remaining, victimRate: victim, thiefRate: thief, setupDelay: delay) {
                XCTAssertTrue(
                    stolen.start >= remaining.start && stolen.end == remaining.end,
                    "\(stolen) outside \(remaining) (victim \(String(describing: victim)), thief \(String(describing: thief)))"
                )
                XCTAssertGreaterThanOrEqual(stolen.count, minimum)
            }
            _ = planner.shouldRace(remaining, victimRate: victim ?? 0, thiefRate: thief, setupDelay: delay)
        }
        let whole = ByteRange(0, Int64.max)
        XCTAssertEqual(
            Planner(connections: 2, minimumSplit: Int64.max / 2).steal(
                from: whole, victimRate: nil, thiefRate: nil, setupDelay: 0), ByteRange(Int64.max / 2, Int64.max))
        XCTAssertNil(
            Planner(connections: 2, minimumSplit: Int64.max / 2 + 1).steal(
                from: whole, victimRate: nil, thiefRate: nil, setupDelay: 0))
        XCTAssertNil(
            Planner(connections: 2, minimumSplit: 1).steal(
                from: whole, victimRate: 1, thiefRate: .infinity, setupDelay: 0.1), "an infinite rate gives no cut")
    }

    /// A 200 claiming `Content-Length: 9000000000000000000` reaches
    /// `secondsLeft`; so may any figures a library caller makes up.
    func testSecondsLeftNearInt64MaxIsFiniteAndNeverNegative() {
        var random = SplitMix64(seed: 12_04)
        let figures: [Int64] = [Int64.min, -1, 0, 1, 1 << 40] + edges
        for _ in 0..<20_000 {
            let total = figures[Int(random.next() % UInt64(figures.count))]
            let done =
                random.next() % 2 == 0
                ? figures[Int(random.next() % UInt64(figures.count))]
                : Int64.random(in: Int64.min...Int64.max, using: &random)
            let rate = rates[Int(random.next() % UInt64(rates.count))] ?? 0
            let progress = DownloadProgress(
                bytesDone: done, totalBytes: total, bytesPerSecond: rate, activeConnections: 1)
            if let left = progress.secondsLeft {
                XCTAssertGreaterThanOrEqual(left, 0, "total \(total), done \(done), rate \(rate)")
                XCTAssertFalse(left.isNaN)
            } else {
                XCTAssertFalse(rate > 0, "unknown only without a rate")
            }
        }
        let claimed = DownloadProgress(
            bytesDone: 0, totalBytes: 9_000_000_000_000_000_000, bytesPerSecond: 1, activeConnections: 1)
        XCTAssertEqual(claimed.secondsLeft, 9e18)
    }
}
