// Issue 42: the pages `rangeget report` and `rangeget bench --report` write,
// as a browser shows them. Headless Chromium renders each
// (scripts/check-report-render): the screenshot is not blank, the browser
// logs no console message, and the DOM it built has one lane element per
// traced TCP connection (the trace's page) or one curve per mirror (the
// bench's). Chromium is one of the packages the tests need
// (scripts/install-deps installs it): without it these tests fail with that
// fix, they are never skipped.
import Foundation
import RangeServer
import XCTest

final class ReportRenderTests: EndToEndTestCase {
    func testTheReportRendersInHeadlessChromium() throws {
        let trace = SyntheticTrace.standard
        try trace.data.write(to: URL(fileURLWithPath: path("trace.json")))
        let report = try CLI.run(["report", path("trace.json"), "-o", path("page.html")], in: directory)
        XCTAssertEqual(report.status, 0, report.stderr)
        try assertRenders(path("page.html"), count: trace.transferLanes.count, of: "data-lane")
    }

    /// A trace `--trace` wrote (three mirrors, each capping its connections)
    /// drawn and rendered: one lane per TCP connection it traced, and a file
    /// map that covers the file once.
    func testARealTraceRendersOneLanePerTCPConnection() throws {
        let resource = Resource.generated(size: 12 << 20, seed: 4205)
        let mirrors = try cappedMirrors(serving: resource)
        let download = try CLI.run(
            ["-q", "-n", "8", "--trace", path("trace.json"), "-o", path("f")] + mirrors.map { $0.url("f") },
            in: directory, timeout: 60)
        XCTAssertEqual(download.status, 0, download.stderr)
        let data = try Data(contentsOf: URL(fileURLWithPath: path("trace.json")))
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let events = try XCTUnwrap(object["traceEvents"] as? [[String: Any]])
        let lanes = Set(
            events.filter { $0["ph"] as? String == "X" && $0["cat"] as? String == "transfer" }
                .compactMap { $0["tid"] as? Int })
        XCTAssertGreaterThanOrEqual(lanes.count, 3)

        let report = try CLI.run(["report", path("trace.json"), "-o", path("page.html")], in: directory)
        XCTAssertEqual(report.status, 0, report.stderr)
        let page = try String(contentsOfFile: path("page.html"), encoding: .utf8)
        let mapped = page.components(separatedBy: "data-bytes=\"").dropFirst()
            .compactMap { Int64($0.prefix { $0.isNumber }) }.reduce(0, +)
        XCTAssertEqual(mapped, resource.size, "the file map covers the file once")
        try assertRenders(path("page.html"), count: lanes.count, of: "data-lane")
    }

    func testTheBenchReportRendersInHeadlessChromium() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 142)
        let other = try anotherServer()
        for mirror in [server!, other] {
            mirror.setResource(resource, at: "f")
            mirror.setRatePerConnection(2 << 20)
        }
        let bench = try CLI.run(
            [
                "bench", "--seconds", "0.2", "-n", "2", "--samples", "1", "--report", path("bench.html"),
                server.url("f"), other.url("f")
            ], in: directory, timeout: 60)
        XCTAssertEqual(bench.status, 0, bench.stderr)
        try assertRenders(path("bench.html"), count: 2, of: "data-curve")
    }

    /// Runs scripts/check-report-render on `page`: `count` elements with `attribute` in its DOM.
    private func assertRenders(
        _ page: String, count: Int, of attribute: String, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let script = CLI.repositoryRoot.appendingPathComponent("scripts/check-report-render").path
        let check = try CLI.run([page, String(count), attribute], in: directory, timeout: 150, executable: script)
        if check.status == 3 {
            XCTFail(
                "chromium is missing: run `make test` (scripts/install-deps installs it) or "
                    + "`scripts/install-deps chromium`: \(check.stderr)", file: file, line: line)
            return
        }
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr, file: file, line: line)
        XCTAssertTrue(
            check.stdout.contains("the DOM has \(count) elements with \(attribute)"), check.stdout, file: file,
            line: line)
        XCTAssertTrue(
            check.stdout.contains("not white"), "the screenshot was checked: \(check.stdout)", file: file, line: line)
    }
}
