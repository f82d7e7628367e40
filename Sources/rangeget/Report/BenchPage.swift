// BenchPage: what `rangeget bench --report PAGE.html` writes, drawn with the
// report's chart code: per mirror, its throughput against connections (the
// runs measured at 1 and at -n connections, and the curve the
// recommendation predicts from them) with the recommendation drawn on the
// curves, its time to first byte, whether the mirrors serve the same bytes,
// and the recommended command line. BenchSamples writes the raw samples as
// CSV for `--csv`. Every text from a server (its URL, its Server header,
// an error) is escaped.
import RangeGet

/// What a benchmark measured and recommended, and how it was run.
struct BenchOutcome {
    var results: [MirrorMeasurement]
    var choice: MirrorChoice
    /// The `-n` of the many-connection measurement.
    var connections: Int
    var seconds: Double
    var runs: Int
    var samples: Int
}

enum BenchPage {
    private static let mebibyte = 1_048_576.0

    static func html(_ bench: BenchOutcome) -> String {
        var header = "<h1>rangeget bench</h1>\n<p class=\"source\">"
        header += "\(PageShell.count(bench.results.count, "mirror")), measured one after another: "
        header += "throughput on 1 and on \(bench.connections) connections for "
        header += "\(Figure.fixed(bench.seconds, 2)) s, \(PageShell.count(bench.runs, "run")) each; "
        header += "\(PageShell.count(bench.samples, "range")) compared across mirrors.</p>\n"
        var body = "<section class=\"bench\">\n" + recommendation(bench) + verdict(bench)
        body += "<h3>Mirrors</h3>\n" + table(bench)
        body += "<h3>Throughput against connections</h3>\n" + curves(bench)
        body += "<h3>Time to first byte</h3>\n" + firstBytes(bench)
        body += "</section>\n"
        return PageShell.document(title: "rangeget bench", header: header, body: body)
    }

    private static func recommendation(_ bench: BenchOutcome) -> String {
        let choice = bench.choice
        guard !choice.mirrors.isEmpty else {
            return "<p class=\"warning recommendation\">No recommendation: \(HTMLText.escaped(choice.reason))</p>\n"
        }
        var html = "<p class=\"recommendation\">Recommendation: <code>"
        html += HTMLText.escaped("rangeget -n \(choice.connections) " + choice.mirrors.joined(separator: " "))
        html += "</code>, \(Figure.rate(choice.predictedBytesPerSecond)) predicted.<br/>"
        return html + HTMLText.escaped(choice.reason) + "</p>\n"
    }

    /// Whether the mirrors serve the same bytes, in one sentence.
    private static func verdict(_ bench: BenchOutcome) -> String {
        let differing = bench.results.filter { $0.sameBytes == false }
        let agreeing = bench.results.filter { $0.sameBytes == true }
        if !differing.isEmpty {
            let names = differing.map { HTMLText.escaped($0.url) }.joined(separator: ", ")
            return "<p class=\"warning verdict-different\" data-consistent=\"false\">Serve different bytes from "
                + "the mirrors that agree, never recommended: \(names).</p>\n"
        }
        if agreeing.count >= 2 {
            return "<p class=\"verdict\" data-consistent=\"true\">The \(agreeing.count) mirrors measured serve "
                + "the same bytes: \(PageShell.count(bench.samples, "range")) spread over the file have the same "
                + "SHA-256 on each.</p>\n"
        }
        return "<p class=\"note\" data-consistent=\"unknown\">Not compared: fewer than two mirrors answered.</p>\n"
    }

