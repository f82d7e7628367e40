// Issue 18: the command line as a newcomer finds it. Each test runs the built
// binary and checks what it prints: tables, the summary, messages, --json.
import Foundation
import RangeGet
import RangeServer
import XCTest

@testable import rangeget

final class CommandLineMessagesTests: EndToEndTestCase {
    /// The cell under each header starts where the header does, on every row.
    private func assertColumnsAlign(
        _ table: String, headers: [String], file: StaticString = #filePath, line: UInt = #line
    ) {
        let lines = table.split(separator: "\n").map { Array($0) }
        guard let header = lines.first.map({ String($0) }) else { return XCTFail("no table", file: file, line: line) }
        for name in headers.dropFirst() {
            guard let range = header.range(of: " " + name) else {
                return XCTFail("no \(name) in \(header)", file: file, line: line)
            }
            let column = header.distance(from: header.startIndex, to: range.lowerBound) + 1
            for row in lines.dropFirst() {
                XCTAssertTrue(
                    row.count > column && row[column] != " " && row[column - 1] == " ",
                    "\(name) starts at \(column) in\n\(table)", file: file, line: line)
            }
        }
    }

    /// `padding(to:)` added a space to the widest cell of a column.
    func testStatusTableColumnsLineUp() throws {
        try Data("{broken".utf8).write(to: URL(fileURLWithPath: path("a-long-output-name.iso.part.json")))
        try Data("{broken".utf8).write(to: URL(fileURLWithPath: path("b.part.json")))
        let run = try CLI.run(["status"], in: directory)
        XCTAssertEqual(run.status, 4, run.stdout + run.stderr)
        assertColumnsAlign(run.stdout, headers: ["OUTPUT", "DONE", "SIZE", "LEFT", "UPDATED", "STATE"])
    }

