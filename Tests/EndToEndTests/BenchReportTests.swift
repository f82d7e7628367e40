// `rangeget bench --report PAGE.html --csv SAMPLES.csv` (issue 42): the page
// draws, per mirror, the throughput it measured against connections (each
// run, the medians, the curve the recommendation predicts), the
// recommendation on those curves, the time to first byte and whether the
// mirrors serve the same bytes; the CSV holds every raw sample. Both are
// checked against the same run's --json, and the page read as XML.
import Foundation
import RangeGet
import RangeServer
import XCTest

@testable import rangeget

final class BenchReportTests: EndToEndTestCase {
    func testThePageAndTheSamplesSayWhatTheJSONSays() throws {
        let good = Resource.generated(size: 4 << 20, seed: 242)
        let other = try anotherServer()
        server.setResource(good, at: "f")
        server.setResource(Resource.generated(size: 4 << 20, seed: 243), at: "wrong")
        server.setRatePerConnection(2 << 20)
        other.setResource(good, at: "f")
        other.setRatePerConnection(1 << 20)
        let urls = [server.url("f"), other.url("f"), server.url("wrong")]
        let run = try CLI.run(
            [
                "bench", "--json", "--seconds", "0.25", "-n", "2", "--runs", "2", "--samples", "1",
                "--report", path("bench.html"), "--csv", path("samples.csv")
            ] + urls, in: directory, timeout: 90)
        XCTAssertEqual(run.status, 0, run.stderr)
        let json = try run.jsonObject()
        let mirrors = try XCTUnwrap(json["mirrors"] as? [[String: Any]])
        let recommendation = try XCTUnwrap(json["recommendation"] as? [String: Any])
        let chosen = try XCTUnwrap(recommendation["mirrors"] as? [String])
        let shares = try XCTUnwrap(recommendation["connectionsPerMirror"] as? [Int])
        XCTAssertFalse(chosen.isEmpty, "\(recommendation)")

        let html = try String(contentsOfFile: path("bench.html"), encoding: .utf8)
        let page = try PageOutline(html)
        XCTAssertEqual(page.count(ofClass: "curve"), 3, "one curve per mirror")
        XCTAssertEqual(page.count(ofClass: "predicted"), 3, "each with the curve the recommendation predicts")
        XCTAssertEqual(page.count(ofClass: "sample"), 3 * 2 * 2, "each run at 1 and at 2 connections")
        XCTAssertEqual(page.count(ofClass: "median"), 3 * 2)
        XCTAssertEqual(page.count(ofClass: "ttfb"), 3, "a first-byte bar per mirror")
        XCTAssertEqual(page.count(ofClass: "recommended"), chosen.count, "a ring per recommended mirror")
        XCTAssertEqual(page.count(ofClass: "recommended-total"), 1)
        // Each recommended mirror's ring sits at the connections the recommendation gives it.
        for (url, share) in zip(chosen, shares) {
            let index = try XCTUnwrap(urls.firstIndex(of: url))
            let group = try XCTUnwrap(curveGroup(index, in: html), "mirror \(index)'s curve")
            XCTAssertTrue(group.contains("class=\"recommended\" data-connections=\"\(share)\""), group)
        }
        let wrong = try XCTUnwrap(curveGroup(2, in: html))
        XCTAssertFalse(wrong.contains("class=\"recommended\""), "the mirror of other bytes is never recommended")
        XCTAssertTrue(wrong.contains("stroke-dasharray"), "and its curve is dashed")
        // The medians drawn are --json's, at 1 and at -n connections.
        for (index, mirror) in mirrors.enumerated() {
            let group = try XCTUnwrap(curveGroup(index, in: html))
            for (key, connections) in [("oneConnection", 1), ("manyConnections", 2)] {
                let rate = try XCTUnwrap(mirror[key] as? Double)
                XCTAssertTrue(
                    group.contains(
                        "class=\"median\" data-connections=\"\(connections)\" "
                            + "data-rate=\"\(Int(rate.rounded()))\""), "mirror \(index) \(key) \(rate): \(group)")
            }
        }
        // The verdict names the mirror of other bytes, and only it.
        let verdict = try XCTUnwrap(html.firstMatch(of: /<p class="warning verdict-different"[^>]*>([^<]*)<\/p>/))
        XCTAssertTrue(verdict.1.contains(urls[2]), String(verdict.1))
        XCTAssertFalse(verdict.1.contains(urls[0]) || verdict.1.contains(urls[1]), String(verdict.1))
        XCTAssertTrue(html.contains("rangeget -n \(recommendation["connections"] as? Int ?? -1) "), "the command line")
        for url in urls { XCTAssertTrue(page.text.contains(url), "the table names \(url)") }
        for reference in ["<script", "src=", "href=", "url(", "@import", "<link", "<img"] {
            XCTAssertFalse(html.lowercased().contains(reference), "the page has \(reference)")
        }

        // The CSV: every run of every mirror, as --json has them.
        let csv = try String(contentsOfFile: path("samples.csv"), encoding: .utf8)
        let rows = csv.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        XCTAssertEqual(rows.first?.joined(separator: ","), BenchSamples.header)
        for (index, mirror) in mirrors.enumerated() {
            let mine = rows.dropFirst().filter { $0[0] == "\(index)" }
            XCTAssertTrue(mine.allSatisfy { $0[1] == urls[index] }, "\(mine)")
            for (key, connections) in [("oneConnectionRuns", "1"), ("manyConnectionsRuns", "2")] {
                let runs = try XCTUnwrap(mirror[key] as? [Double])
                let sampled = mine.filter { $0[2] == "throughput" && $0[3] == connections }
                XCTAssertEqual(sampled.map { Int($0[4]) }, [1, 2], "\(key): \(sampled)")
                XCTAssertEqual(sampled.map { $0[6] }, ["B/s", "B/s"])
                let values = sampled.compactMap { Double($0[5]) }
                XCTAssertEqual(values.count, runs.count)
                for (value, run) in zip(values, runs) { XCTAssertEqual(value, run, accuracy: run * 1e-9) }
            }
            let firstByte = try XCTUnwrap(mine.first { $0[2] == "first byte" })
            XCTAssertEqual(
                try XCTUnwrap(Double(firstByte[5])), try XCTUnwrap(mirror["timeToFirstByte"] as? Double),
                accuracy: 1e-9)
        }
        XCTAssertEqual(rows.count, 1 + 3 * (2 + 4), "a probe, a first byte and four runs per mirror")
    }