    private static func table(_ bench: BenchOutcome) -> String {
        var html = "<table class=\"mirrors\"><thead><tr><th>Mirror</th><th>URL</th><th class=\"number\">Probe</th>"
        html += "<th class=\"number\">First byte</th><th>HTTP</th><th>Server</th><th class=\"number\">1 conn.</th>"
        html += "<th class=\"number\">\(bench.connections) conn.</th><th>Limit</th><th class=\"number\">TCP</th>"
        html += "<th>Same bytes</th></tr></thead><tbody>\n"
        func millis(_ value: Double?) -> String { value.map { Figure.fixed($0 * 1000, 0) + " ms" } ?? "-" }
        func rate(_ value: Double?) -> String { value.map(Figure.rate) ?? "-" }
        for (index, mirror) in bench.results.enumerated() {
            html += "<tr data-mirror=\"\(index)\"><td><span class=\"swatch\" style=\"background:"
            html += "\(MirrorColor.of(index))\"></span>mirror \(index)</td>"
            html += "<td class=\"url\">\(HTMLText.escaped(mirror.url))</td>"
            if let error = mirror.error {
                html += "<td colspan=\"9\" class=\"error\">error: \(HTMLText.escaped(error))</td></tr>\n"
                continue
            }
            html += "<td class=\"number\">\(millis(mirror.probeSeconds))</td>"
            html += "<td class=\"number\">\(millis(mirror.timeToFirstByte))</td>"
            html += "<td>\(HTMLText.escaped(mirror.httpVersion ?? "-"))</td>"
            html += "<td>\(HTMLText.escaped(mirror.server ?? "-"))</td>"
            html += "<td class=\"number\">\(rate(mirror.oneConnection))</td>"
            html += "<td class=\"number\">\(rate(mirror.manyConnections))</td>"
            html += "<td>\(mirror.limit?.rawValue ?? "-")</td>"
            html += "<td class=\"number\">\(mirror.tcpConnections.map(String.init) ?? "-")</td>"
            html += "<td>\(mirror.sameBytes.map { $0 ? "yes" : "NO" } ?? "-")</td></tr>\n"
        }
        return html + "</tbody></table>\n"
    }

    // MARK: - Throughput against connections

    /// Per mirror: its predicted curve from 0 to -n connections, each run
    /// as a small dot and the medians as large ones at 1 and -n, and, for
    /// the recommended mirrors, a ring at the connections the
    /// recommendation gives it; the recommended total as a dashed line.
    private static func curves(_ bench: BenchOutcome) -> String {
        let count = bench.connections
        let predicted = bench.results.map { MirrorChoice.predictedTotals($0, connections: count) }
        let measured = bench.results.flatMap { $0.oneConnectionRuns + $0.manyConnectionsRuns }
        let highest = (predicted.flatMap { $0 } + measured + [bench.choice.predictedBytesPerSecond]).max() ?? 0
        guard highest > 0 else { return "<p class=\"empty\">No mirror was measured.</p>\n" }
        let (frame, values, step) = ChartFrame(x: 0, to: Double(count), top: 12, bottom: 292)
            .withValueTicks(highest: highest / mebibyte * 1.05)
        let tickStep = max(1, Int(AxisTicks.between(0, Double(count), count: 8).step.rounded(.up)))
        let ticks = stride(from: 0, through: count, by: tickStep).map { (Double($0), String($0)) }
        var svg = ChartFrame.open("curves", height: 340, label: "throughput against connections, per mirror")
        svg += frame.valueAxis(values, step: step, title: "MiB/s")
        svg += frame.verticalGrid(ticks.map(\.0))
        svg += frame.bottomAxis(ticks, title: "connections")
        if bench.choice.predictedBytesPerSecond > 0 {
            let total = bench.choice.predictedBytesPerSecond / mebibyte
            svg += frame.line(
                [(0, total), (Double(count), total)], attributes: "class=\"recommended-total\"", color: "#1d2230",
                width: 1.2, dashed: true,
                title: "recommended: -n \(bench.choice.connections), "
                    + "\(Figure.rate(bench.choice.predictedBytesPerSecond)) predicted in all")
            svg += "<text x=\"\(Figure.coordinate(frame.right - 4))\" y=\"\(Figure.coordinate(frame.y(total) - 6))\" "
            svg += "text-anchor=\"end\">recommended -n \(bench.choice.connections): "
            svg += "\(Figure.rate(bench.choice.predictedBytesPerSecond))</text>\n"
        }
        // The recommended mirrors last, over the others (a mirror of other bytes may lie on one's curve).
        let drawn = bench.results.indices.filter { bench.results[$0].error == nil }
        let order =
            drawn.filter { !bench.choice.mirrors.contains(bench.results[$0].url) }
            + drawn.filter { bench.choice.mirrors.contains(bench.results[$0].url) }
        for index in order {
            svg += curve(index, bench.results[index], predicted: predicted[index], frame: frame, bench: bench)
        }
        svg += "</svg>\n"
        let legend = bench.results.indices.map { (MirrorColor.of($0), "mirror \($0)") }
        return svg + PageShell.legend(legend)
    }

