// Mirrors a server lists (Metalink/HTTP, RFC 6249): a `Link: <URL>;
// rel=duplicate` header on the first URL's response adds that mirror as if
// it had been named, probed and compared the same way. A listed mirror
// serving other bytes of the same size is dropped before any of its bytes
// are written; a listed mirror's own links are never followed; a download
// in a list (the session's loop, whose opening request gives up its slot)
// discovers too; `--no-discovery` and `discovery = false` use only the URL
// given.
import Foundation
import RangeGet
import RangeServer
import XCTest

final class DuplicateLinksEndToEndTests: EndToEndTestCase {
    private let resource = Resource.generated(size: 6 << 20, seed: 6249)

    /// Each server's responses for `f` carry `Link: <each of links>; rel=duplicate`.
    private func link(_ server: RangeServer, to mirrors: [RangeServer], path: String = "f") {
        let value = mirrors.enumerated().map { "<\($1.url(path))>; rel=duplicate; pri=\($0 + 1)" }
        server.setFaults([FaultRule(.header(name: "Link", value: value.joined(separator: ", ")))])
    }

    /// `count` more servers serving `resource` at `f`, each capped at 4 MiB/s a connection, as is `server`.
    private func mirrors(_ count: Int) throws -> [RangeServer] {
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        return try (0..<count).map { _ in
            let mirror = try anotherServer()
            mirror.setResource(resource, at: "f")
            mirror.setRatePerConnection(4 << 20)
            return mirror
        }
    }

