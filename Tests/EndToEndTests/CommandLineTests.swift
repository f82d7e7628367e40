// The command line people use: progress on a pseudo-terminal, --json, input
// lists, status, headers, speed caps, and help, man page and completions
// generated from the same option tables.
import Foundation
import RangeServer
import XCTest

final class CommandLineTests: EndToEndTestCase {
    func testProgressIsDrawnInPlaceOnATerminalAndNotElsewhere() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 81)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        // script(1) gives the child a pseudo-terminal.
        let command = "LANG=C.UTF-8 COLUMNS=100 \(CLI.binary) -n 4 -o \(output) \(server.url("f"))"
        let run = try CLI.run(
            ["-c", "/usr/bin/script -qfec '\(command)' /dev/null"], in: directory, executable: "/bin/sh")
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        assertSameBytes(output, resource)
        let screen = run.stdout
        XCTAssertTrue(screen.contains("\r["), "redrawn in place: \(screen.debugDescription.prefix(300))")
        XCTAssertTrue(screen.contains("█"), "segment map has done cells")
        XCTAssertTrue(screen.contains("conn"), "live connections shown")
        XCTAssertTrue(screen.contains("ETA"), "ETA shown")
        XCTAssertTrue(screen.contains("\u{1B}[K"), "each redraw clears the rest of the line")
        XCTAssertTrue(screen.contains("saved"), "summary printed")

        // Not a terminal: no carriage-return redraws; -q: nothing at all.
        try FileManager.default.removeItem(atPath: output)
        let piped = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(piped.status, 0)
        XCTAssertFalse(piped.stderr.contains("\r"), piped.stderr)
        try FileManager.default.removeItem(atPath: output)
        let quiet = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(quiet.status, 0)
        XCTAssertEqual(quiet.stdout + quiet.stderr, "")
    }

    func testJSONSummaryParsesAndHasTheDocumentedFields() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 82)
        server.setResource(resource, at: "f")
        let run = try CLI.run(["--json", "-n", "2", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        let object = try run.jsonObject()
        assertEveryDocumentedKey(in: object, run.stdout)
        XCTAssertEqual(object["outcome"] as? String, "complete")
        XCTAssertEqual(object["size"] as? Int, 1 << 20)

        let failed = try CLI.run(["--json", "--retries", "0", "-o", path("g"), server.url("missing")], in: directory)
        XCTAssertEqual(failed.status, 1)
        let failure = try failed.jsonObject()
        // A 404 too has every key, null where unknown (a mirror's httpVersion was missing).
        assertEveryDocumentedKey(in: failure, failed.stdout)
        XCTAssertEqual(failure["outcome"] as? String, "failed")
        XCTAssertEqual(failure["exitCode"] as? Int, 1)
        XCTAssertEqual(failure["httpStatus"] as? Int, 404)
    }

    /// The README: "Every key but `alreadyComplete` is in every object, `null` where it does not apply."
    private func assertEveryDocumentedKey(
        in object: [String: Any], _ text: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        for key in [
            "outcome", "exitCode", "error", "httpStatus", "failure", "file", "size", "seconds",
            "averageBytesPerSecond", "bytesFetched", "bytesReused", "retries", "connectionsUsed",
            "tcpConnections", "mirrors"
        ] {
            XCTAssertNotNil(object[key], "field \(key) in \(text)", file: file, line: line)
        }
        let mirrors = object["mirrors"] as? [[String: Any]] ?? []
        XCTAssertFalse(mirrors.isEmpty, text, file: file, line: line)
        for mirror in mirrors {
            XCTAssertEqual(
                Set(mirror.keys),
                [
                    "url", "bytes", "bytesPerSecondPerConnection", "errors", "dropped",
                    "tcpConnections", "httpVersion", "badPieces", "discoveredIn"
                ], text, file: file, line: line)
        }
    }

    func testInputListDownloadsEveryFileAndReportsFailures() throws {
        var lines = ["# a comment", ""]
        var resources: [String: Resource] = [:]
        for index in 1...6 {
            let resource = Resource.generated(size: Int64(index) * 300_000, seed: UInt64(90 + index))
            server.setResource(resource, at: "file\(index)")
            resources["file\(index)"] = resource
            lines.append(server.url("file\(index)"))
        }
        lines.append(server.url("missing") + "   # broken")
        lines.append(server.url("file1") + " " + server.url("file1"))
        lines.append("  out=renamed.bin")
        try lines.joined(separator: "\n").write(toFile: path("list.txt"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
        let run = try CLI.run(
            ["-n", "4", "-j", "3", "--retries", "0", "-d", path("out"), "-i", path("list.txt")],
            in: directory)
        XCTAssertEqual(run.status, 1, "one file failed: \(run.stderr)")
        XCTAssertTrue(run.stderr.contains("7 of 8 files downloaded"), run.stderr)
        XCTAssertTrue(run.stderr.contains("missing"), run.stderr)
        for (name, resource) in resources { assertSameBytes(path("out/\(name)"), resource) }
        assertSameBytes(path("out/renamed.bin"), resources["file1"]!)

        // A bad line fails alone (issue 37): the good entry is fetched, and the run exits 2.
        try "\(server.url("file2")) out=again.bin\nftp://bad/b\n".write(
            toFile: path("bad.txt"), atomically: true, encoding: .utf8)
        let bad = try CLI.run(["-d", path("out"), "-i", path("bad.txt")], in: directory)
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(
            bad.stderr.contains("rangeget: failed: input line 2: not an http or https URL: 'ftp://bad/b'"), bad.stderr)
        assertSameBytes(path("out/again.bin"), resources["file2"]!)
    }

    func testStatusShowsPartialDownloadsAndDamage() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 83)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        _ = try interrupted(["-q", "-n", "2", "-o", output, server.url("f")]) {
            ManifestFile.doneBytes(output + ".part.json") > 0
        }

        let status = try CLI.run(["status", "--json", directory], in: directory)
        XCTAssertEqual(status.status, 0, status.stderr)
        let entries = try status.jsonArray()
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(entries[0]["url"] as? String, server.url("f"))
        XCTAssertEqual(entries[0]["healthy"] as? Bool, true)
        XCTAssertEqual(entries[0]["size"] as? Int, 8 << 20)
        XCTAssertGreaterThan(entries[0]["bytesDone"] as? Int ?? 0, 0)
        let table = try CLI.run(["status"], in: directory)
        XCTAssertTrue(table.stdout.contains(" resumable ") && table.stdout.contains("%"), table.stdout)

        try Data("{broken".utf8).write(to: URL(fileURLWithPath: output + ".part.json"))
        let damaged = try CLI.run(["status", output], in: directory)
        XCTAssertEqual(damaged.status, 4)
        XCTAssertTrue(damaged.stdout.contains("damaged"), damaged.stdout)
    }

    /// Served at 128 KiB/s per connection the download would take 16 s: its
    /// first checkpoint comes long before its end, even on a disk whose
    /// syncs stall for seconds (at 1 MiB/s a fresh clone's run once ended
    /// first, its manifest removed before the test could read it).
    func testHeadersAreSentButNeverStored() throws {
        server.setResource(Resource.generated(size: 4 << 20, seed: 84), at: "f")
        server.setRatePerConnection(128 << 10)
        let output = path("f")
        let child = try launch(["-q", "-n", "2", "-H", "Authorization: Bearer s3cret", "-o", output, server.url("f")])
        XCTAssertTrue(wait(timeout: 20) { ManifestFile.doneBytes(output + ".part.json") > 0 })
        let manifest = try String(contentsOfFile: output + ".part.json", encoding: .utf8)
        child.kill9()
        XCTAssertFalse(manifest.contains("s3cret"), manifest)
        let sent = server.statistics.requests.filter { $0.method == "GET" }
        XCTAssertFalse(sent.isEmpty)
        XCTAssertTrue(sent.allSatisfy { $0.headers["authorization"] == "Bearer s3cret" })
    }

    func testMaxSpeedCapsTheWholeRun() throws {
        let resource = Resource.generated(size: 6 << 20, seed: 85)
        server.setResource(resource, at: "f")
        let started = Date()
        let run = try CLI.run(["-q", "-n", "4", "--max-speed", "4M", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 1.2, "6 MiB at 4 MiB/s takes about 1.5 s")
        assertSameBytes(path("f"), resource)
    }

    /// Small files too: an opening request keeps a whole small file in
    /// memory only without a rate limit, whose budget those bytes would escape.
    func testMaxSpeedCapsAListOfSmallFiles() throws {
        let resources = (0..<20).map { Resource.generated(size: 64 << 10, seed: 86 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: "s\(index)") }
        try resources.indices.map { server.url("s\($0)") }.joined(separator: "\n")
            .write(toFile: path("list"), atomically: true, encoding: .utf8)
        let started = Date()
        let run = try CLI.run(
            ["-q", "-n", "4", "--max-speed", "1M", "-i", path("list"), "-d", path("out")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertGreaterThan(Date().timeIntervalSince(started), 0.9, "1.25 MiB at 1 MiB/s takes about 1.2 s")
        for (index, resource) in resources.enumerated() { assertSameBytes(path("out/s\(index)"), resource) }
    }

    func testManPageAndCompletionsAreGeneratedFromTheOptionTables() throws {
        let help = try CLI.run(["--help"], in: directory).stdout
        let options = help.split(separator: "\n").compactMap { line -> String? in
            guard let range = line.range(of: "--") else { return nil }
            return String(line[range.lowerBound...].prefix { $0 != " " && $0 != "," })
        }
        XCTAssertGreaterThan(options.count, 15)
        for (file, arguments) in [
            ("docs/rangeget.1", ["help", "--man"]),
            ("docs/completion/rangeget.bash", ["help", "--completion", "bash"]),
            ("docs/completion/_rangeget", ["help", "--completion", "zsh"])
        ] {
            let committed = try String(contentsOf: CLI.repositoryRoot.appendingPathComponent(file), encoding: .utf8)
            let generated = try CLI.run(arguments, in: directory).stdout
            XCTAssertEqual(committed, generated, "\(file) is stale: regenerate with make docs")
            for option in options {
                let spelled = file.hasSuffix(".1") ? option.replacingOccurrences(of: "-", with: "\\-") : option
                XCTAssertTrue(committed.contains(spelled), "\(file) lists \(option)")
            }
        }
        // Each zsh spec is one single-quoted word: the quotes and colon of
        // --header's placeholder 'NAME: VALUE' used to split its spec in two.
        let zsh = try CLI.run(["help", "--completion", "zsh"], in: directory).stdout
        for line in zsh.split(separator: "\n") where line.hasPrefix("        '") {
            XCTAssertNotNil(line.wholeMatch(of: /\s+'[^']*'( \\| ;;)?/), String(line))
        }
        let serveHelp = try CLI.run(["help", "serve"], in: directory)
        XCTAssertEqual(serveHelp.status, 0)
        XCTAssertTrue(serveHelp.stdout.contains("--rate-per-connection"))
        XCTAssertTrue(serveHelp.stdout.contains("--burst"))
        XCTAssertEqual(try CLI.run(["help", "nonsense"], in: directory).status, 2)
    }

    func testBenchRanksMirrorsAndFlagsOneServingOtherBytes() throws {
        let good = Resource.generated(size: 4 << 20, seed: 86)
        let other = try anotherServer()
        server.setResource(good, at: "f")
        server.setResource(Resource.generated(size: 4 << 20, seed: 87), at: "wrong")
        other.setResource(good, at: "f")
        other.setRatePerConnection(1 << 20)
        let run = try CLI.run(
            [
                "bench", "--json", "--seconds", "0.5", "-n", "2",
                server.url("f"), other.url("f"), server.url("wrong")
            ], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try run.jsonObject()
        let mirrors = try XCTUnwrap(report["mirrors"] as? [[String: Any]])
        XCTAssertEqual(mirrors.count, 3)
        XCTAssertEqual(mirrors[0]["sameBytes"] as? Bool, true)
        XCTAssertEqual(mirrors[1]["sameBytes"] as? Bool, true)
        XCTAssertEqual(mirrors[2]["sameBytes"] as? Bool, false, "the mirror with other content is flagged")
        XCTAssertEqual(mirrors[1]["server"] as? String, "RangeServer")
        XCTAssertGreaterThan(
            mirrors[0]["manyConnections"] as? Double ?? 0, mirrors[1]["manyConnections"] as? Double ?? 0)
        let recommended = try XCTUnwrap((report["recommendation"] as? [String: Any])?["mirrors"] as? [String])
        XCTAssertFalse(recommended.contains(server.url("wrong")))
        XCTAssertEqual(recommended.first, server.url("f"))
        let table = try CLI.run(["bench", "--seconds", "0.3", server.url("f"), other.url("f")], in: directory)
        XCTAssertTrue(table.stdout.contains("recommendation: rangeget"), table.stdout)
        let split = try CLI.run(["bench", "--seconds", "0.3", server.url("f"), server.url("wrong")], in: directory)
        XCTAssertTrue(split.stdout.contains("no majority"), split.stdout)
    }

    /// A sample counts only as a usable answer for the file the mirror's probe
    /// found: one whose Content-Range names another total, or that comes
    /// gzip-coded, is flagged like other bytes. (Both were digested as they
    /// came, so a mirror whose ranges the engine would refuse looked the same.)
    func testBenchFlagsAMirrorWhoseSamplesAreNoUsableAnswer() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 88)
        server.setResource(resource, at: "f")
        server.setResource(resource, at: "g")
        for fault in [Fault.wrongContentRangeTotal((1 << 20) + 1), .gzipEncoding] {
            let other = try anotherServer()
            other.setResource(resource, at: "f")
            // Its requests: HEAD (the probe), GET 0-0 (time to first byte), then the sample.
            other.setFaults([FaultRule(fault, when: .fromRequest(3))])
            let run = try CLI.run(
                [
                    "bench", "--json", "--seconds", "0.2", "-n", "2", "--samples", "1",
                    server.url("f"), server.url("g"), other.url("f")
                ], in: directory, timeout: 60)
            XCTAssertEqual(run.status, 0, "\(fault): \(run.stderr)")
            let mirrors = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]])
            XCTAssertEqual(mirrors.map { $0["sameBytes"] as? Bool }, [true, true, false], "\(fault)")
        }
    }

    /// Issue 11: bench recommended a fast and a slow mirror together, though
    /// with both capped per connection the fast one alone is faster on the
    /// same connections. It also reports how the rate behaves and the TCP
    /// connections the N-connection measurement opened.
    func testBenchRecommendsOnlyTheFastMirrorWhenBothCapEachConnection() throws {
        let resource = Resource.generated(size: 64 << 20, seed: 89)
        let slow = RangeServer(configuration: .init(ratePerConnection: 1_000_000))
        try slow.start()
        defer { slow.stop() }
        server.setResource(resource, at: "f")
        server.setRatePerConnection(8_000_000)
        slow.setResource(resource, at: "f")
        let run = try CLI.run(
            ["bench", "--json", "--seconds", "0.5", "-n", "4", slow.url("f"), server.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = try run.jsonObject()
        let mirrors = try XCTUnwrap(report["mirrors"] as? [[String: Any]])
        XCTAssertEqual(mirrors.count, 2)
        for mirror in mirrors {
            XCTAssertEqual(mirror["limit"] as? String, "per-connection", run.stdout)
            XCTAssertEqual(mirror["tcpConnections"] as? Int, 4, "one per connection on HTTP/1.1: \(run.stdout)")
            XCTAssertEqual(mirror["httpVersion"] as? String, "1.1")
        }
        let recommendation = try XCTUnwrap(report["recommendation"] as? [String: Any])
        XCTAssertEqual(recommendation["mirrors"] as? [String], [server.url("f")], run.stdout)
        XCTAssertEqual(recommendation["connections"] as? Int, 4, run.stdout)
        XCTAssertTrue((recommendation["reason"] as? String ?? "").contains("per connection"), run.stdout)
    }

    /// Issue 37: bench took 27 s by default for 3 mirrors and split two
    /// identical mirrors 1 and 7 connections. Now the default run of three
    /// takes at most 10 s, says what it measures as it goes, and gives equal
    /// mirrors equal shares (within one connection); `--runs` reports the spread.
    func testBenchOfThreeMirrorsIsQuickAndSharesEquallyBetweenEqualMirrors() throws {
        let resource = Resource.generated(size: 64 << 20, seed: 90)
        let twin = try anotherServer()
        let slow = try anotherServer()
        for (mirror, rate) in [(server, 2 << 20), (twin, 2 << 20), (slow, 512 << 10)] as [(RangeServer, Int)] {
            mirror.setResource(resource, at: "f")
            mirror.setRatePerConnection(rate)
        }
        let started = Date()
        let run = try CLI.run(
            ["bench", "--json", server.url("f"), twin.url("f"), slow.url("f")], in: directory, timeout: 30)
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertLessThanOrEqual(elapsed, 10, "the default bench of three mirrors")
        XCTAssertTrue(run.stderr.contains("measuring \(twin.url("f")) on 8 connections"), run.stderr)
        let recommendation = try XCTUnwrap(try run.jsonObject()["recommendation"] as? [String: Any])
        let mirrors = try XCTUnwrap(recommendation["mirrors"] as? [String])
        let shares = try XCTUnwrap(recommendation["connectionsPerMirror"] as? [Int])
        let share = { (url: String) in mirrors.firstIndex(of: url).map { shares[$0] } ?? 0 }
        XCTAssertLessThanOrEqual(abs(share(server.url("f")) - share(twin.url("f"))), 1, "\(recommendation)")
        XCTAssertEqual(share(slow.url("f")), 0, "a connection adds 4 times more on either twin: \(recommendation)")

        let repeated = try CLI.run(
            [
                "bench", "--json", "--seconds", "0.3", "--runs", "3", "-n", "2", "--samples", "1",
                server.url("f")
            ], in: directory, timeout: 30)
        XCTAssertEqual(repeated.status, 0, repeated.stderr)
        let measured = try XCTUnwrap((try repeated.jsonObject()["mirrors"] as? [[String: Any]])?.first)
        XCTAssertEqual((measured["manyConnectionsRuns"] as? [Double])?.count, 3, "\(measured)")
        XCTAssertEqual((measured["oneConnectionRuns"] as? [Double])?.count, 3, "\(measured)")
        let table = try CLI.run(
            ["bench", "--seconds", "0.3", "--runs", "2", "-n", "2", "--samples", "1", server.url("f")],
            in: directory, timeout: 30)
        XCTAssertTrue(table.stdout.contains(" ±"), "the table shows the spread: \(table.stdout)")
    }

    func testChecksumIsVerifiedBeforeTheFileIsRenamedIntoPlace() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 88)
        server.setResource(resource, at: "f")
        let digest = try sha256(of: resource)
        let good = try CLI.run(
            ["-q", "--checksum", "sha256=\(digest.uppercased())", "-o", path("good"), server.url("f")],
            in: directory)
        XCTAssertEqual(good.status, 0, good.stderr)
        assertSameBytes(path("good"), resource)

        let wrong = String(repeating: "0", count: 64)
        let bad = try CLI.run(
            ["-q", "--checksum", "sha256=\(wrong)", "-o", path("bad"), server.url("f")], in: directory)
        XCTAssertEqual(bad.status, 3, bad.stderr)
        XCTAssertTrue(bad.stderr.contains("expected \(wrong)"), bad.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("bad")), "no file under the final name")
        assertSameBytes(path("bad.part"), resource)

        XCTAssertEqual(try CLI.run(["--checksum", "sha256=abc", server.url("f")], in: directory).status, 2)

        server.setResource(Resource.generated(size: 1000, seed: 89), at: "g")
        let sums = "\(digest)  f\n\(wrong) *g\n"
        try sums.write(toFile: path("SHA256SUMS"), atomically: true, encoding: .utf8)
        try "\(server.url("f"))\n\(server.url("g"))\n".write(toFile: path("list"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
        let list = try CLI.run(
            ["-q", "-d", path("out"), "-i", path("list"), "--checksum-file", path("SHA256SUMS")],
            in: directory)
        XCTAssertEqual(list.status, 3, "g fails its checksum: \(list.stderr)")
        assertSameBytes(path("out/f"), resource)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("out/g")))
    }
}