    private static func curve(
        _ index: Int, _ mirror: MirrorMeasurement, predicted: [Double], frame: ChartFrame, bench: BenchOutcome
    ) -> String {
        let color = MirrorColor.of(index)
        let url = HTMLText.escaped(mirror.url)
        var svg = "<g class=\"curve\" data-curve=\"\(index)\">"
        if predicted.contains(where: { $0 > 0 }) {
            svg += frame.line(
                predicted.enumerated().map { (Double($0.offset), $0.element / mebibyte) },
                attributes: "class=\"predicted\"", color: color, width: 2, dashed: mirror.sameBytes == false,
                title: "mirror \(index), \(url): the total predicted at each count"
                    + (mirror.sameBytes == false ? " (serves different bytes: never recommended)" : ""))
        }
        func dot(_ kind: String, connections: Int, rate: Double, radius: Double, title: String) -> String {
            "<circle class=\"\(kind)\" data-connections=\"\(connections)\" data-rate=\"\(Figure.fixed(rate, 0))\" "
                + "cx=\"\(Figure.coordinate(frame.x(Double(connections))))\" "
                + "cy=\"\(Figure.coordinate(frame.y(rate / mebibyte)))\" r=\"\(radius)\" fill=\"\(color)\" "
                + "fill-opacity=\"\(kind == "sample" ? 0.45 : 1)\" stroke=\"#fff\" stroke-width=\"1\">"
                + "<title>\(title)</title></circle>"
        }
        for (connections, runs, median) in [
            (1, mirror.oneConnectionRuns, mirror.oneConnection),
            (bench.connections, mirror.manyConnectionsRuns, mirror.manyConnections)
        ] {
            for (run, rate) in runs.enumerated() {
                svg += dot(
                    "sample", connections: connections, rate: rate, radius: 3,
                    title: "mirror \(index), run \(run + 1) on \(connections): \(Figure.rate(rate))")
            }
            if let median {
                svg += dot(
                    "median", connections: connections, rate: median, radius: 5,
                    title: "mirror \(index), \(url): \(Figure.rate(median)) on "
                        + "\(PageShell.count(connections, "connection"))"
                        + (runs.count > 1 ? " (median of \(runs.count) runs)" : ""))
            }
        }
        if let place = bench.choice.mirrors.firstIndex(of: mirror.url) {
            let given = bench.choice.connectionsPerMirror[place]
            let rate = predicted.indices.contains(given) ? predicted[given] : 0
            let (x, y) = (Figure.coordinate(frame.x(Double(given))), frame.y(rate / mebibyte))
            svg += "<circle class=\"recommended\" data-connections=\"\(given)\" cx=\"\(x)\" "
            svg += "cy=\"\(Figure.coordinate(y))\" r=\"9\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"2.5\">"
            svg += "<title>recommended: \(PageShell.count(given, "connection")) to mirror \(index), "
            svg += "\(Figure.rate(rate)) predicted</title></circle>"
            svg += "<text x=\"\(x)\" y=\"\(Figure.coordinate(y - 14))\" text-anchor=\"middle\">"
            svg += "mirror \(index): \(given)</text>"
        }
        return svg + "</g>\n"
    }

    // MARK: - Time to first byte

