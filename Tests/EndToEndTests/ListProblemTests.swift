// Issue 37, item 2: a list forgives. One bad line aborted the whole list
// (exit 2, nothing downloaded) and only the first was named, so a user fixed
// and reran line by line. Every bad line is now reported at once, with its
// number and reason, the good entries are downloaded, and the run exits with
// the code of its first failed entry in list order (a bad line's is 2).
import Foundation
import RangeGet
import RangeServer
import XCTest

@testable import rangeget

final class ListProblemTests: EndToEndTestCase {
    func testBadLinesAreReportedAtOnceAndTheGoodEntriesDownloaded() throws {
        var lines: [String] = []
        var resources: [String: Resource] = [:]
        for index in 0..<20 {
            let resource = Resource.generated(size: Int64(1000 + index * 997), seed: UInt64(3700 + index))
            server.setResource(resource, at: "g\(index)")
            resources["g\(index)"] = resource
            lines.append(server.url("g\(index)"))
        }
        // Bad lines 3, 9 and 16 (1-based): not a URL, an unknown option, a
        // name that is no file name on an option line (which leaves out the
        // file above it: it would not be saved under the name asked for).
        lines.insert("ftp://example.org/x", at: 2)
        lines.insert(server.url("g7") + "x dir=elsewhere", at: 8)
        lines.insert("  out=..", at: 15)
        let left = URL(string: lines[14])!.lastPathComponent
        XCTAssertTrue(lines[14].hasPrefix("http"), "the line above the bad option line is an entry")
        try lines.joined(separator: "\n").write(toFile: path("list"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)

        let run = try CLI.run(["-n", "4", "-d", path("out"), "-i", path("list")], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 2, "a bad line is the first failure in list order: \(run.stderr)")
        let expected = [
            "rangeget: failed: input line 3: not an http or https URL: 'ftp://example.org/x'",
            "rangeget: failed: input line 9: unknown option 'dir=elsewhere' (only out=NAME is known)",
            "rangeget: failed: input line 16: out=.. is not a usable file name; the file of input line 15 is left out"
        ]
        let stderrLines = run.stderr.split(separator: "\n").map(String.init)
        XCTAssertEqual(Array(stderrLines.prefix(3)), expected, "every bad line at once, before any download")
        XCTAssertTrue(
            run.stderr.contains("rangeget: 19 of 22 files downloaded; failed: 3 bad lines of the list"), run.stderr)
        XCTAssertEqual(run.stdout, "", "nothing for people on stdout")
        for (name, resource) in resources where name != left {
            assertSameBytes(path("out/\(name)"), resource)
        }
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: path("out/\(left)")), "the file whose name was bad is left out")

        let json = try CLI.run(["--json", "-n", "4", "-d", path("out"), "-i", path("list")], in: directory, timeout: 60)
        XCTAssertEqual(json.status, 2, json.stderr)
        let (files, summary) = try json.jsonLines()
        let bad = files.filter { ($0["exitCode"] as? Int) == 2 }
        XCTAssertEqual(bad.compactMap { $0["line"] as? Int }, [3, 9, 16], "\(bad)")
        XCTAssertEqual(
            bad.first?["error"] as? String, expected[0].replacingOccurrences(of: "rangeget: failed: ", with: ""))
        XCTAssertEqual(summary["badLines"] as? Int, 3)
        XCTAssertEqual(summary["failed"] as? Int, 3)
        XCTAssertEqual(summary["fileCount"] as? Int, 22)
        XCTAssertEqual(files.filter { ($0["outcome"] as? String) == "complete" }.count, 19)
    }

    /// The first failure in list order decides the code, not the first to end.
    func testTheFirstFailedEntryInListOrderDecidesTheExitCode() throws {
        server.setResource(Resource.generated(size: 5000, seed: 3731), at: "ok")
        let lines = [server.url("missing"), "notaurl", server.url("ok")]
        try lines.joined(separator: "\n").write(toFile: path("list"), atomically: true, encoding: .utf8)
        let run = try CLI.run(
            ["-q", "--retries", "0", "-d", path("out"), "-i", path("list")], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 1, "line 1 (HTTP 404) fails first in list order: \(run.stderr)")
        assertSameBytes(path("out/ok"), Resource.generated(size: 5000, seed: 3731))
        let onlyBad = try CLI.run(["-q", "-d", path("out"), "-i", path("list2")], in: directory)
        XCTAssertEqual(onlyBad.status, 2, "a list that cannot be read: \(onlyBad.stderr)")
        try "notaurl\n# nothing else\n".write(toFile: path("list3"), atomically: true, encoding: .utf8)
        let allBad = try CLI.run(["-q", "-d", path("out"), "-i", path("list3")], in: directory)
        XCTAssertEqual(allBad.status, 2, allBad.stderr)
        XCTAssertEqual(allBad.stderr, "rangeget: failed: input line 1: not an http or https URL: 'notaurl'\n")
    }

    /// Ctrl-C outranks a bad line: a script waits for 130 after it, whatever failed before.
    func testAnInterruptedListExits130WhateverFailedBefore() throws {
        server.setResource(Resource.generated(size: 8 << 20, seed: 3732), at: "slow")
        server.setRatePerConnection(1 << 20)
        try "notaurl\n\(server.url("slow"))\n".write(toFile: path("list"), atomically: true, encoding: .utf8)
        let run = try interrupted(["-q", "-n", "2", "-d", path("out"), "-i", path("list")]) {
            claimedBytes(path("out/slow.part.json")) > 0
        }
        XCTAssertEqual(run.status, 130, run.stderr)
        XCTAssertTrue(run.stderr.contains("input line 1: not an http or https URL: 'notaurl'"), run.stderr)
    }

    /// Reading alone: each bad line once, its entry and its option lines left out, the rest kept.
    func testReadingAListKeepsEveryGoodEntry() {
        let reading = ListFile(
            parsing: """
                http://h/a
                  out=a.bin
                notaurl
                  out=ignored.bin
                http://h/b out=b.bin bad=1
                http://h/c
                  out=../..
                  out=c.bin
                http://h/d
                """)
        XCTAssertEqual(reading.entries.map(\.urls), [["http://h/a"], ["http://h/d"]])
        XCTAssertEqual(reading.entries.map(\.output), ["a.bin", nil])
        XCTAssertEqual(reading.problems.map(\.line), [3, 5, 7])
        XCTAssertEqual(
            reading.problems.last?.message,
            "input line 7: out=../.. is not a usable file name; the file of input line 6 is left out")
    }
}
