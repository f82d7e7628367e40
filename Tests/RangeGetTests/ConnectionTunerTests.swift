import XCTest

@testable import RangeGet

/// The learned connection count against model servers: the total each
/// count would get, fed window by window as the engine feeds it.
final class ConnectionTunerTests: XCTestCase {
    /// Feeds `total(count)` for `windows` windows of 0.2 s from `start`; returns the tuner and the time.
    private func run(
        _ tuner: inout ConnectionTuner, from start: Double = 0, windows: Int = 40, total: (Int) -> Double
    ) -> Double {
        var now = start
        for _ in 0..<windows {
            now += 0.2
            tuner.update(rate: total(tuner.target), now: now, worthProbing: true)
        }
        return now
    }

    func testACapOnEachConnectionKeepsTheCeiling() {
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        _ = run(&tuner) { Double($0) * 20e6 }
        XCTAssertEqual(tuner.target, 16)
        XCTAssertEqual(tuner.settled, 16)
        XCTAssertEqual(tuner.peak, 16)
        XCTAssertTrue(tuner.reason.contains("12 lost 25%"), tuner.reason)
    }

    func testASharedUplinkShedsToOneConnection() {
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        _ = run(&tuner) { _ in 40e6 }
        XCTAssertEqual(tuner.settled, 1, tuner.reason)
        XCTAssertLessThanOrEqual(tuner.target, 2, "at most a one-window probe above the settled count")
    }

    func testAServerThatStopsScalingAtFourSettlesNearFour() {
        // Each connection adds 10 MB/s up to 4, nothing beyond.
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        _ = run(&tuner) { Double(min($0, 4)) * 10e6 }
        XCTAssertTrue((4...6).contains(tuner.settled), "settled at \(tuner.settled): \(tuner.reason)")
    }

    func testFewerWithinTheToleranceAreKeptButNotALargerLoss() {
        // 16: 100, 12: 97, 6: 95, 3: 80 (a CPU-bound loopback): 3 loses 20% of the best.
        let totals = [16: 100.0, 12: 97, 6: 95, 3: 80, 1: 40, 2: 60]
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        _ = run(&tuner) { totals[$0] ?? 100 }
        XCTAssertEqual(tuner.settled, 6, tuner.reason)
    }

    func testARefusalCapsTheCountForGood() {
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        tuner.refused(running: 15)
        tuner.refused(running: 4)
        XCTAssertEqual(tuner.target, 4)
        XCTAssertEqual(tuner.serverLimit, 4)
        // The connections scale, but the count never goes above what the server accepted.
        var seen = Set<Int>()
        var now = 0.0
        for _ in 0..<100 {
            now += 0.2
            tuner.update(rate: Double(tuner.target) * 5e6, now: now, worthProbing: true)
            seen.insert(tuner.target)
        }
        XCTAssertEqual(seen.max(), 4, "counts tried: \(seen.sorted())")
        XCTAssertTrue(tuner.reason.contains("refused more than 4"), tuner.reason)
    }

    func testALimitThatChangesStartsANewRound() {
        // A shared uplink first (settles at 1), then a cap on each connection.
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        let changed = run(&tuner, windows: 30) { _ in 40e6 }
        XCTAssertEqual(tuner.settled, 1)
        // Within 3 s (15 windows) of the change it runs 16 again.
        _ = run(&tuner, from: changed, windows: 15) { Double($0) * 20e6 }
        XCTAssertEqual(tuner.target, 16, tuner.reason)
        XCTAssertTrue(tuner.reason.contains("moved"), tuner.reason)
    }