    private static func firstBytes(_ bench: BenchOutcome) -> String {
        let measured = bench.results.enumerated().compactMap { index, mirror in
            mirror.timeToFirstByte.map { (index, $0 * 1000) }
        }
        guard let slowest = measured.map(\.1).max() else {
            return "<p class=\"empty\">No mirror answered a first byte.</p>\n"
        }
        let (rowHeight, top) = (24.0, 6.0)
        let bottom = top + Double(bench.results.count) * rowHeight + 4
        // Room right of the slowest bar for its label.
        let (values, _) = AxisTicks.between(0, max(slowest * 1.15, 1), count: 6)
        let frame = ChartFrame(x: 0, to: max(values.last ?? 1, slowest * 1.15, 1), top: top, bottom: bottom)
        var svg = ChartFrame.open("first-byte", height: bottom + 40, label: "time to first byte, per mirror")
        let ticks = frame.xTicks(count: 6)
        svg += frame.verticalGrid(ticks.map(\.value))
        svg += frame.bottomAxis(ticks, title: "milliseconds from the request to its first byte")
        for (index, mirror) in bench.results.enumerated() {
            let y = top + Double(index) * rowHeight
            svg += "<text x=\"8\" y=\"\(Figure.coordinate(y + 16))\">mirror \(index)"
            svg += "<title>\(HTMLText.escaped(mirror.url))</title></text>\n"
            guard let millis = mirror.timeToFirstByte.map({ $0 * 1000 }) else { continue }
            svg += "<rect class=\"ttfb\" data-mirror=\"\(index)\" x=\"\(frame.left)\" "
            svg +=
                "y=\"\(Figure.coordinate(y + 4))\" width=\"\(Figure.coordinate(max(1, frame.x(millis) - frame.left)))\" "
            svg += "height=\"16\" fill=\"\(MirrorColor.of(index))\"><title>mirror \(index), "
            svg += "\(HTMLText.escaped(mirror.url)): first byte in \(Figure.fixed(millis, 1)) ms</title></rect>"
            svg += "<text x=\"\(Figure.coordinate(frame.x(millis) + 6))\" y=\"\(Figure.coordinate(y + 16))\">"
            svg += "\(Figure.fixed(millis, 1)) ms</text>\n"
        }
        return svg + "</svg>\n"
    }
}

/// The raw samples of a benchmark as CSV (`bench --csv`): one row per
/// measurement: each run's throughput at 1 and at -n connections, the probe
/// and the time to first byte, and a mirror's error.
enum BenchSamples {
    static let header = "mirror,url,measurement,connections,run,value,unit,note"

    static func csv(_ results: [MirrorMeasurement], connections: Int) -> String {
        var rows = [header]
        for (index, mirror) in results.enumerated() {
            func row(
                _ measurement: String, _ count: Int?, _ run: Int?, _ value: Double?, _ unit: String, _ note: String = ""
            )
                -> String
            {
                [
                    String(index), field(mirror.url), measurement, count.map(String.init) ?? "",
                    run.map(String.init) ?? "", value.map { "\($0)" } ?? "", unit, field(note)
                ].joined(separator: ",")
            }
            if let error = mirror.error {
                rows.append(row("error", nil, nil, nil, "", error))
                continue
            }
            if let probe = mirror.probeSeconds { rows.append(row("probe", nil, nil, probe, "s")) }
            if let first = mirror.timeToFirstByte { rows.append(row("first byte", nil, nil, first, "s")) }
            for (count, runs) in [(1, mirror.oneConnectionRuns), (connections, mirror.manyConnectionsRuns)] {
                for (run, rate) in runs.enumerated() {
                    rows.append(row("throughput", count, run + 1, rate, "B/s"))
                }
            }
        }
        return rows.joined(separator: "\n") + "\n"
    }

    /// `text` as one CSV field: quoted when it holds a comma, quote or line
    /// break, and never read as a formula by a spreadsheet (a leading
    /// `= + - @` or tab gets a `'` before it).
    static func field(_ text: String) -> String {
        var text = text
        if let first = text.first, "=+-@\t\r".contains(first) { text = "'" + text }
        guard text.contains(where: { ",\"\n\r".contains($0) }) else { return text }
        return "\"" + text.replacing("\"", with: "\"\"") + "\""
    }
}
