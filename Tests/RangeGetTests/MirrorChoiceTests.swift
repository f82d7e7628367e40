// Issue 11, bench: the recommendation is the fastest use of the connections,
// not every mirror near the fastest. A fast mirror (8 MiB/s per connection)
// and a slow one (2 MiB/s per connection) used to be recommended together,
// though the fast one alone is faster with the same connections.
import XCTest

@testable import RangeGet

final class MirrorChoiceTests: XCTestCase {
    private let mib = Double(1 << 20)

    /// A measured mirror: MiB/s on 1 and on `connections` connections.
    private func mirror(
        _ url: String, one: Double, many: Double, connections: Int = 8,
        sameBytes: Bool = true
    ) -> MirrorMeasurement {
        var measurement = MirrorMeasurement(url: url)
        measurement.oneConnection = one * mib
        measurement.manyConnections = many * mib
        measurement.limit = MirrorMeasurement.RateLimit(one: one, many: many, connections: connections)
        measurement.sameBytes = sameBytes
        return measurement
    }

    private func failed(_ url: String) -> MirrorMeasurement {
        var measurement = MirrorMeasurement(url: url)
        measurement.error = "connection refused"
        return measurement
    }

    /// (MiB/s on 1 connection, on N, N) -> kind
    func testRateLimitIsToldFromTheSpeedupOfNConnections() {
        let cases: [(one: Double?, many: Double?, connections: Int, limit: MirrorMeasurement.RateLimit?)] = [
            (8, 64, 8, .perConnection),
            (8, 48, 8, .perConnection), // 6 x: at least 3/4 of N
            (8, 47, 8, .partlyShared),
            (10, 12.5, 8, .shared), // 1.25 x: about the same
            (10, 9, 8, .shared), // fewer: noise, still one uplink
            (10, 13, 8, .partlyShared),
            (4, 6, 2, .perConnection),
            (4, 5, 2, .shared),
            (4, 4, 1, nil), // one connection both times: nothing to compare
            (nil, 4, 8, nil),
            (0, 4, 8, nil)
        ]
        for (one, many, connections, limit) in cases {
            XCTAssertEqual(
                MirrorMeasurement.RateLimit(one: one, many: many, connections: connections), limit,
                "\(String(describing: one)) -> \(String(describing: many)) on \(connections)")
        }
    }

    /// Measured mirrors and N -> the mirrors, their connections and -n.
    func testRecommendsTheFastestAllocationOfTheConnections() {
        let cases:
            [(
                name: String, mirrors: [MirrorMeasurement], connections: Int,
                chosen: [String], perMirror: [Int], count: Int
            )] = [
                (
                    "fast and slow, both per connection: only the fast one, all N",
                    [mirror("http://slow/f", one: 2, many: 16), mirror("http://fast/f", one: 8, many: 64)], 8,
                    ["http://fast/f"], [8], 8
                ),
                (
                    "three shared uplinks one connection fills: all three, one each",
                    [
                        mirror("http://a/f", one: 10, many: 10), mirror("http://b/f", one: 6, many: 6.1),
                        mirror("http://c/f", one: 3, many: 2.9)
                    ], 8,
                    ["http://a/f", "http://b/f", "http://c/f"], [1, 1, 1], 3
                ),
                (
                    "a shared uplink, then per-connection connections on the other",
                    [mirror("http://capped/f", one: 4, many: 32), mirror("http://uplink/f", one: 20, many: 20)], 8,
                    ["http://uplink/f", "http://capped/f"], [1, 7], 8
                ),
                (
                    "the fastest serves other bytes: never recommended",
                    [
                        mirror("http://wrong/f", one: 50, many: 400, sameBytes: false),
                        mirror("http://good/f", one: 2, many: 16)
                    ], 8,
                    ["http://good/f"], [8], 8
                ),
                (
                    "partly shared: connections until the ceiling",
                    [mirror("http://a/f", one: 1, many: 3)], 8,
                    ["http://a/f"], [3], 3
                ),
                (
                    "an uplink adding under 5% is not worth a connection",
                    [mirror("http://big/f", one: 10, many: 10), mirror("http://tiny/f", one: 0.3, many: 0.3)], 8,
                    ["http://big/f"], [1], 1
                ),
                (
                    "a failed mirror is skipped",
                    [failed("http://down/f"), mirror("http://up/f", one: 5, many: 5)], 4,
                    ["http://up/f"], [1], 1
                ),
                (
                    "measured on one connection only: the fastest",
                    [
                        mirror("http://a/f", one: 3, many: 3, connections: 1),
                        mirror("http://b/f", one: 5, many: 5, connections: 1)
                    ], 1,
                    ["http://b/f"], [1], 1
                )
            ]
        for (name, mirrors, connections, chosen, perMirror, count) in cases {
            let choice = MirrorChoice(mirrors, connections: connections)
            XCTAssertEqual(choice.mirrors, chosen, name)
            XCTAssertEqual(choice.connectionsPerMirror, perMirror, name)
            XCTAssertEqual(choice.connections, count, name)
            XCTAssertLessThanOrEqual(choice.connections, connections, name)
            XCTAssertGreaterThan(choice.predictedBytesPerSecond, 0, name)
        }
    }

