import XCTest

// Issue 16: the library's messages name its own options, not the command's.
// Where an option of `DownloadOptions` gets past a failure, the error's
// `remedy` names it, the library's description says it in its terms, and
// the command words it as its `--restart` or `--force`, as it did before the
// hint moved out of the library. In-process, one row per remedy.
@testable import RangeGet
@testable import rangeget

final class FailureTextTests: XCTestCase {
    func testRemediesAreTheLibrarysOptionsInItsTextAndTheCommandsOptionsInTheCommands() {
        let cases: [(error: DownloadError, remedy: DownloadError.Remedy?, library: String, command: String)] = [
            (
                .usage("out already exists and is not the server's file now (another ETag)", remedy: .overwrite),
                .overwrite,
                "out already exists and is not the server's file now (another ETag); set DownloadOptions.overwrite to replace it",
                "out already exists and is not the server's file now (another ETag); use --force to replace it"
            ),
            (
                .verification(
                    "sha256 of the download is 00, expected 11; the data stays in out.part", remedy: .restart),
                .restart,
                "sha256 of the download is 00, expected 11; the data stays in out.part; set DownloadOptions.restart to start over",
                "sha256 of the download is 00, expected 11; the data stays in out.part; run again with --restart to start over"
            ),
            (
                .manifest(ManifestError(path: "out.part.json", problem: "is empty")), .restart,
                "manifest out.part.json is empty; set DownloadOptions.restart to start over",
                "manifest out.part.json is empty; run again with --restart to start over"
            ),
            // No remedy: the same line for both.
            (.usage("out is a directory"), nil, "out is a directory", "out is a directory"),
            (
                .network(url: "https://127.0.0.1:1/f", message: "Connection refused", failure: .connectFailed), nil,
                "https://127.0.0.1:1/f: Connection refused", "https://127.0.0.1:1/f: Connection refused"
            )
        ]
        for (error, remedy, library, command) in cases {
            XCTAssertEqual(error.remedy, remedy, library)
            XCTAssertEqual(error.description, library)
            XCTAssertEqual(error.commandLineText, command)
            XCTAssertFalse(error.description.contains("--"), "the library names no option of the command: \(error)")
        }
    }

    /// The problem alone is the description without the remedy, cleaned the same way.
    func testTheProblemIsTheDescriptionWithoutTheRemedy() {
        let error = DownloadError.usage("http://user:secret@127.0.0.1/f\u{1B}[2J exists", remedy: .overwrite)
        XCTAssertEqual(error.problem, "http://127.0.0.1/f\\u{1B}[2J exists")
        XCTAssertEqual(error.description, error.problem + "; " + DownloadError.Remedy.overwrite.description)
    }
}
