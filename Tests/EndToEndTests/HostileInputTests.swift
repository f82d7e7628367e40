// Issue 12, the command line's part: hostile servers and hostile input must
// not crash rangeget, make it write outside its target, or let a file through
// unchecked without saying so. Each test names the item of the issue it guards.
import Foundation
import RangeGet
import RangeServer
import XCTest

final class HostileInputTests: EndToEndTestCase {
    /// Runs the binary on a pseudo-terminal (script(1)); the screen is `stdout`.
    private func runOnTerminal(_ arguments: [String], timeout: Double = 60) throws -> Run {
        let command = (["LANG=C.UTF-8", "COLUMNS=100", CLI.binary] + arguments).joined(separator: " ")
        return try CLI.run(
            ["-c", "/usr/bin/script -qfec '\(command)' /dev/null"], in: directory, timeout: timeout,
            executable: "/bin/sh")
    }

    /// Asserts one line `rangeget: ...` on stderr, exit 2, and nothing sent or written.
    private func assertRefused(
        _ arguments: [String], mentioning expected: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        server.resetStatistics()
        let before = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        let run = try CLI.run(arguments, in: directory, timeout: 20)
        XCTAssertEqual(run.status, 2, "\(arguments): \(run.stderr)", file: file, line: line)
        XCTAssertEqual(
            run.stderr.split(separator: "\n").count, 1, "\(arguments): one line, got \(run.stderr)",
            file: file, line: line)
        XCTAssertTrue(run.stderr.hasPrefix("rangeget: "), "\(arguments): \(run.stderr)", file: file, line: line)
        if let expected {
            XCTAssertTrue(
                run.stderr.contains(expected), "\(arguments): '\(expected)' in \(run.stderr)", file: file, line: line)
        }
        XCTAssertFalse(run.stderr.contains("Fatal error"), run.stderr, file: file, line: line)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory).sorted(), before,
            "\(arguments): nothing written", file: file, line: line)
        XCTAssertEqual(server.statistics.requests.count, 0, "\(arguments): no request", file: file, line: line)
    }

    /// Every scalar of `text` that a terminal would act on: C0 (but the line
    /// feed), DEL, C1 and the bidi controls.
    private func controlCharacters(_ text: String) -> [String] {
        text.unicodeScalars.filter { scalar in
            (scalar.value < 0x20 && scalar != "\n") || (0x7F...0x9F).contains(scalar.value)
                || [0x061C, 0x200E, 0x200F, 0x2028, 0x2029].contains(scalar.value)
                || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value)
        }.map { String(format: "U+%04X", $0.value) }
    }

    // MARK: - Item 2: numbers typed on the command line

    /// Issue 12 item 2: `--connect-timeout 1e19` trapped converting seconds to
    /// milliseconds, `--min-split 5000000T` trapped in the planner
    /// (`2 * minimumSplit`), and counts had no upper bound at all.
    func testNumbersAtTheEdgeOfTheirTypesAreRefusedWithOneLine() throws {
        let url = server.url("f")
        server.setResource(Resource.generated(size: 4 << 20, seed: 120), at: "f")
        let cases: [([String], String)] = [
            (["--connect-timeout", "1e19"], "--connect-timeout"),
            (["--connect-timeout", "0.0001"], "--connect-timeout"),
            (["--stall-timeout", "1e300"], "86400"), (["--retry-wait", "9223372036854775808"], "--retry-wait"),
            (["--retry-wait", "100000"], "86400"),
            (["--min-split", "5000000T"], "--min-split"), (["-k", "1025G"], "1T"),
            (["--min-split", "9223372036854775807"], "1T"),
            (["--max-speed", "5000000T"], "--max-speed"), (["--max-speed", "2T"], "1T"),
            (["--retries", "9223372036854775807"], "1000"), (["--retries", "99999999999999999999"], "--retries"),
            (["--retries", "1001"], "1000"), (["-j", "9223372036854775808"], "--jobs"),
            (["-n", "1e3"], "--connections"),
            (["--max-per-host", "18446744073709551616"], "--max-per-host")
        ]
        for (arguments, expected) in cases {
            try assertRefused(["-q", "-o", path("f")] + arguments + [url], mentioning: expected)
        }
        let served = path("served")
        try FileManager.default.createDirectory(atPath: served, withIntermediateDirectories: false)
        for arguments in [
            ["--latency", "inf"], ["--latency", "1e300"], ["--rate-total", "5000000T"],
            ["--rate-per-connection", "9223372036854775807"], ["--burst", "0"], ["--burst", "2T"]
        ] {
            try assertRefused(["serve", served] + arguments, mentioning: arguments[0])
        }
        for arguments in [["--seconds", "1e19"], ["--samples", "65"], ["-n", "100000000000000000000"]] {
            try assertRefused(
                ["bench"] + arguments + [url], mentioning: arguments[0] == "-n" ? "--connections" : arguments[0])
        }
        // The largest values allowed still work.
        let run = try CLI.run(
            [
                "-q", "--min-split", "1T", "--max-speed", "1T", "--retries", "1000", "--connect-timeout", "86400",
                "--stall-timeout", "86400", "--retry-wait", "86400", "-o", path("f"), url
            ], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), Resource.generated(size: 4 << 20, seed: 120))
    }

    // MARK: - Item 3: sizes near Int64.max reach the display

    /// Issue 12 item 3: a 200 claiming `Content-Length: 9000000000000000000`
    /// reached the progress bar, whose map computed `total * cell` and trapped.
    /// Now such a size is refused at the probe (above 2^62 bytes no file
    /// system holds it: one line, exit 1, nothing left behind); the display's
    /// arithmetic at such sizes is covered by CommandLineFormattingTests.
    func testAContentLengthNearInt64MaxIsRefusedWithoutATrap() throws {
        let claimed: Int64 = 9_000_000_000_000_000_000
        let scripted = try scriptedServer { request in
            var response = ScriptedResponse(
                head: ["HTTP/1.1 200 OK", "Content-Length: \(claimed)", "Connection: close"].joined(separator: "\r\n"),
                body: request.method == "HEAD" ? [] : [UInt8](repeating: 0x61, count: 300_000))
            response.holdOpen = request.method == "HEAD" ? 0 : 2
            return response
        }
        let run = try runOnTerminal(["--retries", "0", "--stall-timeout", "1", "-o", path("huge"), scripted.url("huge")]
        )
        XCTAssertFalse(run.stdout.contains("Fatal error"), run.stdout)
        XCTAssertEqual(run.status, 1, "refused, cleanly: \(run.stdout.suffix(400))")
        XCTAssertTrue(run.stdout.contains("claims a size of 9000000000000000000 bytes"), run.stdout.debugDescription)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("huge") }, [])
    }

    // MARK: - Item 4: out= names in a list

    /// Issue 12 item 4: `out=../x` and `out=/abs/path` in an `-i` list wrote
    /// outside the `-d` directory. Such names are reduced to a base name in it.
    func testOutNamesInAListStayInsideTheDirectory() throws {
        let resource = Resource.generated(size: 200_000, seed: 121)
        server.setResource(resource, at: "f")
        let url = server.url("f")
        let outside = path("outside.bin")
        let lines = [
            "\(url) out=../escaped.bin",
            "\(url) out=\(outside)",
            url, "  out=sub/../../../climbed.bin",
            "\(url) out=..\\windows.bin",
            "\(url) out=.hidden"
        ]
        try lines.joined(separator: "\n").write(toFile: path("list"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: false)
        let run = try CLI.run(["-q", "-d", path("out"), "-i", path("list")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory).sorted(), ["list", "out"],
            "nothing beside the directory")
        XCTAssertFalse(FileManager.default.fileExists(atPath: outside))
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: path("out")).sorted(),
            ["climbed.bin", "escaped.bin", "hidden", "outside.bin", "windows.bin"])
        for name in ["climbed.bin", "escaped.bin", "hidden", "outside.bin", "windows.bin"] {
            assertSameBytes(path("out/" + name), resource)
        }
        XCTAssertTrue(
            run.stderr.contains("input line 1: out=../escaped.bin is not a plain file name; saving it as escaped.bin"),
            run.stderr)
        XCTAssertTrue(run.stderr.contains("input line 4:"), "the out= line is named: \(run.stderr)")

        try "\(url) out=..\n".write(toFile: path("list"), atomically: true, encoding: .utf8)
        try assertRefused(["-d", path("out"), "-i", path("list")], mentioning: "input line 1")
    }

    // MARK: - Items 8 and 9: CRLF files, checksum lists without an entry

    /// Issue 12 item 8: `"\r\n"` is one Character in Swift, so splitting on
    /// `"\n"` saw a CRLF file as one line: a CRLF list failed with an odd
    /// message, and a CRLF SHA256SUMS checked nothing (a wrong sum exited 0).
    func testCRLFListsAndChecksumFilesAreReadLineByLine() throws {
        let first = Resource.generated(size: 300_000, seed: 122)
        let second = Resource.generated(size: 200_000, seed: 123)
        server.setResource(first, at: "first.bin")
        server.setResource(second, at: "second.bin")
        let wrong = String(repeating: "0", count: 64)
        try
            "\u{FEFF}\(server.url("first.bin"))\r\n\r\n# comment\r\n\(server.url("second.bin"))\r\n  out=renamed.bin\r\n"
            .write(toFile: path("list"), atomically: true, encoding: .utf8)
        try "\(try sha256(of: first))  first.bin\r\n\(wrong) *renamed.bin\r\n"
            .write(toFile: path("SUMS"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: false)
        let arguments = ["-d", path("out"), "-i", path("list"), "--checksum-file", path("SUMS")]
        let bad = try CLI.run(arguments, in: directory)
        XCTAssertFalse(bad.stderr.contains("Fatal error"), bad.stderr)
        XCTAssertEqual(bad.status, 3, "the wrong sum is found: \(bad.stderr)")
        XCTAssertTrue(bad.stderr.contains("expected \(wrong)"), bad.stderr)
        assertSameBytes(path("out/first.bin"), first)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("out/renamed.bin")))

        try "\(try sha256(of: first))  first.bin\r\n\(try sha256(of: second)) *renamed.bin\r\n"
            .write(toFile: path("SUMS"), atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(atPath: path("out/first.bin"))
        let good = try CLI.run(arguments, in: directory)
        XCTAssertEqual(good.status, 0, good.stderr)
        assertSameBytes(path("out/first.bin"), first)
        assertSameBytes(path("out/renamed.bin"), second)

        // Line 2 is named as such: the CRLF file was read line by line. It fails alone (issue 37).
        try FileManager.default.removeItem(atPath: path("out/first.bin"))
        try "\(server.url("first.bin"))\r\nftp://bad/x\r\n".write(
            toFile: path("list"), atomically: true, encoding: .utf8)
        let mixed = try CLI.run(["-q"] + arguments, in: directory)
        XCTAssertEqual(mixed.status, 2, mixed.stderr)
        XCTAssertEqual(mixed.stderr, "rangeget: failed: input line 2: not an http or https URL: 'ftp://bad/x'\n")
        assertSameBytes(path("out/first.bin"), first)
    }

    /// Issue 12 item 9: with `--checksum-file`, a file the list has no entry
    /// for was saved unchecked, and the lookup used the URL's last segment,
    /// so a file named by Content-Disposition was never checked at all. Now
    /// the entry is looked up by the name the file is saved under, and a file
    /// without one fails (exit 3, data kept in `.part`) with a line naming it.
    func testAChecksumListIsLookedUpByTheSavedNameAndAMissingEntryFails() throws {
        var named = Resource.generated(size: 300_000, seed: 124)
        named.contentDisposition = "attachment; filename=\"named.bin\""
        let plain = Resource.generated(size: 200_000, seed: 125)
        server.setResource(named, at: "download/42")
        server.setResource(plain, at: "plain.bin")
        try "\(server.url("download/42"))\n\(server.url("plain.bin"))\n".write(
            toFile: path("list"), atomically: true,
            encoding: .utf8)
        let wrong = String(repeating: "0", count: 64)
        try "\(wrong)  named.bin\n\(try sha256(of: plain))  other.bin\n".write(
            toFile: path("SUMS"), atomically: true,
            encoding: .utf8)
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: false)
        let arguments = ["-d", path("out"), "-i", path("list"), "--checksum-file", path("SUMS")]
        let failed = try CLI.run(arguments, in: directory)
        XCTAssertEqual(failed.status, 3, failed.stderr)
        XCTAssertTrue(
            failed.stderr.contains("expected \(wrong)"), "named.bin is checked by its saved name: \(failed.stderr)")
        XCTAssertTrue(failed.stderr.contains("has no entry for plain.bin"), failed.stderr)
        XCTAssertTrue(failed.stderr.contains("0 of 2 files downloaded"), failed.stderr)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: path("out"))
                .filter { !$0.hasSuffix(".json") && !$0.hasSuffix(".journal") }.sorted(),
            ["named.bin.part", "plain.bin.part"], "nothing unverified under its final name")

        try "\(try sha256(of: named))  named.bin\n\(try sha256(of: plain))  ./plain.bin\n"
            .write(toFile: path("SUMS"), atomically: true, encoding: .utf8)
        let good = try CLI.run(["-q"] + arguments, in: directory)
        XCTAssertEqual(good.status, 0, good.stderr)
        assertSameBytes(path("out/named.bin"), named)
        assertSameBytes(path("out/plain.bin"), plain)
    }

    // MARK: - Item 15: control characters from servers

    /// Issue 12 item 15: server strings (here a Content-Range, an ETag, a
    /// Server header, a file name) were printed raw, so an escape sequence in
    /// them reached the terminal. `--json` stays valid JSON with the text intact.
    func testServerTextReachesTheTerminalWithoutControlCharacters() throws {
        let hostile = "\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31m\u{202E}\u{7F}"
        let garbage = try scriptedServer { _ in
            ScriptedResponse(
                head: [
                    "HTTP/1.1 206 Partial Content", "Content-Range: bytes 0-0/\(hostile)",
                    "Content-Length: 1", "Connection: close"
                ].joined(separator: "\r\n"), body: [0x61])
        }
        let failed = try CLI.run(["--retries", "0", "-o", path("g"), garbage.url("g")], in: directory)
        XCTAssertEqual(failed.status, 1, failed.stderr)
        XCTAssertTrue(failed.stderr.contains("Content-Range"), failed.stderr)
        XCTAssertEqual(controlCharacters(failed.stderr), [], failed.stderr.debugDescription)
        XCTAssertTrue(
            failed.stderr.split(separator: "\n").allSatisfy { $0.hasPrefix("rangeget: ") },
            "no line of the server's: \(failed.stderr.debugDescription)")

        let json = try CLI.run(["--json", "--retries", "0", "-o", path("g"), garbage.url("g")], in: directory)
        XCTAssertEqual(json.status, 1)
        XCTAssertEqual(
            controlCharacters(json.stdout.trimmingCharacters(in: .newlines)), [], json.stdout.debugDescription)
        let error = try XCTUnwrap(try json.jsonObject()["error"] as? String)
        // The library already hands out the server's text with its control characters written out.
        XCTAssertEqual(controlCharacters(error), [], error.debugDescription)
        XCTAssertTrue(
            error.contains("\\u{1B}]0;owned\\u{7}"), "JSON carries the text, escaped: \(error.debugDescription)")

        // A mirror with a hostile ETag and other bytes is dropped (by its
        // bytes: issue 36); nothing it sent reaches the terminal raw.
        let resource = Resource.generated(size: 300_000, seed: 126)
        let other = Resource.generated(size: 300_000, seed: 127)
        server.setResource(resource, at: "f")
        let mirror = try scriptedServer { request in
            ScriptedResponse.serving(other, request, etag: "\"\(hostile)\"")
        }
        let dropped = try CLI.run(["-o", path("f"), server.url("f"), mirror.url("f")], in: directory)
        XCTAssertEqual(dropped.status, 0, dropped.stderr)
        XCTAssertTrue(dropped.stderr.contains("dropping mirror"), dropped.stderr)
        XCTAssertEqual(
            controlCharacters(dropped.stderr + dropped.stdout), [], (dropped.stderr + dropped.stdout).debugDescription)

        // bench prints the Server header in its table.
        let benchMirror = try scriptedServer { request in
            ScriptedResponse.serving(resource, request, extraFields: ["Server: \(hostile)"])
        }
        let benchTable = try CLI.run(
            ["bench", "--seconds", "0.2", "-n", "2", "--samples", "1", benchMirror.url("f")],
            in: directory, timeout: 60)
        XCTAssertEqual(benchTable.status, 0, benchTable.stderr)
        XCTAssertTrue(benchTable.stdout.contains("owned"), benchTable.stdout)
        XCTAssertEqual(
            controlCharacters(benchTable.stdout + benchTable.stderr), [],
            (benchTable.stdout + benchTable.stderr).debugDescription)

        // status prints file names found on disk, and what went wrong with them.
        let evil = path("evil\u{1B}[2J\u{07}.part.json")
        try Data("{broken".utf8).write(to: URL(fileURLWithPath: evil))
        let status = try CLI.run(["status", directory], in: directory)
        XCTAssertEqual(status.status, 4)
        XCTAssertTrue(status.stdout.contains("damaged"), status.stdout)
        XCTAssertEqual(controlCharacters(status.stdout + status.stderr), [], status.stdout.debugDescription)
        let statusJSON = try CLI.run(["status", "--json", directory], in: directory)
        let entries = try statusJSON.jsonArray()
        XCTAssertTrue(
            entries.contains { $0["manifest"] as? String == evil }, "JSON keeps the name as it is: \(statusJSON.stdout)"
        )
    }

    // MARK: - Item 16: request headers

    /// Issue 12 item 16: `-H` took CR and LF, so one option could add headers
    /// (or a request) of its own; a `Range:` header would override the
    /// planner's ranges and an `If-Range:` the validator that keeps a changed
    /// file from being spliced.
    func testHeadersWithLineBreaksOrThatChooseTheBytesAreRefused() throws {
        let url = server.url("f")
        server.setResource(Resource.generated(size: 1000, seed: 127), at: "f")
        let cases: [([String], String)] = [
            (["-H", "X-A: 1\r\nX-Injected: 2"], "line break"), (["-H", "X-A: 1\nX-B: 2"], "line break"),
            (["-H", "X-A: 1\r"], "line break"), (["-H", "X-A: \u{1B}[2J"], "control character"),
            (["--user-agent", "ua\r\nX-Injected: 1"], "--user-agent"),
            (["-H", "Range: bytes=0-10"], "Range"), (["-H", " range :bytes=5-"], "Range"),
            (["--header=RANGE: bytes=1-2"], "Range"),
            (["-H", "If-Range: \"x\""], "If-Range"), (["-H", ": no name"], "--header"),
            (["-H", "Bad Name: x"], "--header")
        ]
        for (arguments, expected) in cases {
            try assertRefused(["-q", "-o", path("f")] + arguments + [url], mentioning: expected)
        }
        try assertRefused(["bench", "-H", "X: a\r\nY: b", url], mentioning: "line break")
        // Ordinary headers still go out.
        let run = try CLI.run(
            ["-q", "-H", "X-Token: abc", "--user-agent", "agent/1.0", "-o", path("f"), url], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(server.statistics.requests.allSatisfy { $0.headers["x-token"] == "abc" })
    }
}
