import XCTest

@testable import RangeGet

final class PlannerTests: XCTestCase {
    private let mib: Int64 = 1 << 20
    private let gib: Int64 = 1 << 30

    /// (size, connections, minimum split) -> expected segments
    func testPlansCoverTheFileWithoutOverlap() {
        let cases: [(size: Int64, connections: Int, minimum: Int64, segments: Int)] = [
            (0, 8, 1, 0),
            (1, 8, 1, 1),
            (7, 8, 1, 7), // halving stops at pieces of 1 byte: 7 pieces, not 8
            (9, 8, 1, 8),
            (10 * mib, 8, mib, 8),
            (mib + 13, 4, mib, 1), // smaller than two minimum splits: one segment
            (3 * mib, 16, mib, 2),
            (5 * gib + 3, 16, mib, 16),
            (Int64(1) << 40, 256, mib, 256)
        ]
        for (size, connections, minimum, expected) in cases {
            let planner = Planner(connections: connections, minimumSplit: minimum)
            let plan = planner.plan(RangeSet(size > 0 ? [ByteRange(0, size)] : []))
            XCTAssertLessThanOrEqual(plan.count, connections, "size \(size)")
            XCTAssertEqual(plan.count, expected, "size \(size) connections \(connections)")
            XCTAssertEqual(RangeSet(plan), RangeSet(size > 0 ? [ByteRange(0, size)] : []), "plan covers \(size)")
            XCTAssertEqual(plan.reduce(0) { $0 + $1.count }, size, "no overlap for \(size)")
            XCTAssertEqual(plan, plan.sorted(), "sorted by offset")
            for segment in plan where plan.count > 1 {
                XCTAssertGreaterThanOrEqual(segment.count, minimum, "no segment below the minimum split")
            }
        }
    }

    func testSevenBytesOnEightConnectionsUsesPiecesOfAtLeastOneByte() {
        let plan = Planner(connections: 8, minimumSplit: 1).plan(RangeSet([ByteRange(0, 7)]))
        XCTAssertEqual(RangeSet(plan), RangeSet([ByteRange(0, 7)]))
        XCTAssertEqual(plan.count, 7)
    }

    func testPlansOnlyTheMissingBytesAcrossGaps() {
        let done = RangeSet([ByteRange(0, 4 * mib), ByteRange(6 * mib, 7 * mib)])
        let missing = done.complement(size: 10 * mib)
        XCTAssertEqual(missing.ranges, [ByteRange(4 * mib, 6 * mib), ByteRange(7 * mib, 10 * mib)])
        let plan = Planner(connections: 4, minimumSplit: mib).plan(missing)
        XCTAssertEqual(plan.count, 4)
        XCTAssertEqual(RangeSet(plan), missing)
        XCTAssertTrue(plan.allSatisfy { !done.contains(ByteRange($0.start, $0.start + 1)) })
    }

    func testStealHalvesWhenNoRateIsKnown() {
        let planner = Planner(connections: 8, minimumSplit: mib)
        XCTAssertEqual(
            planner.steal(
                from: ByteRange(4 * gib, 4 * gib + 4 * mib), victimRate: nil, thiefRate: nil, setupDelay: 0.1),
            ByteRange(4 * gib + 2 * mib, 4 * gib + 4 * mib))
        XCTAssertNil(planner.steal(from: ByteRange(0, 2 * mib - 1), victimRate: nil, thiefRate: nil, setupDelay: 0.1))
    }

    /// (remaining MiB, victim MiB/s, thief MiB/s, setup s) -> stolen start MiB or nil
    func testStealCutsSoBothFinishTogether() {
        let planner = Planner(connections: 8, minimumSplit: mib)
        let cases: [(Int64, Double?, Double?, Double, Double?)] = [
            // Equal rates, 1 s setup: t = (100 + 10) / 20 = 5.5 s, victim keeps 55 MiB.
            (100, 10, 10, 1, 55),
            // A victim twice as slow keeps a third (no setup delay).
            (90, 10, 20, 0, 30),
            // A silent victim (rate 0) gives everything it has left.
            (64, 0, 10, 0.1, 0),
            // Unknown victim rate: assumed like the thief's.
            (40, nil, 10, 0, 20),
            // Done in 0.1 s: sooner than a new request helps (bytes are on the wire already).
            (20, 200, 200, 0.01, nil),
            // The thief's share would be below the minimum split.
            (3, 1, 1, 1.2, nil),
            // The end game of a large file at 20 MiB/s per connection: 0.2 s
            // left is worth a request (a steal saves 0.1 s or more), so the
            // connections that just finished their pieces are not left idle.
            (4, 20, 20, 0.005, 2.05),
            // 0.1 s left: not worth one.
            (2, 20, 20, 0.005, nil)
        ]
        for (remaining, victim, thief, setup, expected) in cases {
            let stolen = planner.steal(
                from: ByteRange(0, remaining * mib), victimRate: victim.map { $0 * Double(mib) },
                thiefRate: thief.map { $0 * Double(mib) }, setupDelay: setup)
            if let expected {
                XCTAssertEqual(Double(stolen?.start ?? -1) / Double(mib), expected, accuracy: 0.01, "\(remaining) MiB")
                XCTAssertEqual(stolen?.end, remaining * mib)
            } else {
                XCTAssertNil(stolen, "\(remaining) MiB at \(victim ?? -1) MiB/s")
            }
        }
    }

