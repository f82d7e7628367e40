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
