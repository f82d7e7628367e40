// Issue 14: a partial download belongs to the file, not to the first URL it
// was started from. The mirrors given again in another order, or a subset of
// them, resume it; a URL it does not record resumes it only when it proves to
// serve the same file, and is refused (exit 4, the partial kept) otherwise.
import Foundation
import RangeServer
import XCTest

final class MirrorResumeTests: EndToEndTestCase {
    private let size: Int64 = 16 << 20

    /// Another server on 127.0.0.1 serving `resource` at `f`.
    private func mirror(serving resource: Resource) throws -> RangeServer {
        let mirror = try anotherServer()
        mirror.setResource(resource, at: "f")
        return mirror
    }

    /// Starts `urls` throttled, interrupts it with SIGINT once progress is
    /// durable; returns the ranges it had done.
    private func interrupted(_ urls: [String], _ servers: [RangeServer], output: String) throws -> [Range<Int64>] {
        for server in servers { server.setRatePerConnection(1 << 20) }
        let stopped = try interrupted(["-q", "-n", "4", "-o", output] + urls, once: "progress was saved") {
            ManifestFile.doneBytes(output + ".part.json") >= 2 << 20
        }
        XCTAssertEqual(stopped.status, 130)
        for server in servers {
            server.setRatePerConnection(nil)
            server.resetStatistics()
        }
        return ManifestFile.done(output + ".part.json")
    }

    func testTheMirrorsInAnotherOrderOrASubsetOfThemResume() throws {
        let resource = Resource.generated(size: size, seed: 1401)
        server.setResource(resource, at: "f")
        let other = try mirror(serving: resource)
        let output = path("f")

        let done = try interrupted([other.url("f"), server.url("f")], [server, other], output: output)
        let reordered = try CLI.run(["-n", "4", "-o", output, server.url("f"), other.url("f")], in: directory)
        XCTAssertEqual(reordered.status, 0, reordered.stderr)
        XCTAssertTrue(reordered.stderr.contains("resuming"), reordered.stderr)
        XCTAssertFalse(reordered.stderr.contains("starting over"), reordered.stderr)
        assertSameBytes(output, resource)
        assertNotAskedAgain(done, in: server.requestedRanges + other.requestedRanges, saved: "by the partial download")

        try FileManager.default.removeItem(atPath: output)
        let first = try interrupted([server.url("f"), other.url("f")], [server, other], output: output)
        let subset = try CLI.run(["-n", "4", "-o", output, other.url("f")], in: directory)
        XCTAssertEqual(subset.status, 0, subset.stderr)
        XCTAssertTrue(subset.stderr.contains("resuming"), subset.stderr)
        assertSameBytes(output, resource)
        assertNotAskedAgain(first, in: other.requestedRanges, saved: "by the partial download")
    }

    /// A URL the manifest does not record, with the same size and strong
    /// ETag, serves the same file: it resumes it, and the manifest records it.
    /// One with another ETag serves another file: refused, the partial kept.
    func testAnotherURLResumesOnlyWithTheSameStrongETag() throws {
        let resource = Resource.generated(size: size, seed: 1402)
        server.setResource(resource, at: "f")
        let output = path("f")
        let done = try interrupted([server.url("f")], [server], output: output)

        var changed = Resource.generated(size: size, seed: 1403)
        changed.etag = "\"another-version\""
        let stranger = try mirror(serving: changed)
        let refused = try CLI.run(["-q", "-n", "4", "-o", output, stranger.url("f")], in: directory)
        XCTAssertEqual(refused.status, 4, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("was started from \(server.url("f"))"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--restart"), refused.stderr)
        XCTAssertEqual(ManifestFile.done(output + ".part.json"), done, "the partial download is kept for its own URL")

        let same = try mirror(serving: resource)
        let resumed = try CLI.run(["-n", "4", "-o", output, same.url("f")], in: directory)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertTrue(resumed.stderr.contains("resuming"), resumed.stderr)
        assertSameBytes(output, resource)
        assertNotAskedAgain(done, in: same.requestedRanges, saved: "by the partial download")
    }

    /// Without a strong ETag on either side, a URL the manifest does not
    /// record must serve the same bytes at a few random places of those on
    /// disk: the same file resumes, another of the same size is refused.
    func testAnotherURLWithoutAnETagResumesOnlyWhenItsBytesMatch() throws {
        var resource = Resource.generated(size: size, seed: 1404)
        resource.etag = nil
        server.setResource(resource, at: "f")
        let output = path("f")
        let done = try interrupted([server.url("f")], [server], output: output)

        var other = Resource.generated(size: size, seed: 1405)
        other.etag = nil
        let stranger = try mirror(serving: other)
        let refused = try CLI.run(["-q", "-n", "4", "-o", output, stranger.url("f")], in: directory)
        XCTAssertEqual(refused.status, 4, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("serves other bytes"), refused.stderr)
        XCTAssertEqual(ManifestFile.done(output + ".part.json"), done)

        let same = try mirror(serving: resource)
        let resumed = try CLI.run(["-n", "4", "-o", output, same.url("f")], in: directory)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertTrue(resumed.stderr.contains("resuming"), resumed.stderr)
        assertSameBytes(output, resource)
    }
}
