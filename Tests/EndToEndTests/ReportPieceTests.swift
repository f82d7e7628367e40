// The pure pieces of `rangeget report` (issue 42), by tables of cases: the
// escaping of trace text, the figures and axis ticks the page writes, and
// the model's bounds and marker placement.
import Foundation
import XCTest

@testable import rangeget

final class ReportPieceTests: XCTestCase {
    func testTraceTextIsEscapedForHTMLAndXML() {
        let cases: [(String, String)] = [
            ("plain", "plain"),
            ("<b>&\"'", "&lt;b&gt;&amp;&quot;&#39;"),
            ("a\u{0}b\u{1B}[31mc", "a\u{FFFD}b\u{FFFD}[31mc"),
            ("left\u{202E}right\u{2066}", "left\u{FFFD}right\u{FFFD}"),
            ("tab\tand\nline", "tab\tand\nline"),
            ("\u{85}\u{7F}\u{FFFE}", "\u{FFFD}\u{FFFD}\u{FFFD}"),
            ("h\u{e9}llo \u{1F600}", "h\u{e9}llo \u{1F600}")
        ]
        for (text, escaped) in cases {
            XCTAssertEqual(HTMLText.escaped(text), escaped, text.debugDescription)
        }
        let long = String(repeating: "x", count: 10_000)
        XCTAssertEqual(HTMLText.escaped(long), String(repeating: "x", count: HTMLText.longest) + "...")
    }

    func testFiguresNeverTrapAndRoundAsWritten() {
        let cases: [(Double, Int, String)] = [
            (0, 1, "0.0"), (1.25, 1, "1.3"), (-0.04, 1, "0.0"), (-2.5, 0, "-3"), (12.5, 2, "12.50"),
            (0.001, 3, "0.001"), (.nan, 2, "0"), (.infinity, 1, "0"), (1e300, 1, "9223372036854775807")
        ]
        for (value, places, text) in cases {
            XCTAssertEqual(Figure.fixed(value, places), text, "\(value) with \(places)")
        }
        XCTAssertEqual(Figure.seconds(2.498), "2.50 s")
        XCTAssertEqual(Figure.seconds(0.25), "250 ms")
        XCTAssertEqual(Figure.seconds(0.0042), "4.2 ms")
    }

    func testAxisTicksAreRoundAndBounded() {
        let cases: [(Double, Double, [Double], Double)] = [
            (0, 7.3, [0, 2, 4, 6], 2),
            (0, 10, [0, 2, 4, 6, 8, 10], 2),
            (0.002, 2.5, [0.5, 1, 1.5, 2, 2.5], 0.5),
            (0, 0.035, [0, 0.01, 0.02, 0.03], 0.01),
            (3, 3, [3], 1),
            (5, 1, [5], 1),
            (0, .infinity, [0], 1)
        ]
        for (lower, upper, values, step) in cases {
            let ticks = AxisTicks.between(lower, upper, count: 6)
            XCTAssertEqual(ticks.step, step, accuracy: step * 1e-9, "\(lower)...\(upper)")
            XCTAssertEqual(ticks.values.count, values.count, "\(lower)...\(upper): \(ticks.values)")
            for (tick, value) in zip(ticks.values, values) {
                XCTAssertEqual(tick, value, accuracy: step * 1e-9, "\(lower)...\(upper)")
            }
        }
        XCTAssertLessThanOrEqual(AxisTicks.between(0, 1e12, count: 8).values.count, 100)
        XCTAssertLessThanOrEqual(AxisTicks.between(1e-300, 2e-300, count: 8).values.count, 100)
    }

    /// Markers go to the lane of the connection they name, when it
    /// happened; a connection on no drawn lane leaves its marker on the
    /// download's row; lanes and markers past the limits are counted.
    func testTheModelPlacesMarkersAndKeepsToItsLimits() {
        func transfer(_ lane: Int, connection: Int, from start: Double, to end: Double) -> TraceEvent {
            .transfer(
                process: 1,
                TraceTransfer(
                    lane: lane, name: "GET", start: start, duration: end - start, connection: connection,
                    mirrorIndex: connection % 2))
        }
        func instant(_ name: String, connection: Int?, at time: Double) -> TraceEvent {
            .instant(process: 1, TraceInstant(lane: 0, name: name, at: time, connection: connection, details: []))
        }
        let events: [TraceEvent] = [
            transfer(10, connection: 1, from: 0, to: 100), transfer(20, connection: 1, from: 200, to: 300),
            transfer(30, connection: 2, from: 50, to: 60), transfer(40, connection: 3, from: 70, to: 80),
            instant("stolen", connection: 1, at: 250), instant("raced", connection: 1, at: 150),
            instant("retry", connection: 9, at: 10), instant("stall", connection: 2, at: 55),
            instant("retry", connection: 2, at: 55), instant("checkpoint", connection: nil, at: 5),
            instant("retry", connection: 3, at: 75), instant("raced", connection: 3, at: 400)
        ]
        var limits = ReportLimits()
        limits.lanes = 3
        limits.markers = 5
        let report = TraceReport(events, limits: limits)
        let download = report.downloads[0]
        XCTAssertEqual(download.lanes.map(\.id), [10, 30, 40], "the first three to start; lane 20 (at 200) left out")
        func names(_ lane: ReportLane) -> [String] { lane.markers.map(\.name) }
        XCTAssertEqual(names(download.lanes[0]), ["raced", "stolen"], "connection 1 at 150 and 250: lane 20 is out")
        XCTAssertEqual(names(download.lanes[1]), ["stall"], "the stall, not its retry")
        XCTAssertEqual(names(download.lanes[2]), ["retry"], "the race at 400 is past the five markers drawn")
        XCTAssertEqual(names(download.row), ["retry"], "connection 9 is on no lane")
        XCTAssertEqual(download.leftOut.count, 2, "\(download.leftOut)")
        XCTAssertTrue(download.leftOut[0].hasPrefix("1 of 4 lanes (and their 1 transfers) are not drawn"))
        XCTAssertTrue(download.leftOut[1].hasPrefix("1 events are not drawn"))
        XCTAssertEqual(download.tcpConnections, 4)
        XCTAssertEqual(download.transferCount, 4)
    }
}