    private func reports(_ run: Run) throws -> [[String: Any]] {
        try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]], run.stdout)
    }

    func testAMirrorTheServerListsIsUsedWithoutBeingNamed() throws {
        let listed = try mirrors(1)[0]
        link(server, to: [listed])
        let run = try CLI.run(
            ["--json", "-n", "4", "--min-split", "512K", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        XCTAssertTrue(run.stderr.contains("mirror \(listed.url("f")) from Link: rel=duplicate"), run.stderr)
        let reports = try reports(run)
        XCTAssertEqual(reports.map { $0["url"] as? String }, [server.url("f"), listed.url("f")])
        XCTAssertTrue(reports[0]["discoveredIn"] is NSNull, "\(reports)")
        XCTAssertEqual(reports[1]["discoveredIn"] as? String, "Link: rel=duplicate")
        for report in reports {
            XCTAssertNil(report["dropped"] as? String, "\(reports)")
            XCTAssertGreaterThan(report["bytes"] as? Int ?? 0, 0, "bytes from each: \(reports)")
        }
        XCTAssertGreaterThan(listed.statistics.bodyBytesSent, 1 << 20, "the listed mirror served a share")

        // A rerun finds the file complete: nothing fetched, no mirror probed.
        let asked = listed.statistics.requests.count
        let again = try CLI.run(["-n", "4", "--min-split", "512K", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertFalse(again.stderr.contains("rel=duplicate"), again.stderr)
        XCTAssertEqual(listed.statistics.requests.count, asked)

        // The summary line marks it.
        try FileManager.default.removeItem(atPath: path("f"))
        let plain = try CLI.run(["-n", "4", "--min-split", "512K", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertTrue(plain.stderr.contains("(discovered)"), plain.stderr)
    }

    /// Three listed mirrors agreeing on another file of the same size
    /// (only the sampled bytes tell) outnumber the URL given and a good
    /// listed mirror, yet they never vote: they are dropped, the good one kept.
    func testListedMirrorsServingOtherBytesAreDroppedBeforeAnyOfThemIsWritten() throws {
        let servers = try mirrors(4)
        let (good, bad) = (servers[0], Array(servers[1...]))
        for server in bad { server.setResource(Resource.generated(size: resource.size, seed: 6250), at: "f") }
        link(server, to: bad + [good])
        let run = try CLI.run(
            ["--json", "-n", "6", "--min-split", "512K", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        let reports = try reports(run)
        XCTAssertEqual(reports.count, 5, "\(reports)")
        for mirror in bad {
            let report = try XCTUnwrap(reports.first { $0["url"] as? String == mirror.url("f") })
            XCTAssertTrue((report["dropped"] as? String ?? "").contains("differ"), "\(report)")
            XCTAssertEqual(report["bytes"] as? Int, 0)
            XCTAssertTrue(run.stderr.contains("dropping mirror \(mirror.url("f"))"), run.stderr)
            // The probe and the four 16 KiB samples, nothing of the file's pieces.
            XCTAssertLessThanOrEqual(mirror.statistics.bodyBytesSent, 4 * (16 << 10) + 1)
        }
        let goodReport = try XCTUnwrap(reports.first { $0["url"] as? String == good.url("f") })
        XCTAssertTrue(goodReport["dropped"] is NSNull, "\(goodReport)")
        XCTAssertGreaterThan(good.statistics.bodyBytesSent, 1 << 20)
    }

    func testAListedMirrorsOwnLinksAreNotFollowed() throws {
        let servers = try mirrors(2)
        let (listed, further) = (servers[0], servers[1])
        link(server, to: [listed])
        link(listed, to: [further, server])
        let run = try CLI.run(
            ["--json", "-n", "4", "--min-split", "512K", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(try reports(run).count, 2)
        XCTAssertEqual(further.statistics.requests.count, 0, "a mirror's own list is not read")
    }

    /// A listed mirror that never answers holds the start up for the
    /// discovery's 5 s, not for a probe's timeouts (HEAD, then a ranged GET:
    /// 20 s and more), and is dropped without failing the run.
    func testAListedMirrorThatNeverAnswersIsDroppedAfterFiveSeconds() throws {
        let listed = try mirrors(1)[0]
        listed.setFaults([FaultRule(.hang)])
        link(server, to: [listed])
        let started = Date()
        let run = try CLI.run(
            ["--json", "-n", "4", "--min-split", "512K", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertLessThan(Date().timeIntervalSince(started), 12)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        let reports = try reports(run)
        XCTAssertEqual(reports.count, 2)
        XCTAssertEqual(reports[1]["dropped"] as? String, "no answer to its probe within 5 s")
    }

    func testNoDiscoveryUsesOnlyTheURLGiven() throws {
        let listed = try mirrors(1)[0]
        link(server, to: [listed])
        let run = try CLI.run(
            ["--json", "--no-discovery", "-n", "4", "--min-split", "512K", "-o", path("f"), server.url("f")],
            in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(try reports(run).count, 1)
        XCTAssertEqual(listed.statistics.requests.count, 0)

        let library = runLibrary([server.url("f")], to: path("g")) {
            $0.connections = 4
            $0.minimumSplit = 512 << 10
            $0.discovery = false
        }
        XCTAssertNil(library.error)
        assertSameBytes(path("g"), resource)
        XCTAssertEqual(listed.statistics.requests.count, 0)
    }

    /// A header the user gave for the URL (a token) must not reach a host
    /// a server's list names: mirrors of other origins are not used then.
    func testAHeaderForTheURLGivenKeepsListedMirrorsElsewhereOut() throws {
        let listed = try mirrors(1)[0]
        link(server, to: [listed])
        let run = try CLI.run(
            [
                "--json", "-H", "Authorization: Bearer secret", "-n", "4", "--min-split", "512K", "-o", path("f"),
                server.url("f")
            ], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        XCTAssertTrue(run.stderr.contains("1 mirror(s) from Link: rel=duplicate not used"), run.stderr)
        XCTAssertEqual(try reports(run).count, 1)
        XCTAssertEqual(listed.statistics.requests.count, 0)
    }

    func testTheLibraryReportsAListedMirrorAndNamesItInANotice() throws {
        let listed = try mirrors(1)[0]
        link(server, to: [listed])
        let library = runLibrary([server.url("f")], to: path("f")) {
            $0.connections = 4
            $0.minimumSplit = 512 << 10
        }
        let result = try library.result.get()
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(result.mirrors.map(\.discoveredIn), [nil, "Link: rel=duplicate"])
        XCTAssertGreaterThan(result.mirrors[1].bytes, 0)
        let notices = library.events.compactMap { event -> String? in
            if case let .notice(text) = event { return text }
            return nil
        }
        XCTAssertEqual(notices, ["mirror \(listed.url("f")) from Link: rel=duplicate"])
    }

    /// A file streamed to stdout (`-o -`) takes the listed mirror too.
    func testAStreamToStdoutUsesAListedMirrorToo() throws {
        let listed = try mirrors(1)[0]
        link(server, to: [listed])
        let child = try Child(
            executable: CLI.binary, arguments: ["-n", "4", "--min-split", "512K", "-o", "-", server.url("f")],
            in: directory)
        XCTAssertTrue(wait(timeout: 60) { !child.isRunning }, "the stream did not end within 60 s")
        try FileManager.default.copyItem(atPath: child.stdoutURL.path, toPath: path("streamed"))
        let run = child.finish(timeout: 1)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("streamed"), resource)
        XCTAssertTrue(run.stderr.contains("mirror \(listed.url("f")) from Link: rel=duplicate"), run.stderr)
        XCTAssertGreaterThan(listed.statistics.bodyBytesSent, 1 << 20)
    }

    /// In a list the files share the session's loop, and an opening request
    /// holds a connection slot: with two files on two connections both
    /// openings hold every slot, so a file that probes its listed mirror
    /// gives its opening up first (else both would wait for ever).
    func testAFileOfAListUsesTheMirrorsItsServerListsToo() throws {
        let listed = try mirrors(1)[0]
        // Faults are a server's, not a path's: the second file has an origin of its own.
        let origin = try anotherServer()
        let second = Resource.generated(size: 3 << 20, seed: 6251)
        origin.setResource(second, at: "g")
        listed.setResource(second, at: "g")
        link(server, to: [listed])
        link(origin, to: [listed], path: "g")
        try "\(server.url("f"))\n\(origin.url("g"))\n".write(toFile: path("list"), atomically: true, encoding: .utf8)
        let run = try CLI.run(
            ["--json", "-n", "2", "--min-split", "512K", "-d", path("out"), "-i", path("list")], in: directory,
            timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("out/f"), resource)
        assertSameBytes(path("out/g"), second)
        let files = try run.jsonLines().files
        XCTAssertEqual(files.count, 2)
        for file in files {
            let mirrors = try XCTUnwrap(file["mirrors"] as? [[String: Any]])
            XCTAssertEqual(mirrors.count, 2, "\(mirrors)")
            XCTAssertEqual(mirrors.last?["discoveredIn"] as? String, "Link: rel=duplicate")
            XCTAssertTrue(mirrors.last?["dropped"] is NSNull, "probed in time, not dropped: \(mirrors)")
        }
    }
}