    /// (missing ranges in MiB, connections) -> the reserve in MiB
    func testTheEndReserveIsAMinimumSplitPerConnectionAtTheEndOfWhatIsMissing() {
        let cases: [([(Int64, Int64)], Int, [(Int64, Int64)])] = [
            // 16 connections, 256 MiB: the last 16 MiB.
            ([(0, 256)], 16, [(240, 256)]),
            // At most an eighth of what is missing: 4 pieces of 32 MiB.
            ([(0, 32)], 16, [(28, 32)]),
            // Fewer than two pieces: none (a small file is all first split).
            ([(0, 15)], 16, []),
            ([(0, 64)], 1, []),
            // A resume's holes: taken from the last ones backwards.
            ([(0, 100), (200, 202), (300, 301)], 8, [(95, 100), (200, 202), (300, 301)])
        ]
        for (missing, connections, expected) in cases {
            let planner = Planner(connections: connections, minimumSplit: mib)
            let set = RangeSet(missing.map { ByteRange($0.0 * mib, $0.1 * mib) })
            let reserve = planner.endReserve(of: set)
            XCTAssertEqual(
                reserve, RangeSet(expected.map { ByteRange($0.0 * mib, $0.1 * mib) }), "\(missing) on \(connections)")
            XCTAssertTrue(reserve.ranges.allSatisfy(set.contains), "only missing bytes are reserved")
        }
        // The first byte missing is never reserved: the opening's piece starts there.
        let single = Planner(connections: 256, minimumSplit: 1).endReserve(of: RangeSet([ByteRange(0, 16)]))
        XCTAssertEqual(single, RangeSet([ByteRange(14, 16)]))
    }

    /// reserve in MiB -> the piece handed out, in MiB
    func testAReservedPieceIsAMinimumSplitFromTheLowestByte() {
        let planner = Planner(connections: 8, minimumSplit: mib)
        let cases: [([(Double, Double)], (Double, Double)?)] = [
            ([(10, 14)], (10, 11)),
            // A remainder below a minimum split goes with the piece.
            ([(10, 11.5)], (10, 11.5)),
            ([(10, 10.5)], (10, 10.5)),
            // From the lowest hole first.
            ([(3, 3.5), (10, 14)], (3, 3.5)),
            ([], nil)
        ]
        func bytes(_ mebibytes: Double) -> Int64 { Int64(mebibytes * Double(mib)) }
        for (reserve, expected) in cases {
            let set = RangeSet(reserve.map { ByteRange(bytes($0.0), bytes($0.1)) })
            XCTAssertEqual(
                planner.reservedPiece(from: set), expected.map { ByteRange(bytes($0.0), bytes($0.1)) }, "\(reserve)")
        }
        XCTAssertEqual(
            Planner(connections: 8, minimumSplit: Int64.max).reservedPiece(from: RangeSet([ByteRange(0, 10)])),
            ByteRange(0, 10))
    }

    func testWithAGrainEveryCutFallsOnAMultipleOfIt() {
        // A piece hash's length: each hash piece then has one writer.
        let grain: Int64 = 256 << 10
        let planner = Planner(connections: 7, minimumSplit: grain, grain: grain)
        let missing = RangeSet([ByteRange(12_345, 10 * mib + 77), ByteRange(20 * mib, 31 * mib + 5)])
        let plan = planner.plan(missing)
        XCTAssertEqual(RangeSet(plan), missing)
        XCTAssertEqual(plan.count, 7)
        let edges = Set(missing.ranges.flatMap { [$0.start, $0.end] })
        for piece in plan {
            for cut in [piece.start, piece.end] where !edges.contains(cut) {
                XCTAssertEqual(cut % grain, 0, "\(plan)")
            }
        }
        // A steal's cut, by rate and by halves, is moved up to the grain.
        let remaining = ByteRange(3 * mib + 1000, 9 * mib + 3)
        let byRate = planner.steal(from: remaining, victimRate: 3e6, thiefRate: 5e6, setupDelay: 0.01)
        let byHalf = planner.steal(from: remaining, victimRate: nil, thiefRate: nil, setupDelay: 0.01)
        for stolen in [byRate, byHalf] {
            let stolen = try! XCTUnwrap(stolen)
            XCTAssertEqual(stolen.start % grain, 0, "\(stolen)")
            XCTAssertEqual(stolen.end, remaining.end)
        }
        // Without a grain the cut is where the rates put it.
        let free = Planner(connections: 7, minimumSplit: grain).steal(
            from: remaining, victimRate: 3e6, thiefRate: 5e6, setupDelay: 0.01)
        XCTAssertNotEqual(free.map { $0.start % grain }, 0)
        // A reserved piece ends on the grain too.
        let reserved = try! XCTUnwrap(planner.reservedPiece(from: RangeSet([ByteRange(1000, 5 * mib)])))
        XCTAssertEqual(reserved.end % grain, 0)
        XCTAssertGreaterThanOrEqual(reserved.count, grain)
        // A cut that would reach the range's end stays where it was: the
        // grain never drops a piece's last bytes.
        XCTAssertEqual(
            Planner(connections: 2, minimumSplit: 1, grain: Int64.max / 2).plan(RangeSet([ByteRange(0, 10)])).count,
            2)
    }