    /// A page or CSV that cannot be written: exit 4, saying which, before
    /// anything is measured (a mistyped directory costs no run).
    func testAReportThatCannotBeWrittenIsExit4() throws {
        server.setResource(Resource.generated(size: 1 << 20, seed: 244), at: "f")
        for option in ["--report", "--csv"] {
            let target = path("missing/page")
            let run = try CLI.run(
                ["bench", "--seconds", "0.1", "-n", "1", "--samples", "1", option, target, server.url("f")],
                in: directory, timeout: 30)
            XCTAssertEqual(run.status, 4, "\(option): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("cannot write \(target)"), run.stderr)
            XCTAssertEqual(run.stdout, "", "nothing measured")
            XCTAssertEqual(server.statistics.requests.count, 0, "no request sent")
        }
        let refused = try CLI.run(["bench", "--report"], in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
    }

    /// Text from a server (its URL, Server header, an error) is escaped on
    /// the page, and a CSV field is quoted and never a formula.
    func testServerTextIsEscapedAndCSVFieldsAreQuoted() throws {
        let hostile = "<b>&\"'"
        func measurement(_ fields: String) throws -> MirrorMeasurement {
            let text =
                #"{"oneConnectionRuns": [1000], "manyConnectionsRuns": [2000], "sampleDigests": [], "# + fields
                + "}"
            return try JSONDecoder().decode(MirrorMeasurement.self, from: Data(text.utf8))
        }
        let hostileJSON = #"<b>&\"'"#
        let results = [
            try measurement(
                #""url": "http://a.example/\#(hostileJSON)", "server": "\#(hostileJSON)", "oneConnection": 1000, "#
                    + #""manyConnections": 2000, "timeToFirstByte": 0.01, "sameBytes": true"#),
            try measurement(#""url": "http://b.example/f", "error": "=cmd|' \#(hostileJSON)""#)
        ]
        let outcome = BenchOutcome(
            results: results, choice: MirrorChoice(results, connections: 2), connections: 2, seconds: 0.1, runs: 1,
            samples: 1)
        let html = BenchPage.html(outcome)
        XCTAssertFalse(html.contains(hostile), "escaped everywhere")
        XCTAssertFalse(html.contains("<b>"))
        XCTAssertTrue(html.contains("http://a.example/&lt;b&gt;&amp;&quot;&#39;"), html)
        let page = try PageOutline(html)
        XCTAssertTrue(page.text.contains("http://a.example/" + hostile), "and reads back as it was")
        XCTAssertTrue(page.text.contains("error: =cmd|' " + hostile))
        XCTAssertEqual(page.count(ofClass: "curve"), 1, "no curve for the mirror that failed")

        let csv = BenchSamples.csv(results, connections: 2).split(separator: "\n")
        XCTAssertEqual(csv.last, #"1,http://b.example/f,error,,,,,"'=cmd|' <b>&""'""#)
        XCTAssertTrue(csv.contains(#"0,"http://a.example/<b>&""'",throughput,2,1,2000.0,B/s,"#), "\(csv)")
        XCTAssertEqual(BenchSamples.field("plain"), "plain")
        XCTAssertEqual(BenchSamples.field("a,b"), "\"a,b\"")
        XCTAssertEqual(BenchSamples.field("+1"), "'+1")
        XCTAssertEqual(BenchSamples.field("line\nbreak"), "\"line\nbreak\"")
    }

    /// The `<g class="curve" data-curve="INDEX">` element of the page, as text.
    private func curveGroup(_ index: Int, in html: String) -> String? {
        guard let start = html.firstRange(of: "<g class=\"curve\" data-curve=\"\(index)\">") else { return nil }
        guard let end = html[start.upperBound...].firstRange(of: "</g>") else { return nil }
        return String(html[start.lowerBound..<end.upperBound])
    }
}