    /// The summary said "1 retries", and not why.
    func testSummaryCountsRetriesByKind() throws {
        XCTAssertNil(RetryKinds().phrase(total: 0))
        var kinds = RetryKinds()
        let causes: [RetryCause] = [
            .stall, .cut, .status(503), .cut, .cut, .status(429), .transport(.connectFailed),
            .transport(.tls)
        ]
        for cause in causes { kinds.add(cause) }
        XCTAssertEqual(
            kinds.phrase(total: 9),
            "9 retries (3 cuts, 1 stall, 1 HTTP 429 answer, 1 HTTP 503 answer, "
                + "1 failed connection, 2 other failures)")
        var one = RetryKinds()
        one.add(.stall)
        XCTAssertEqual(one.phrase(total: 1), "1 retry (1 stall)")

        let resource = Resource.generated(size: 4 << 20, seed: 1802)
        server.setResource(resource, at: "f")
        server.setFaults([
            FaultRule(.cutAfter(100_000), when: .nthRequest(2)),
            FaultRule(.status(503, retryAfter: nil), when: .nthRequest(3))
        ])
        let run = try CLI.run(["-n", "1", "--retry-wait", "0.01", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        XCTAssertTrue(run.stderr.contains(", 2 retries (1 cut, 1 HTTP 503 answer), "), run.stderr)
    }

    /// `dropped (the server ignored the Range header (200 with the whole file))`.
    func testADroppedMirrorsReasonIsNotNestedInParentheses() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 1803)
        server.setResource(resource, at: "f")
        let other = try anotherServer()
        other.setResource(resource, at: "f")
        other.setFaults([FaultRule(.ignoreRange, when: .always)])
        let run = try CLI.run(["-n", "4", "-o", path("f"), server.url("f"), other.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        let summary = run.stderr
        XCTAssertTrue(
            summary.contains(
                "; mirrors: 127.0.0.1:\(server.port) 4.0 MiB, 127.0.0.1:\(other.port) dropped; "
                    + "127.0.0.1:\(other.port) was dropped: "), summary)
        var depth = 0
        for character in summary + run.stderr {
            if character == "(" {
                depth += 1
                XCTAssertLessThanOrEqual(depth, 1, summary + run.stderr)
            }
            if character == ")" { depth -= 1 }
        }
    }

    /// `unknown option --frobnicate (see 'rangeget  --help')`.
    func testAnUnknownOptionPointsToTheRightHelpWithOneSpace() throws {
        let get = try CLI.run(["--frobnicate"], in: directory)
        XCTAssertEqual(get.status, 2)
        XCTAssertEqual(get.stderr, "rangeget: unknown option --frobnicate (see 'rangeget --help')\n")
        let status = try CLI.run(["status", "-z"], in: directory)
        XCTAssertEqual(status.status, 2)
        XCTAssertEqual(status.stderr, "rangeget: unknown option -z (see 'rangeget status --help')\n")
    }

    /// In a list, "the server does not serve byte ranges" did not say which file.
    func testAListsMessagesNameTheirFile() throws {
        server.setResource(Resource.generated(size: 64 << 10, seed: 1804), at: "ranged")
        let plainServer = try anotherServer()
        plainServer.setResource(Resource.generated(size: 4 << 20, seed: 1805), at: "plain")
        plainServer.setFaults([FaultRule(.acceptRangesNone)])
        try "\(server.url("ranged"))\n\(plainServer.url("plain"))\n".write(
            toFile: path("list"), atomically: true, encoding: .utf8)
        let run = try CLI.run(["--use-head", "-i", path("list")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("rangeget: \(plainServer.url("plain")): the server does not serve byte ranges"),
            run.stderr)
        XCTAssertFalse(run.stderr.contains("\(server.url("ranged")): the server"), run.stderr)
    }

    /// `--json` for a 404: the mirror showed `errors: 0`, the object had no
    /// `file`, and the status was only inside the error's text.
    func testJSONOfA404GivesTheStatusAsANumberTheFileAndTheMirrorsError() throws {
        let named = try CLI.run(["--json", "-o", path("g"), server.url("missing")], in: directory)
        XCTAssertEqual(named.status, 1, named.stderr)
        let object = try named.jsonObject()
        XCTAssertEqual(object["outcome"] as? String, "failed")
        XCTAssertEqual(object["httpStatus"] as? Int, 404, named.stdout)
        XCTAssertTrue(object["failure"] is NSNull, "the server answered: no network failure: \(named.stdout)")
        XCTAssertEqual(object["file"] as? String, path("g"), named.stdout)
        let mirrors = try XCTUnwrap(object["mirrors"] as? [[String: Any]])
        XCTAssertEqual(mirrors.first?["errors"] as? Int, 1, named.stdout)

        let unnamed = try CLI.run(["--json", server.url("missing")], in: directory)
        let fields = try unnamed.jsonObject()
        XCTAssertTrue(fields.keys.contains("file") && fields["file"] is NSNull, unnamed.stdout)
        XCTAssertEqual(fields["httpStatus"] as? Int, 404, unnamed.stdout)

        server.setResource(Resource.generated(size: 1000, seed: 1806), at: "f")
        let done = try CLI.run(["--json", "-o", path("f"), server.url("f")], in: directory)
        let complete = try done.jsonObject()
        XCTAssertTrue(complete["httpStatus"] is NSNull && complete["error"] is NSNull, done.stdout)
        XCTAssertTrue(complete.keys.contains("failure") && complete["failure"] is NSNull, done.stdout)
    }

    /// A status the engine retried and then gave up on is the failure's status too.
    func testJSONGivesTheStatusTheEngineGaveUpOn() throws {
        // Probed fine (HEAD and the opening request), then every ranged GET answers 503.
        server.setResource(Resource.generated(size: 4 << 20, seed: 1808), at: "f")
        server.setFaults([FaultRule(.status(503, retryAfter: nil), when: .fromRequest(3))])
        let run = try CLI.run(
            [
                "--json", "-n", "2", "--min-split", "1M", "--retries", "1", "--retry-wait", "0.01",
                "-o", path("f"), server.url("f")
            ], in: directory)
        XCTAssertEqual(run.status, 1, run.stderr)
        let object = try run.jsonObject()
        XCTAssertTrue((object["error"] as? String)?.contains("giving up") == true, run.stdout)
        XCTAssertEqual(object["httpStatus"] as? Int, 503, run.stdout)
    }

    /// `-d` a directory that does not exist said "is not a directory"; `-d
    /// /proc` exited 4, not 2; permission messages did not all give a reason.
    func testMissingDirectoriesAreCreatedAndUnwritableOnesAreUsageErrorsWithTheirReason() throws {
        server.setResource(Resource.generated(size: 1000, seed: 1807), at: "f")
        let created = try CLI.run(["-q", "-d", path("new/nested"), server.url("f")], in: directory)
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path("new/nested/f")))
        // -o's directory alike (issue 37: it was "does not exist" where -d's was made).
        let output = try CLI.run(["-q", "-o", path("missing/deeper/out"), server.url("f")], in: directory)
        XCTAssertEqual(output.status, 0, output.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path("missing/deeper/out")))

        _ = FileManager.default.createFile(atPath: path("plain-file"), contents: Data("x".utf8))
        let locked = path("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: false)
        chmod(locked, 0o555)
        let cases: [(arguments: [String], message: String, unprivileged: Bool)] = [
            (["-d", "/proc"], "cannot write to directory /proc: its file system takes no new files", false),
            (["-d", path("plain-file")], "--dir \(path("plain-file")) is not a directory", false),
            (
                ["-d", path("plain-file/sub")],
                "--dir \(path("plain-file/sub")) does not exist and cannot be created: Not a directory", false
            ),
            (
                ["-o", path("plain-file/out")], "the directory \(path("plain-file")) of --output is not a directory",
                false
            ),
            (["-d", locked], "cannot write to directory \(locked): Permission denied", true),
            (
                ["-d", locked + "/sub"], "--dir \(locked)/sub does not exist and cannot be created: Permission denied",
                true
            ),
            (["-o", locked + "/out"], "cannot write to directory \(locked): Permission denied", true),
            (["-i", locked + "/none"], "cannot read input file \(locked)/none: No such file or directory", false)
        ]
        for (arguments, message, unprivileged) in cases {
            let run =
                unprivileged
                ? try CLI.runWithoutPermissionOverride(arguments + [server.url("f")], in: directory)
                : try CLI.run(arguments + (arguments[0] == "-i" ? [] : [server.url("f")]), in: directory)
            XCTAssertEqual(run.status, 2, "\(arguments): \(run.stderr)")
            XCTAssertTrue(run.stderr.hasPrefix("rangeget: " + message), "\(arguments): \(run.stderr)")
        }
    }

    /// `status /nonexistent` said `damaged: no manifest` and exited 4.
    func testStatusOfAPathThatDoesNotExistSaysSoAndExitsTwo() throws {
        let missing = try CLI.run(["status", path("nonexistent")], in: directory)
        XCTAssertEqual(missing.status, 2, missing.stdout + missing.stderr)
        XCTAssertEqual(missing.stderr, "rangeget: \(path("nonexistent")) does not exist\n")
        XCTAssertEqual(missing.stdout, "")

        _ = FileManager.default.createFile(atPath: path("done.iso"), contents: Data("x".utf8))
        let complete = try CLI.run(["status", path("done.iso")], in: directory)
        XCTAssertEqual(complete.status, 0, complete.stderr)
        XCTAssertTrue(complete.stderr.contains("no partial download of it here"), complete.stderr)
    }

    /// The library accepted `notaurl`, which the command line refused: both
    /// ask RemoteURL now. A URL without a scheme is refused with a suggestion.
    func testURLsAreCheckedOnceInTheLibraryAndTheCommandLineSaysTheSame() throws {
        for (url, problem) in [
            ("https://example.org/x", nil), ("HTTP://h/x", nil),
            ("example.org/x", "not an http or https URL: 'example.org/x'; did you mean 'https://example.org/x'?"),
            (
                "localhost:8080/x",
                "not an http or https URL: 'localhost:8080/x'; did you mean 'http://localhost:8080/x'?"
            ),
            // A host on the machine or the local network rarely has a certificate (issue 37).
            (
                "127.0.0.1:18900/big.bin",
                "not an http or https URL: '127.0.0.1:18900/big.bin'; did you mean 'http://127.0.0.1:18900/big.bin'?"
            ),
            ("192.168.1.20/f", "not an http or https URL: '192.168.1.20/f'; did you mean 'http://192.168.1.20/f'?"),
            ("nas:8080/f", "not an http or https URL: 'nas:8080/f'; did you mean 'http://nas:8080/f'?"),
            ("[::1]:80/f", "not an http or https URL: '[::1]:80/f'; did you mean 'http://[::1]:80/f'?"),
            (
                "fcbarcelona.com/f",
                "not an http or https URL: 'fcbarcelona.com/f'; did you mean 'https://fcbarcelona.com/f'?"
            ),
            ("8.8.8.8/f", "not an http or https URL: '8.8.8.8/f'; did you mean 'https://8.8.8.8/f'?"),
            ("notaurl", "not an http or https URL: 'notaurl'"), ("", "not an http or https URL: ''"),
            ("ftp://h/x", "not an http or https URL: 'ftp://h/x'"), ("http://", "not an http or https URL: 'http://'")
        ] as [(String, String?)] {
            XCTAssertEqual(RemoteURL.problem(url), problem, url)
        }
        let download = Download(url: "notaurl", destination: .file(path("x")))
        XCTAssertThrowsError(try download.run { _ in }) { error in
            XCTAssertEqual(error as? DownloadError, .usage("not an http or https URL: 'notaurl'"))
        }
        let mirrors = Download(mirrors: [server.url("f"), "example.org/x"], destination: .file(path("x")))
        XCTAssertThrowsError(try mirrors.run { _ in })
        XCTAssertEqual(server.statistics.requests.count, 0, "nothing was asked of any server")

        let run = try CLI.run(["example.org/x"], in: directory)
        XCTAssertEqual(run.status, 2)
        XCTAssertEqual(
            run.stderr, "rangeget: not an http or https URL: 'example.org/x'; did you mean 'https://example.org/x'?\n")
    }

    /// Issue 37, the output rule: stdout carries what a program reads
    /// (`--json`, the file with `-o -`), stderr what people read. Off a
    /// terminal a run of 0.4 s began with `rangeget: 0.0%  32.0 KiB / ...`:
    /// no progress line now before a run has taken a second.
    func testOffATerminalAShortRunSaysOnlyHowItEndedAndOnStderr() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 1811)
        server.setResource(resource, at: "f")
        let quick = try CLI.run(["-n", "4", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(quick.status, 0, quick.stderr)
        XCTAssertEqual(quick.stdout, "")
        let lines = quick.stderr.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, quick.stderr)
        XCTAssertTrue(lines.first?.hasPrefix("rangeget: saved \(path("f")) (2.0 MiB) in ") == true, quick.stderr)

        // 2 MiB at 1 MiB/s: the progress lines begin after a second.
        server.setRatePerConnection(512 << 10)
        let slow = try CLI.run(["-n", "2", "--restart", "--force", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(slow.status, 0, slow.stderr)
        XCTAssertTrue(slow.stderr.contains("%  "), "a run of 2 s shows its progress: \(slow.stderr)")
        XCTAssertEqual(slow.stdout, "")
    }

    /// Issue 37: a typo gets the option or command it most likely meant,
    /// and a habit of aria2c, wget or curl a hint; each exits 2 before any
    /// request, and no foreign flag is taken to mean something else.
    func testTyposGetSuggestionsAndOtherToolsHabitsGetHints() throws {
        let url = server.url("f")
        let cases: [(arguments: [String], message: String)] = [
            (
                ["--conections", "4", url],
                "unknown option --conections; did you mean --connections? (see 'rangeget --help')"
            ),
            (
                ["-connections", "4", url],
                "unknown option -connections; did you mean --connections? (see 'rangeget --help')"
            ),
            (["--retires", "2", url], "unknown option --retires; did you mean --retries? (see 'rangeget --help')"),
            (["--frobnicate", url], "unknown option --frobnicate (see 'rangeget --help')"),
            (["statsu"], "unknown command 'statsu'; did you mean 'rangeget status'? (see 'rangeget --help')"),
            (["bnech", url], "unknown command 'bnech'; did you mean 'rangeget bench'? (see 'rangeget --help')"),
            (["-x", "8", url], "-x is aria2c's connections per server: rangeget's connections are -n N (default 8)"),
            (["-x8", url], "-x is aria2c's connections per server: rangeget's connections are -n N (default 8)"),
            (["-s", "8", url], "-s is aria2c's split count: rangeget's connections are -n N (default 8)"),
            (
                ["--max-connection-per-server=8", url],
                "--max-connection-per-server is aria2c's -x: rangeget's connections are -n N (default 8)"
            ),
            (
                ["-c", url],
                "-c is not a rangeget option: where wget and aria2c resume with -c, rangeget resumes on its own "
                    + "(run the same command again); curl's -c writes a cookie jar, which rangeget does not keep"
            ),
            (
                ["--continue", url],
                "--continue is not a rangeget option: rangeget resumes on its own (run the same command again)"
            ),
            (
                ["-O", "x.bin", url],
                "-O is not a rangeget option: name the file with -o FILE (wget's -O FILE); "
                    + "without it the name comes from the server or the URL (curl's -O)"
            ),
            (["-C", "-", url], "-C - is curl's resume: rangeget resumes on its own (run the same command again)"),
            (
                ["-Z", url],
                "-Z is curl's parallel mode: rangeget fetches each file over -n connections, and a list with -i LIST"
            ),
            (["--output-document", "x", url], "--output-document is wget's -O: rangeget's is -o FILE")
        ]
        for (arguments, message) in cases {
            let run = try CLI.run(arguments, in: directory)
            XCTAssertEqual(run.status, 2, "\(arguments): \(run.stderr)")
            XCTAssertEqual(run.stderr, "rangeget: \(message)\n", "\(arguments)")
        }
        XCTAssertEqual(server.statistics.requests.count, 0, "nothing was asked of the server")
        XCTAssertEqual(Suggestion.editDistance("statsu", "status"), 1, "a swap of neighbours is one edit")
        XCTAssertNil(Suggestion.closest(to: "get", among: Subcommand.names), "a short word far from every command")
    }

    /// --help omitted -i, status, bench and help; the list syntax was only in
    /// the README; the man page had no EXAMPLES; `help serve` pointed to a
    /// file an installed user does not have.
    func testHelpAndTheManPageShowEveryFormTheListSyntaxAndExamples() throws {
        let help = try CLI.run(["--help"], in: directory).stdout
        for form in [
            "rangeget [OPTIONS] URL [MIRROR-URL...]", "rangeget [OPTIONS] -i LIST",
            "rangeget status [OPTIONS] [PATH...]",
            "rangeget bench [OPTIONS] URL [URL...]", "rangeget serve DIR [OPTIONS]", "rangeget help [OPTIONS] [COMMAND]"
        ] {
            XCTAssertTrue(help.contains("       " + form) || help.contains("Usage: " + form), "\(form) in\n\(help)")
        }
        let man = try String(contentsOf: CLI.repositoryRoot.appendingPathComponent("docs/rangeget.1"), encoding: .utf8)
        for text in ["Several URLs on a line are mirrors", "out=NAME", "'#' starts a comment"] {
            XCTAssertTrue(help.contains(text), "--help explains lists: \(text)")
            XCTAssertTrue(
                man.contains(text.replacingOccurrences(of: "-", with: "\\-")), "the man page explains lists: \(text)")
        }
        XCTAssertTrue(man.contains(".SH LISTS\n") && man.contains(".SH EXAMPLES\n"), man)
        let readme = try String(contentsOf: CLI.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        for example in HelpCommand.examples {
            XCTAssertTrue(
                man.contains(".B " + example.command.replacingOccurrences(of: "-", with: "\\-")), example.command)
            XCTAssertTrue(
                readme.split(separator: "\n").contains { $0.hasPrefix(example.command) },
                "the README's examples and the man page's are the same: \(example.command)")
        }

        let serve = try CLI.run(["help", "serve"], in: directory).stdout
        XCTAssertFalse(serve.contains("README"), serve)
        let faults = try String(
            contentsOf: CLI.repositoryRoot.appendingPathComponent("Sources/RangeServer/README.md"), encoding: .utf8
        )
        .split(separator: "\n").filter { $0.hasPrefix("| `") && $0.contains("| `.") }.map { row in
            String(row.dropFirst(3).prefix { $0 != "`" && $0 != ":" && $0 != "[" })
        }
        XCTAssertGreaterThan(faults.count, 20)
        for fault in faults { XCTAssertTrue(serve.contains("  " + fault), "help serve explains \(fault)") }
        for trigger in ["request=N", "from=N", "range-start=OFFSET", "p=P", "method=METHOD"] {
            XCTAssertTrue(serve.contains(trigger), trigger)
        }
    }

    /// The example program (Examples/fetch, built as rangeget-example) shows
    /// the event stream, and pause and resume on SIGUSR1.
    func testTheExampleProgramPausesResumesAndPrintsItsEvents() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 1808)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let example = try launch(["-n", "2", server.url("f"), path("f")], executable: CLI.example)
        func printed() -> String { (try? String(contentsOf: example.stdoutURL, encoding: .utf8)) ?? "" }
        XCTAssertTrue(wait(timeout: 20) { printed().contains("% at") }, printed())
        kill(example.pid, SIGUSR1)
        XCTAssertTrue(wait(timeout: 20) { printed().contains("paused: no connection open") }, printed())
        kill(example.pid, SIGUSR1)
        XCTAssertTrue(wait(timeout: 30) { !example.isRunning }, printed())
        XCTAssertEqual(example.process.terminationStatus, 0, printed())
        let lines = printed()
        for line in [
            "size: 4194304 bytes", "paused: no connection open, resume state saved", "resumed",
            "finished: 4194304 bytes in \(path("f"))", "fetched 4194304 bytes"
        ] {
            XCTAssertTrue(lines.contains(line), "\(line) in\n\(lines)")
        }
        assertSameBytes(path("f"), resource)
    }

    /// `pieceStarted` and `pieceFinished` were missing from the README (the library guide, docs/LIBRARY.md, since the README became a user guide).
    func testTheReadmeDocumentsEveryDownloadEvent() throws {
        let source = try String(
            contentsOf: CLI.repositoryRoot.appendingPathComponent("Sources/RangeGet/DownloadEvent.swift"),
            encoding: .utf8)
        let readme = try String(
            contentsOf: CLI.repositoryRoot.appendingPathComponent("docs/LIBRARY.md"), encoding: .utf8)
        // The events a `switch` covers, then the engine's, grouped under `transfer`.
        for (type, least) in [("DownloadEvent", 11), ("TransferEvent", 6)] {
            let body = source[source.range(of: "public enum \(type)")!.upperBound...].prefix { $0 != "}" }
            let cases = body.split(separator: "\n").compactMap { line -> String? in
                let words = line.trimmingCharacters(in: .whitespaces)
                guard words.hasPrefix("case ") else { return nil }
                return String(words.dropFirst(5).prefix { $0.isLetter })
            }
            XCTAssertGreaterThanOrEqual(cases.count, least, type)
            for name in cases {
                XCTAssertTrue(readme.contains("| `\(name)"), "docs/LIBRARY.md documents \(type).\(name)")
            }
        }
        XCTAssertTrue(readme.contains("`connectionSeconds`"))
    }
}