    func testRaceOnlyWhenAFreshRequestIsClearlyFaster() {
        let planner = Planner(connections: 8, minimumSplit: mib)
        let tail = ByteRange(0, mib)
        XCTAssertTrue(planner.shouldRace(tail, victimRate: 0, thiefRate: Double(10 * mib), setupDelay: 0.1))
        XCTAssertTrue(
            planner.shouldRace(tail, victimRate: Double(mib) / 10, thiefRate: Double(10 * mib), setupDelay: 0.1))
        XCTAssertFalse(
            planner.shouldRace(tail, victimRate: Double(4 * mib), thiefRate: Double(10 * mib), setupDelay: 0.1))
        // 0.33 s left at 3 MiB/s against 0.2 s for a fresh request: worth it (the
        // gain needed is 0.1 s; at 0.25 s this tail was left to the slow connection).
        XCTAssertTrue(
            planner.shouldRace(tail, victimRate: Double(3 * mib), thiefRate: Double(10 * mib), setupDelay: 0.1))
        XCTAssertFalse(planner.shouldRace(tail, victimRate: 0, thiefRate: nil, setupDelay: 0.1))
    }
}

final class RangeSetTests: XCTestCase {
    func testInsertMergesOverlappingAndTouchingRanges() {
        let cases: [([ByteRange], [ByteRange])] = [
            ([], []),
            ([ByteRange(0, 10), ByteRange(10, 20)], [ByteRange(0, 20)]),
            ([ByteRange(10, 20), ByteRange(0, 5)], [ByteRange(0, 5), ByteRange(10, 20)]),
            ([ByteRange(0, 5), ByteRange(3, 8), ByteRange(20, 30), ByteRange(7, 21)], [ByteRange(0, 30)]),
            ([ByteRange(5, 5)], []),
            (
                [ByteRange(1 << 32, (1 << 32) + 1), ByteRange((1 << 31) - 1, 1 << 32)],
                [ByteRange((1 << 31) - 1, (1 << 32) + 1)]
            )
        ]
        for (inserted, expected) in cases {
            XCTAssertEqual(RangeSet(inserted).ranges, expected, "\(inserted)")
        }
    }

    func testRemoveAndComplement() {
        var set = RangeSet([ByteRange(0, 100)])
        set.remove(ByteRange(10, 20))
        set.remove(ByteRange(90, 200))
        XCTAssertEqual(set.ranges, [ByteRange(0, 10), ByteRange(20, 90)])
        XCTAssertEqual(set.byteCount, 80)
        XCTAssertEqual(set.complement(size: 100).ranges, [ByteRange(10, 20), ByteRange(90, 100)])
        XCTAssertEqual(RangeSet().complement(size: 0).ranges, [])
        XCTAssertTrue(set.contains(ByteRange(20, 90)))
        XCTAssertFalse(set.contains(ByteRange(5, 15)))
    }

    func testEncodesAsPairsOfOffsets() throws {
        let set = RangeSet([ByteRange(0, 1), ByteRange(5 << 30, 6 << 30)])
        let json = String(decoding: try JSONEncoder().encode(set), as: UTF8.self)
        XCTAssertEqual(json, "[[0,1],[5368709120,6442450944]]")
        XCTAssertEqual(try JSONDecoder().decode(RangeSet.self, from: Data(json.utf8)), set)
        XCTAssertThrowsError(try JSONDecoder().decode(RangeSet.self, from: Data("[[5,1]]".utf8)))
        XCTAssertThrowsError(try JSONDecoder().decode(RangeSet.self, from: Data("[[-1,1]]".utf8)))
    }
}
