// Issue 36: mirrors are judged by their bytes, not their validators. Two
// servers with the same bytes under different ETags (nginx makes its ETag
// from the file's modification time) are both used; a mirror serving another
// file of the same size is dropped before any of its bytes reach the file,
// and the message names the sampled ranges that differ; the bytes most
// mirrors serve win, even over the first mirror's.
import Foundation
import Glibc
import RangeServer
import XCTest

final class MirrorVoteTests: EndToEndTestCase {
    private let resource = Resource.generated(size: 8 << 20, seed: 3610)

    /// `resource` served under `etag`, or another file of its size (`seed`).
    private func served(etag: String, seed: UInt64? = nil) -> Resource {
        var served = seed.map { Resource.generated(size: resource.size, seed: $0) } ?? resource
        served.etag = etag
        return served
    }

    private func mirrors(_ run: Run) throws -> [[String: Any]] {
        try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]], run.stdout)
    }

    /// The run saved the right file with bytes from each of its two mirrors, neither dropped.
    private func assertBothMirrorsServed(_ run: Run, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(run.status, 0, run.stderr, file: file, line: line)
        assertSameBytes(path("f"), resource, file: file, line: line)
        let reports = try mirrors(run)
        XCTAssertEqual(reports.count, 2, file: file, line: line)
        for report in reports {
            XCTAssertNil(report["dropped"] as? String, "\(reports)", file: file, line: line)
            XCTAssertGreaterThan(
                report["bytes"] as? Int ?? 0, 0, "bytes from each mirror: \(reports)", file: file, line: line)
        }
    }

    func testMirrorsWithTheSameBytesUnderDifferentETagsAreBothUsed() throws {
        let other = try anotherServer()
        server.setResource(served(etag: "\"6b13bf38-800000\""), at: "f")
        other.setResource(served(etag: "\"6b13be57-800000\""), at: "f")
        server.setRatePerConnection(4 << 20)
        other.setRatePerConnection(4 << 20)
        let run = try CLI.run(["--json", "-n", "4", "-o", path("f"), server.url("f"), other.url("f")], in: directory)
        try assertBothMirrorsServed(run)
    }

    /// The case as a user met it: two real nginx serving one file whose
    /// copies have other modification times, so their ETags differ
    /// ("6b13bf38-..." against "6b13be57-..."). Both are used.
    func testTwoNginxWithTheSameBytesAndDifferentETagsAreBothUsed() throws {
        let first = try startNginx(rateLimit: 4 << 20)
        let second = try startNginx(rateLimit: 4 << 20)
        for (nginx, seconds) in [(first, 1_700_000_000), (second, 1_700_000_321)] {
            try nginx.serve(resource, at: "f")
            var times = [timeval(tv_sec: seconds, tv_usec: 0), timeval(tv_sec: seconds, tv_usec: 0)]
            XCTAssertEqual(utimes(nginx.prefix + "/files/f", &times), 0)
        }
        let authorities =
            try String(contentsOfFile: first.certificate, encoding: .utf8)
            + String(contentsOfFile: second.certificate, encoding: .utf8)
        try authorities.write(toFile: path("ca.pem"), atomically: true, encoding: .utf8)
        let run = try CLI.run(
            [
                "--json", "-n", "4", "--cacert", path("ca.pem"), "-o", path("f"), first.url("f"),
                second.url("f")
            ], in: directory, timeout: 60)
        try assertBothMirrorsServed(run)
        // nginx's ETag is the modification time and the size, in hex.
        let etags = try [first, second].map { nginx in
            let head = try CLI.run(["-skI", nginx.url("f")], in: directory, executable: "/usr/bin/curl").stdout
            return head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("etag:") }.map { $0.lowercased() }
        }
        XCTAssertEqual(etags, ["etag: \"6553f100-800000\"", "etag: \"6553f241-800000\""])
    }

    func testAMirrorServingAnotherFileOfTheSameSizeIsDroppedBeforeAnyByteIsWritten() throws {
        let other = try anotherServer()
        server.setResource(served(etag: "\"a\""), at: "f")
        other.setResource(served(etag: "\"b\"", seed: 3611), at: "f")
        let run = try CLI.run(["--json", "-n", "4", "-o", path("f"), server.url("f"), other.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        let reports = try mirrors(run)
        let dropped = try XCTUnwrap(reports[1]["dropped"] as? String, "\(reports)")
        XCTAssertTrue(
            dropped.contains("its bytes ") && dropped.contains(" differ from those \(server.url("f"))"), dropped)
        XCTAssertEqual(reports[1]["bytes"] as? Int, 0, "\(reports)")
        XCTAssertTrue(run.stderr.contains("dropping mirror \(other.url("f")): its bytes "), run.stderr)
    }

    /// Three mirrors, the first serving another file: the two that agree win.
    func testTheBytesMostMirrorsServeWinOverTheFirstMirror() throws {
        let second = try anotherServer()
        let third = try anotherServer()
        server.setResource(served(etag: "\"odd\"", seed: 3612), at: "f")
        second.setResource(served(etag: "\"x\""), at: "f")
        third.setResource(served(etag: "\"y\""), at: "f")
        let run = try CLI.run(
            ["--json", "-n", "4", "-o", path("f"), server.url("f"), second.url("f"), third.url("f")],
            in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        let reports = try mirrors(run)
        XCTAssertNotNil(reports[0]["dropped"] as? String, "\(reports)")
        XCTAssertEqual(reports[0]["bytes"] as? Int, 0, "\(reports)")
        XCTAssertNil(reports[1]["dropped"] as? String, "\(reports)")
        XCTAssertNil(reports[2]["dropped"] as? String, "\(reports)")
    }

    /// The seeded soak's case: three mirrors of an empty file, the first
    /// claiming (in a 200 to the probe) a length of 537395601464 bytes. Its
    /// claim set the size, the others were dropped, and the run ended with
    /// "cannot store 537395601464 bytes ... No space left on device". The
    /// size most mirrors report wins; the liar is dropped.
    func testTheSizeMostMirrorsReportWinsOverOneMirrorsClaim() throws {
        let empty = Resource.generated(size: 0, seed: 3613)
        let second = try anotherServer()
        let third = try anotherServer()
        for mirror in [server!, second, third] { mirror.setResource(empty, at: "f") }
        server.setFaults([FaultRule(.claimLength("537395601464"))])
        let run = try CLI.run(
            ["--json", "-n", "8", "-o", path("f"), server.url("f"), second.url("f"), third.url("f")],
            in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), empty)
        let reports = try mirrors(run)
        let dropped = try XCTUnwrap(reports[0]["dropped"] as? String, "\(reports)")
        XCTAssertTrue(dropped.contains("537395601464"), dropped)
        XCTAssertNil(reports[1]["dropped"] as? String, "\(reports)")
        XCTAssertNil(reports[2]["dropped"] as? String, "\(reports)")
    }
}