    func testASettledCountTriesOneDoublingNowAndThenAndBacksOff() {
        var tuner = ConnectionTuner(start: 4, ceiling: 16)
        var probes = 0
        var now = 0.0
        var last = tuner.target
        // Everything beyond 4 adds nothing: each doubling tried is undone.
        for _ in 0..<300 {
            now += 0.2
            tuner.update(rate: Double(min(tuner.target, 4)) * 10e6, now: now, worthProbing: true)
            if tuner.target > last { probes += 1 }
            last = tuner.target
        }
        XCTAssertEqual(tuner.settled, 4, tuner.reason)
        // 60 s settled: probes at 2, 4, 8, 16, 16, 16 s apart at most.
        XCTAssertGreaterThanOrEqual(probes, 3)
        XCTAssertLessThanOrEqual(probes, 8)
    }

    func testNoRoundNearTheEnd() {
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        tuner.update(rate: 40e6, now: 1, worthProbing: false)
        XCTAssertEqual(tuner.target, 16)
        XCTAssertEqual(tuner.peak, 16)
    }

    /// At the ceiling, a round can only shed, and a shed connection that
    /// counted comes back a round trip late: where that costs more than the
    /// engine says fewer could save, the count stays, and says why.
    func testNoSheddingWhereItCostsMoreThanItCouldSave() {
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        var now = 0.0
        for _ in 0..<10 {
            now += 0.2
            tuner.update(rate: 80e6, now: now, worthProbing: true, worthShedding: false)
        }
        XCTAssertEqual(tuner.target, 16)
        XCTAssertEqual(tuner.peak, 16)
        XCTAssertEqual(tuner.settled, 16)
        XCTAssertTrue(tuner.reason.contains("cost more than they could save"), tuner.reason)
        // Below the ceiling a round still doubles; a doubling that did not
        // pay goes back, and sheds nothing below.
        var below = ConnectionTuner(start: 4, ceiling: 16)
        now = 0
        for _ in 0..<10 {
            now += 0.2
            below.update(rate: 40e6, now: now, worthProbing: true, worthShedding: false)
        }
        XCTAssertEqual(below.peak, 8)
        XCTAssertEqual(below.target, 4, below.reason)
    }

    func testTheWindowSpansABurstyServersPauses() {
        XCTAssertEqual(ConnectionTuner.window(longestGap: 0.01), ConnectionTuner.shortestWindow)
        XCTAssertEqual(ConnectionTuner.window(longestGap: 0.1), 0.3, accuracy: 1e-9)
        XCTAssertEqual(ConnectionTuner.window(longestGap: 5), ConnectionTuner.longestWindow)
    }

    /// A loop with no idle moment (loopback: the CPU is the limit) sheds
    /// to two whatever the noise says, and never tries more; also in a short
    /// download, where shedding connections that counted would not pay back:
    /// these did not count.
    func testASaturatedLoopShedsToTwo() {
        for worthShedding in [true, false] {
            var tuner = ConnectionTuner(start: 16, ceiling: 16)
            var now = 0.0
            var tried = Set<Int>()
            for window in 0..<60 {
                now += 0.2
                // 1 GB/s give or take half, at every count (a VM's host).
                let noise = [1.0, 0.5, 1.15, 0.6][window % 4]
                tuner.update(
                    rate: 1e9 * noise, saturated: true, now: now, worthProbing: true, worthShedding: worthShedding)
                tried.insert(tuner.target)
            }
            XCTAssertEqual(tuner.settled, 2, tuner.reason)
            XCTAssertEqual(tried.sorted(), [2, 3, 6, 12, 16], "sheds only, no doubling tried while saturated")
            XCTAssertTrue(tuner.reason.contains("saturated"), tuner.reason)
        }
    }

    /// Saturated at 16 but not at 12, and 12 loses a quarter: a cap on
    /// each connection after all; the count goes back to 16.
    func testFewerThatFreeTheLoopAndLoseAreUndone() {
        var tuner = ConnectionTuner(start: 16, ceiling: 16)
        var now = 0.0
        for _ in 0..<20 {
            now += 0.2
            let count = tuner.target
            tuner.update(rate: Double(count) * 60e6, saturated: count == 16, now: now, worthProbing: true)
        }
        XCTAssertEqual(tuner.settled, 16, tuner.reason)
    }
}
