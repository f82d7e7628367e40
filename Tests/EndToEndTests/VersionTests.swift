// `rangeget --version` says which build it is: the release, the commit
// (and whether the tree was modified), the libraries libcurl uses, and the
// libcrypto that computes checksums (curl's `-V` is the model; issue 19).
import XCTest

final class VersionTests: EndToEndTestCase {
    func testVersionNamesTheCommitLibcurlAndLibcrypto() throws {
        let run = try CLI.run(["--version"], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, run.stdout)
        XCTAssertTrue(lines.first?.hasPrefix("rangeget 0.") == true, run.stdout)
        // `make test` writes the build info first: a real commit, not "unknown".
        XCTAssertNotNil(lines.first?.firstMatch(of: /\(commit [0-9a-f]{12}(\+modified)?\)$/), run.stdout)
        XCTAssertTrue(lines.dropFirst().first?.hasPrefix("libcurl/") == true, run.stdout)
        XCTAssertTrue(lines.dropFirst().first?.contains("OpenSSL/") == true, run.stdout)
        XCTAssertNotNil(lines.last?.firstMatch(of: /^checksums: OpenSSL \d+\.\d+\.\d+/), run.stdout)
    }
}
