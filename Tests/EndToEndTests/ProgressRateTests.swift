// Issue 18: the first plain progress line read `1.0 MiB / 200 MiB  13.9 GiB/s`:
// the engine's meter had spanned microseconds. The display's rate is its own
// (RateWindow) and never above what the bytes it saw arrive explain.
import Foundation
import RangeGet
import RangeServer
import XCTest

@testable import rangeget

final class ProgressRateTests: EndToEndTestCase {
    /// Snapshots (seconds, bytes done, bytes read from disk just before) and the rate after each.
    func testRateWindowSpeaksOnlyOverAQuarterSecondAndCountsOnlyWhatArrived() {
        let mebibyte: Int64 = 1 << 20
        let cases: [(name: String, snapshots: [(Double, Int64, Int64)], rates: [Double?])] = [
            ("the first snapshot is a baseline", [(0, 5 * mebibyte, 0)], [nil]),
            ("a burst in a millisecond is no rate yet", [(0, 0, 0), (0.001, mebibyte, 0)], [nil, nil]),
            (
                "steady 10 MiB/s", [(0, 0, 0), (0.1, mebibyte, 0), (0.2, 2 * mebibyte, 0), (0.3, 3 * mebibyte, 0)],
                [nil, nil, nil, 10 * 1_048_576]
            ),
            (
                "bytes before the baseline are not the rate", [(0, 100 * mebibyte, 0), (0.5, 101 * mebibyte, 0)],
                [nil, 2 * 1_048_576]
            ),
            (
                "a drop (a file leaving a list's sum) counts as nothing",
                [
                    (0, 10 * mebibyte, 0), (0.25, 2 * mebibyte, 0),
                    (0.5, 3 * mebibyte, 0)
                ], [nil, 0, 2 * 1_048_576]
            ),
            (
                "a resumed file's bytes from disk are not fetched", [(0, 0, 0), (0.5, 51 * mebibyte, 50 * mebibyte)],
                [nil, 2 * 1_048_576]
            ),
            (
                "old samples leave the window", [(0, 0, 0), (1, 0, 0), (4, 0, 0), (4.5, mebibyte, 0)],
                [nil, 0, 0, 1_048_576 / 3.5]
            )
        ]
        for (name, snapshots, rates) in cases {
            var window = RateWindow()
            for ((time, done, fromDisk), rate) in zip(snapshots, rates) {
                window.discount(fromDisk)
                window.add(bytesDone: done, at: time)
                XCTAssertEqual(
                    window.bytesPerSecond.map { ($0 * 1000).rounded() }, rate.map { ($0 * 1000).rounded() },
                    "\(name) at \(time) s")
            }
        }
    }

    /// Every plain line's rate is one the server's caps allow (2 connections
    /// of 2 MiB/s each). The first line comes after a second (issue 37), so
    /// it has a window too.
    func testPlainProgressLinesNeverShowARateTheBytesCannotExplain() throws {
        server.setResource(Resource.generated(size: 24 << 20, seed: 1801), at: "f")
        server.setRatePerConnection(2 << 20)
        let run = try CLI.run(["-n", "2", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stderr.split(separator: "\n").filter { $0.contains("%  ") && $0.hasSuffix(" conn") }
        // At 1 s, then every 5 s: one line at least in a run of 6 s.
        XCTAssertGreaterThanOrEqual(lines.count, 1, run.stderr)
        for line in lines {
            let rate = try XCTUnwrap(
                line.split(separator: " ").firstIndex { $0.hasSuffix("/s") }.map { index in
                    let words = line.split(separator: " ")
                    return ByteCount.parse(String(words[index - 1] + words[index].dropLast(2)))
                } ?? nil, "a rate in \(line)")
            XCTAssertLessThanOrEqual(rate, 5 << 20, "two connections of 2 MiB/s: \(line)")
            XCTAssertGreaterThan(rate, 1 << 20, String(line))
        }
    }
}
