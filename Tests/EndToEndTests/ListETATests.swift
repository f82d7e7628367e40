// Issue 37, item 3: an honest list ETA. With six large files after twenty
// small ones, a list's line read `ETA 0:05` from 3.5 s until the run ended at
// 20.8 s: each file that had not told its size was counted at the mean size
// told, the small files' size. Now the line is a bound while sizes are
// unknown (`ETA >= 0:05`, and how many are unknown), and once every size is
// known its ETA is within 25% of the time the run then takes (or a second,
// the line's resolution). The test reads the line on a pseudo-terminal, as
// a person sees it, each redraw timed as it arrives.
import Foundation
import Glibc
import RangeGet
import RangeServer
import SystemSupport
import XCTest

final class ListETATests: EndToEndTestCase {
    func testOnceEverySizeIsKnownTheListETAIsWithinAQuarterOfTheTimeLeft() throws {
        var lines: [String] = []
        for index in 0..<20 {
            server.setResource(Resource.generated(size: 64 << 10, seed: UInt64(3800 + index)), at: "small\(index)")
            lines.append(server.url("small\(index)"))
        }
        // Two lanes (-j 2): the last large file waits for one of the others,
        // so its size stays unknown for most of the run.
        let sizes: [Int64] = [6 << 20, 6 << 20, 12 << 20]
        for (index, size) in sizes.enumerated() {
            server.setResource(Resource.generated(size: size, seed: UInt64(3850 + index)), at: "large\(index)")
            lines.append(server.url("large\(index)"))
        }
        server.setRatePerConnection(1 << 20)
        try lines.joined(separator: "\n").write(toFile: path("list"), atomically: true, encoding: .utf8)
        let command = [
            "stty cols 200;", "LANG=C.UTF-8", CLI.binary, "-n", "4", "-j", "2", "-d", path("out"), "-i", path("list")
        ]
        .joined(separator: " ")
        let child = try launch(["-qfec", command, "/dev/null"], executable: "/usr/bin/script")

        // Each redraw (text after a carriage return) with the time it was first seen.
        var draws: [(time: Double, text: String)] = []
        var seen = 0
        let started = MonotonicClock.now()
        func readDraws() {
            guard let data = try? Data(contentsOf: child.stdoutURL), data.count > seen else { return }
            let text = String(decoding: data, as: UTF8.self)
            let now = MonotonicClock.now() - started
            let parts = text.split(separator: "\r", omittingEmptySubsequences: true).map(String.init)
            // The last part may be cut mid-draw: kept for the next read.
            let complete = data.last == UInt8(ascii: "\r") || !child.isRunning ? parts.count : parts.count - 1
            let known = draws.count
            for part in parts.prefix(complete).dropFirst(known) { draws.append((now, part)) }
            seen = data.count
        }
        while child.isRunning, MonotonicClock.now() - started < 60 {
            readDraws()
            usleep(20_000)
        }
        let ended = MonotonicClock.now() - started
        readDraws()
        let run = child.finish(timeout: 5)
        XCTAssertEqual(run.status, 0, run.stdout.suffix(2000).description)

        var bounds = 0
        var checked = 0
        for draw in draws {
            guard let match = draw.text.firstMatch(of: /ETA (>= )?(?:(\d+):)?(\d+):(\d\d)/) else { continue }
            if match.1 != nil {
                bounds += 1
                XCTAssertTrue(draw.text.contains("unknown"), "a bound says how many sizes are unknown: \(draw.text)")
                continue
            }
            let eta = Double(Int(match.2 ?? "0")! * 3600 + Int(match.3)! * 60 + Int(match.4)!)
            let actual = ended - draw.time
            // Near the end a second of resolution is most of what is left.
            guard actual >= 2 else { continue }
            checked += 1
            XCTAssertLessThanOrEqual(
                abs(eta - actual), max(0.25 * actual, 1.0),
                "at \(draw.time) s: \(draw.text) with \(actual) s left")
        }
        XCTAssertGreaterThan(checked, 5, "ETAs were read once every size was known: \(draws.map(\.text).suffix(20))")
        XCTAssertGreaterThan(bounds, 5, "the line was a bound while the last file's size was unknown")
        for (index, size) in sizes.enumerated() {
            assertSameBytes(path("out/large\(index)"), Resource.generated(size: size, seed: UInt64(3850 + index)))
        }
    }
}
