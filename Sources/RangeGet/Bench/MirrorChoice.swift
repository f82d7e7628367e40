// MirrorChoice: what `rangeget bench` recommends from its measurements. Each
// usable mirror's totals on 1 and on N connections make a ThroughputCurve,
// the model the engine's placement learns, which predicts its total at any
// count. Connections are given one at a time, up to N, to the mirror where
// the next adds most. The recommended -n is the smallest count whose total
// is within 5% of the best; the recommended mirrors are those that count
// gives a connection. So a fast mirror capped per connection takes them all
// and a slower one is left out, while an uplink that one connection fills
// gets one. Pure: MirrorBenchmark measures.

/// The mirrors and connection count that were fastest in a benchmark.
package struct MirrorChoice: Sendable, Codable, Equatable {
    /// The mirrors to use, the one whose first connection adds most first.
    package var mirrors: [String]
    /// Connections each of `mirrors` gets, in the same order.
    package var connectionsPerMirror: [Int]
    /// The `-n` to use: all of `connectionsPerMirror`.
    package var connections: Int
    /// The total the curves predict with these, in bytes per second.
    package var predictedBytesPerSecond: Double
    /// Why, in one short line.
    package var reason: String

    /// A count whose total is this fraction below the best is close enough:
    /// the rest of the connections would add little.
    static let tolerance = 0.05

    /// Gains of the next connection this fraction apart count as equal.
    static let evenness = 0.1

    /// The best use of at most `connections` connections (the count the
    /// many-connection measurement used) over `measurements`; a mirror that
    /// failed or serves other bytes never gets one.
    package init(_ measurements: [MirrorMeasurement], connections: Int) {
        precondition(connections > 0, "a benchmark measures at least one connection")
        let curves = measurements.map { Self.curve($0, connections: connections) }
        let usable = measurements.indices.filter { index in
            measurements[index].error == nil && measurements[index].sameBytes != false
                && (curves[index].perConnection ?? 0) > 0
        }
        guard !usable.isEmpty else {
            let disagree = measurements.contains { $0.sameBytes == false }
            self.init(
                mirrors: [], connectionsPerMirror: [], connections: 0, predictedBytesPerSecond: 0,
                reason: disagree
                    ? "the mirrors serve different bytes and no majority agrees"
                    : "none of the mirrors is usable")
            return
        }
        // Greedy on marginal gain; totals[k] is the predicted total of the first k
        // connections. Not the engine's optimistic reading, which is for trying
        // moves: here a partly shared mirror ramps up to its ceiling.
        var counts = measurements.map { _ in 0 }
        var order: [Int] = []
        var totals = [0.0]
        func gain(_ index: Int) -> Double {
            curves[index].total(at: counts[index] + 1, optimistic: false)
                - curves[index].total(at: counts[index], optimistic: false)
        }
        // Gains within `evenness` of the best are one gain, measured with
        // noise: of those mirrors the one with the fewest connections takes
        // the next, so equal mirrors share evenly (two of them were split 1
        // and 7 by a rate 2% apart).
        func next() -> Int? {
            guard let best = usable.map(gain).max(), best > 0 else { return nil }
            return usable.filter { gain($0) >= (1 - Self.evenness) * best }.min { counts[$0] < counts[$1] }
        }
        while totals.count <= connections, let next = next() {
            totals.append(totals[totals.count - 1] + gain(next))
            counts[next] += 1
            order.append(next)
        }
        let best = totals.max() ?? 0
        let count = totals.firstIndex { $0 >= (1 - Self.tolerance) * best } ?? order.count
        var chosen: [Int] = []
        for index in order.prefix(count) where !chosen.contains(index) { chosen.append(index) }
        let share = chosen.map { index in order.prefix(count).filter { $0 == index }.count }
        let names = Self.labels(measurements.map(\.url))
        var reasons = zip(chosen, share).map { index, given in
            Self.reason(names[index], limit: measurements[index].limit, connections: given)
        }
        reasons += usable.filter { !chosen.contains($0) }.map { index in
            "\(names[index]): left out, "
                + (counts[index] > 0 ? "adds under \(Int(Self.tolerance * 100))%" : "a connection adds more elsewhere")
        }
        self.init(
            mirrors: chosen.map { measurements[$0].url }, connectionsPerMirror: share, connections: count,
            predictedBytesPerSecond: totals[count], reason: reasons.joined(separator: "; "))
    }

    private init(
        mirrors: [String], connectionsPerMirror: [Int], connections: Int, predictedBytesPerSecond: Double,
        reason: String
    ) {
        self.mirrors = mirrors
        self.connectionsPerMirror = connectionsPerMirror
        self.connections = connections
        self.predictedBytesPerSecond = predictedBytesPerSecond
        self.reason = reason
    }

    /// What the recommendation predicts of one mirror alone: its total in
    /// bytes per second at 0, 1, ... `connections` connections (the curve
    /// its two measurements make; all 0 for a mirror it cannot use). The
    /// bench report draws it.
    package static func predictedTotals(_ measurement: MirrorMeasurement, connections: Int) -> [Double] {
        let curve = curve(measurement, connections: connections)
        return (0...max(1, connections)).map { curve.total(at: $0, optimistic: false) }
    }

    /// The two measured points of one mirror: 1 connection and `connections`.
    private static func curve(_ measurement: MirrorMeasurement, connections: Int) -> ThroughputCurve {
        var curve = ThroughputCurve()
        if let one = measurement.oneConnection, one > 0 { curve.record(one, at: 1) }
        if let many = measurement.manyConnections, many > 0 { curve.record(many, at: connections) }
        return curve
    }

    private static func reason(_ name: String, limit: MirrorMeasurement.RateLimit?, connections: Int) -> String {
        let given = connections == 1 ? "1 connection" : "\(connections) connections"
        switch limit {
        case .perConnection: return "\(name): \(given), each adds its rate (per connection)"
        case .shared: return "\(name): \(given) \(connections == 1 ? "fills" : "fill") its shared uplink"
        case .partlyShared: return "\(name): \(given) reach its ceiling (partly shared)"
        case nil: return "\(name): \(given)"
        }
    }

    /// Each URL's host and port (never its user and password), or the whole
    /// URL where two mirrors share those.
    private static func labels(_ urls: [String]) -> [String] {
        let hosts = urls.map { url in
            let rest = url.firstRange(of: "://").map { url[$0.upperBound...] } ?? url[...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            return String(authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority)
        }
        return zip(urls, hosts).map { url, host in hosts.filter { $0 == host }.count == 1 ? host : url }
    }
}
