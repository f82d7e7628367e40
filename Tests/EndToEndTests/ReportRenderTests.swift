// Issue 42: a `rangeget report` page as a browser shows it. Headless
// Chromium renders the synthetic trace's page (scripts/check-report-render):
// the screenshot is not blank, the browser logs no console message, and the
// DOM it built has one lane element per traced TCP connection. Chromium is
// one of the packages the tests need (scripts/install-deps installs it):
// without it this test fails with that fix, it is never skipped.
import Foundation
import XCTest

final class ReportRenderTests: EndToEndTestCase {
    func testTheReportRendersInHeadlessChromium() throws {
        let trace = SyntheticTrace.standard
        try trace.data.write(to: URL(fileURLWithPath: path("trace.json")))
        let report = try CLI.run(["report", path("trace.json"), "-o", path("page.html")], in: directory)
        XCTAssertEqual(report.status, 0, report.stderr)

        let script = CLI.repositoryRoot.appendingPathComponent("scripts/check-report-render").path
        let check = try CLI.run(
            [path("page.html"), String(trace.transferLanes.count)], in: directory, timeout: 150, executable: script)
        if check.status == 3 {
            XCTFail(
                "chromium is missing: run `make test` (scripts/install-deps installs it) or "
                    + "`scripts/install-deps chromium`: \(check.stderr)")
            return
        }
        XCTAssertEqual(check.status, 0, check.stdout + check.stderr)
        XCTAssertTrue(check.stdout.contains("the DOM has \(trace.transferLanes.count) lanes"), check.stdout)
    }
}