    func testTheReasonSaysHowEachMirrorsRateBehaves() {
        let fastSlow = MirrorChoice(
            [mirror("http://fast:81/f", one: 8, many: 64), mirror("http://slow:82/f", one: 2, many: 16)],
            connections: 8)
        XCTAssertEqual(
            fastSlow.reason,
            "fast:81: 8 connections, each adds its rate (per connection); slow:82: left out, a connection adds more elsewhere"
        )
        XCTAssertEqual(fastSlow.predictedBytesPerSecond, 64 * mib)
        let mixed = MirrorChoice(
            [
                mirror("https://user:secret@a.example/f", one: 4, many: 32),
                mirror("https://b.example/f", one: 20, many: 20)
            ], connections: 8)
        XCTAssertEqual(
            mixed.reason,
            "b.example: 1 connection fills its shared uplink; a.example: 7 connections, each adds its rate (per connection)"
        )
        let tiny = MirrorChoice(
            [mirror("http://big/f", one: 10, many: 10), mirror("http://tiny/f", one: 0.3, many: 0.3)],
            connections: 8)
        XCTAssertEqual(tiny.reason, "big: 1 connection fills its shared uplink; tiny: left out, adds under 5%")
        let samePlace = MirrorChoice(
            [mirror("http://h/a", one: 10, many: 10), mirror("http://h/b", one: 10, many: 10)],
            connections: 2)
        XCTAssertEqual(
            samePlace.reason,
            "http://h/a: 1 connection fills its shared uplink; http://h/b: 1 connection fills its shared uplink")
    }

    func testNothingIsRecommendedWhenNoMirrorIsUsable() {
        let down = MirrorChoice([failed("http://a/f"), failed("http://b/f")], connections: 8)
        XCTAssertEqual(down.mirrors, [])
        XCTAssertEqual(down.connections, 0)
        XCTAssertEqual(down.reason, "none of the mirrors is usable")
        let split = MirrorChoice(
            [
                mirror("http://a/f", one: 5, many: 40, sameBytes: false),
                mirror("http://b/f", one: 5, many: 40, sameBytes: false)
            ], connections: 8)
        XCTAssertEqual(split.mirrors, [])
        XCTAssertEqual(split.reason, "the mirrors serve different bytes and no majority agrees")
        XCTAssertEqual(MirrorChoice([], connections: 8).mirrors, [])
    }

    /// Issue 37: two equal mirrors measured 2% apart were split 1 and 7 (the
    /// faster took every connection its gain led); gains within 10% now share.
    func testEqualMirrorsMeasuredWithNoiseShareTheConnectionsEvenly() {
        let choice = MirrorChoice(
            [
                mirror("http://a/f", one: 2, many: 16), mirror("http://b/f", one: 2.04, many: 16.3),
                mirror("http://c/f", one: 0.5, many: 4)
            ], connections: 8)
        XCTAssertEqual(choice.mirrors, ["http://a/f", "http://b/f"])
        XCTAssertEqual(choice.connectionsPerMirror, [4, 4])
        let odd = MirrorChoice(
            [
                mirror("http://a/f", one: 2, many: 14, connections: 7),
                mirror("http://b/f", one: 2.04, many: 14.3, connections: 7)
            ], connections: 7)
        XCTAssertEqual(odd.connectionsPerMirror.sorted(), [3, 4])
        // Far apart, the faster takes them all, as before.
        let apart = MirrorChoice(
            [mirror("http://a/f", one: 2, many: 16), mirror("http://b/f", one: 8, many: 64)],
            connections: 8)
        XCTAssertEqual(apart.mirrors, ["http://b/f"])
    }
}
