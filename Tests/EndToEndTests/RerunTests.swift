// Issue 14: resume works in every workflow, the rerun of a list included.
// Running a list again skips the files that are complete and still the
// server's (a HEAD each, a line saying so, `alreadyComplete` in --json),
// resumes the partial one, and exits 0; a finished file the server has
// changed since is replaced only with --force. A finished file keeps its
// URL and validators as extended attributes, and a rerun compares them.
import Foundation
import Glibc
import RangeServer
import XCTest

final class RerunTests: EndToEndTestCase {
    /// Serves the list's third file, throttled so that it is still partial
    /// when the two others are saved.
    private var slow: RangeServer!
    private let first = Resource.generated(size: 2 << 20, seed: 1420)
    private let second = Resource.generated(size: 2 << 20, seed: 1421)
    private let third = Resource.generated(size: 8 << 20, seed: 1422)

    override func setUpWithError() throws {
        try super.setUpWithError()
        slow = try anotherServer()
        server.setResource(first, at: "a")
        server.setResource(second, at: "b")
        slow.setResource(third, at: "c")
        try Data([server.url("a"), server.url("b"), slow.url("c")].map { $0 + "\n" }.joined().utf8)
            .write(to: URL(fileURLWithPath: path("list")))
    }

    private let list = ["-n", "3", "-i", "list"]

    /// Runs the list with the third file's server throttled and interrupts
    /// it (SIGINT) once the two others are saved and the third is under
    /// way; returns the ranges the third one's manifest lists as done.
    private func interruptedList() throws -> [Range<Int64>] {
        slow.setRatePerConnection(1 << 20)
        let stopped = try interrupted(["-q"] + list, once: "a and b saved, c under way") {
            fileSize(path("a")) == first.size && fileSize(path("b")) == second.size
                && slow.statistics.bodyBytesSent >= 1 << 20
        }
        XCTAssertEqual(stopped.status, 130)
        assertSameBytes(path("a"), first)
        assertSameBytes(path("b"), second)
        let done = ManifestFile.done(path("c.part.json"))
        XCTAssertFalse(done.isEmpty, "c's progress was saved")
        slow.setRatePerConnection(nil)
        server.resetStatistics()
        slow.resetStatistics()
        return done
    }

    /// The requests for `name` were HEADs only: no byte of it was fetched.
    private func assertOnlyHEAD(_ name: String, file: StaticString = #filePath, line: UInt = #line) {
        let requests = server.statistics.requests.filter { $0.path.hasSuffix("/" + name) }
        XCTAssertFalse(requests.isEmpty, "\(name) was checked", file: file, line: line)
        XCTAssertEqual(
            requests.map(\.method), requests.map { _ in "HEAD" }, "\(name): HEAD only", file: file, line: line)
    }

    /// Nothing of `done` was asked for again, and the rest of c was.
    private func assertResumed(_ done: [Range<Int64>], file: StaticString = #filePath, line: UInt = #line) {
        let requested = slow.requestedRanges
        assertNotAskedAgain(done, in: requested, saved: "before", file: file, line: line)
        XCTAssertEqual(
            covered(requested + done), [0..<third.size], "the rest of c was asked for", file: file, line: line)
        assertSameBytes(path("c"), third, file: file, line: line)
    }

    func testAListRerunSkipsTheCompleteFilesAndResumesThePartialOne() throws {
        let done = try interruptedList()
        let run = try CLI.run(list, in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("./a is already complete (the same as the server's): skipped"), run.stderr)
        XCTAssertTrue(run.stderr.contains("./b is already complete (the same as the server's): skipped"), run.stderr)
        XCTAssertTrue(run.stderr.contains("resuming:"), run.stderr)
        XCTAssertTrue(run.stderr.contains("saved ./c"), run.stderr)
        XCTAssertTrue(run.stderr.contains("3 of 3 files downloaded (2 already complete)"), run.stderr)
        assertOnlyHEAD("a")
        assertOnlyHEAD("b")
        assertResumed(done)
        assertSameBytes(path("a"), first)
        assertSameBytes(path("b"), second)
        XCTAssertEqual(directoryEntries(), ["a", "b", "c", "list"])
    }

    func testAListRerunMarksTheSkippedFilesAlreadyCompleteInJSON() throws {
        let done = try interruptedList()
        let run = try CLI.run(["--json"] + list, in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        let (lines, summary) = try run.jsonLines()
        XCTAssertEqual(summary["outcome"] as? String, "complete")
        XCTAssertEqual(summary["alreadyComplete"] as? Int, 2)
        let files = lines.sorted { ($0["file"] as? String ?? "") < ($1["file"] as? String ?? "") }
        XCTAssertEqual(files.map { $0["file"] as? String }, ["./a", "./b", "./c"])
        XCTAssertEqual(files.map { $0["alreadyComplete"] as? Bool }, [true, true, false])
        XCTAssertEqual(files.map { $0["exitCode"] as? Int }, [0, 0, 0])
        XCTAssertEqual(files[0]["bytesFetched"] as? Int, 0)
        XCTAssertEqual(files[1]["bytesFetched"] as? Int, 0)
        let reused = Int(done.reduce(0) { $0 + $1.count })
        XCTAssertEqual(files[2]["bytesReused"] as? Int, reused)
        assertOnlyHEAD("a")
        assertOnlyHEAD("b")
        assertResumed(done)
    }

    /// A finished file the server has changed since (another ETag, the same
    /// size) is not the server's file any more: the rerun leaves it alone and
    /// fails it with a line saying why (exit 2) while it skips the others;
    /// with --force it is replaced.
    func testAListRerunReplacesAFileTheServerChangedOnlyWithForce() throws {
        let whole = try CLI.run(["-q"] + list, in: directory)
        XCTAssertEqual(whole.status, 0, whole.stderr)
        let changed = Resource.generated(size: second.size, seed: 1423)
        XCTAssertNotEqual(changed.etag, second.etag)
        server.setResource(changed, at: "b")
        server.resetStatistics()

        let refused = try CLI.run(list, in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains(
                "./b already exists and is not the server's file now (it was downloaded with "
                    + "ETag \(second.etag!) and the server's is now \(changed.etag!)); "
                    + "use --force to replace it"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("./a is already complete"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("./c is already complete"), refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains("2 of 3 files downloaded (2 already complete); failed: \(server.url("b"))"),
            refused.stderr)
        assertOnlyHEAD("b")
        assertSameBytes(path("b"), second)

        let forced = try CLI.run(["--force"] + list, in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        assertSameBytes(path("b"), changed)
        assertSameBytes(path("a"), first)
        assertSameBytes(path("c"), third)
        XCTAssertEqual(directoryEntries(), ["a", "b", "c", "list"])
    }

    /// The same for one file: a rerun of a finished download is done at once.
    func testASingleFileRerunOfACompleteFileExitsZero() throws {
        let output = path("one")
        let downloaded = try CLI.run(["-q", "-o", output, server.url("a")], in: directory)
        XCTAssertEqual(downloaded.status, 0, downloaded.stderr)
        server.resetStatistics()
        let rerun = try CLI.run(["-o", output, server.url("a")], in: directory)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertTrue(
            rerun.stderr.contains("\(output) is already complete (2.0 MiB, the same as the server's): nothing to do"),
            rerun.stderr)
        assertOnlyHEAD("a")
        let json = try CLI.run(["--json", "-o", output, server.url("a")], in: directory)
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertEqual(try json.jsonObject()["alreadyComplete"] as? Bool, true)
        XCTAssertEqual(try json.jsonObject()["bytesFetched"] as? Int, 0)
        assertSameBytes(output, first)
    }

    // MARK: - The origin kept as extended attributes

    /// After a download with `--xattr` the file carries its URL without
    /// user:password (`user.xdg.origin.url`) and the server's ETag and Last-Modified
    /// (`user.rangeget`, which marked its `.part` as rangeget's
    /// and stays), and a rerun compares them with the server's: a
    /// new ETag on a file of the same size and bytes is refused without
    /// --force, and the attribute, not anything else, decides (set by hand
    /// to the new ETag, the file passes). A new Last-Modified is refused too.
    func testTheOriginAttributesRoundTripAndDecideTheRerun() throws {
        try assertUserAttributesWork()
        let resource = Resource.generated(size: 1 << 20, seed: 1430)
        server.setResource(resource, at: "f")
        let url = server.url("f")
        let withCredentials = url.replacingOccurrences(of: "http://", with: "http://user:secret@")
        let output = path("f")
        let arguments = ["--xattr", "-o", output, withCredentials]
        let downloaded = try CLI.run(["-q"] + arguments, in: directory)
        XCTAssertEqual(downloaded.status, 0, downloaded.stderr)
        XCTAssertEqual(attribute("user.xdg.origin.url", of: output), url)
        let record = try XCTUnwrap(attribute("user.rangeget", of: output))
        XCTAssertTrue(record.hasPrefix(resource.etag! + "\n" + defaultLastModifiedHeader + "\n"), record)
        XCTAssertNotNil(
            record.split(separator: "\n").last.flatMap { UInt64($0, radix: 16) }, "a stamp of 16 hex digits: \(record)")
        XCTAssertEqual(record.split(separator: "\n").last?.count, 16, record)
        XCTAssertNil(attribute("user.rangeget.part", of: output), "no mark of earlier versions")
        XCTAssertFalse(try String(contentsOfFile: output, encoding: .isoLatin1).contains("secret"))

        var retagged = try assertRerunIsCompleteThenRefusedUnderANewETag(arguments, resource)
        XCTAssertEqual(attribute("user.rangeget", of: output), record, "the refused rerun left the file alone")

        // A record written by hand proves nothing: setting it changes the file's change time.
        sleep(2)
        try setAttribute(
            "user.rangeget", to: "\"v2\"\n" + defaultLastModifiedHeader + "\n" + record.suffix(16), of: output)
        let handMade = try CLI.run(arguments, in: directory)
        XCTAssertEqual(handMade.status, 2, handMade.stderr)
        XCTAssertTrue(handMade.stderr.contains("is not shown to be the server's file"), handMade.stderr)

        // Saved again from a server that sends no ETag; then its Last-Modified is newer.
        retagged.etag = nil
        server.setResource(retagged, at: "f")
        let saved = try CLI.run(["-q", "--force"] + arguments, in: directory)
        XCTAssertEqual(saved.status, 0, saved.stderr)
        retagged.lastModified = Resource.defaultLastModified.addingTimeInterval(86_400)
        server.setResource(retagged, at: "f")
        let newer = try CLI.run(arguments, in: directory)
        XCTAssertEqual(newer.status, 2, newer.stderr)
        XCTAssertTrue(
            newer.stderr.contains(
                "it was downloaded as of \(defaultLastModifiedHeader) and the server's file is of "
                    + "Tue, 02 Jan 2024 00:00:00 GMT"), newer.stderr)

        // --force replaces it, and the attributes follow the server.
        let forced = try CLI.run(["--force"] + arguments, in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(attribute("user.rangeget", of: output)?.dropLast(16), "\nTue, 02 Jan 2024 00:00:00 GMT\n")
        XCTAssertEqual(attribute("user.xdg.origin.url", of: output), url)
        XCTAssertEqual(directoryEntries(), ["f", "list"])
    }

    /// A file saved by an earlier version carries its validators as
    /// `user.rangeget.etag` and `user.rangeget.last_modified`, with no stamp:
    /// nothing shows the bytes are still those it saved, so a rerun refuses
    /// it, naming the two ways on; the right checksum proves it.
    func testTheOriginAttributesOfEarlierVersionsAreNoProofAlone() throws {
        try assertUserAttributesWork()
        let resource = Resource.generated(size: 64 << 10, seed: 1431)
        server.setResource(resource, at: "f")
        let output = path("f")
        try resource.write(to: output)
        try setAttribute("user.xdg.origin.url", to: server.url("f"), of: output)
        try setAttribute("user.rangeget.etag", to: resource.etag!, of: output)
        try setAttribute("user.rangeget.last_modified", to: defaultLastModifiedHeader, of: output)
        let arguments = ["-o", output, server.url("f")]

        let refused = try CLI.run(arguments, in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains(
                "\(output) already exists and is not shown to be the server's file (its "
                    + "record, from an earlier version of rangeget, cannot show it is unchanged "
                    + "since); use --checksum to verify it, or --force to replace it"),
            refused.stderr)
        let verified = try CLI.run(["--checksum", "sha256=" + (try sha256(of: resource))] + arguments, in: directory)
        XCTAssertEqual(verified.status, 0, verified.stderr)
        XCTAssertTrue(verified.stderr.contains("already complete"), verified.stderr)
        assertSameBytes(output, resource)
    }

    /// Runs `arguments` on the downloaded `resource` (served as `f`): already
    /// complete; then, the same bytes served under another ETag (another
    /// version, the server says), refused. Returns the retagged resource.
    private func assertRerunIsCompleteThenRefusedUnderANewETag(
        _ arguments: [String], _ resource: Resource, file: StaticString = #filePath, line: UInt = #line
    ) throws -> Resource {
        let same = try CLI.run(arguments, in: directory)
        XCTAssertEqual(same.status, 0, same.stderr, file: file, line: line)
        XCTAssertTrue(same.stderr.contains("already complete"), same.stderr, file: file, line: line)
        var retagged = resource
        retagged.etag = "\"v2\""
        server.setResource(retagged, at: "f")
        let refused = try CLI.run(arguments, in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr, file: file, line: line)
        XCTAssertTrue(
            refused.stderr.contains(
                "it was downloaded with ETag \(resource.etag!) and the server's is now \"v2\"); "
                    + "use --force to replace it"), refused.stderr, file: file, line: line)
        return retagged
    }

    /// A `.part` an earlier version left with its mark (`user.rangeget.part`)
    /// and no manifest is still rangeget's: taken (started over), not
    /// refused, and the finished file carries the new origin, not the old
    /// mark, and without `--xattr` no URL.
    func testAPartMarkedByAnEarlierVersionIsStillTaken() throws {
        try assertUserAttributesWork()
        let resource = Resource.generated(size: 64 << 10, seed: 1432)
        server.setResource(resource, at: "f")
        let output = path("f")
        XCTAssertTrue(FileManager.default.createFile(atPath: output + ".part", contents: Data([1, 2, 3])))
        try setAttribute("user.rangeget.part", to: "1", of: output + ".part")

        let run = try CLI.run(["-q", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertNil(attribute("user.rangeget.part", of: output))
        XCTAssertNil(attribute("user.xdg.origin.url", of: output))
        XCTAssertEqual(
            attribute("user.rangeget", of: output)?.dropLast(16),
            resource.etag! + "\n" + defaultLastModifiedHeader + "\n")
    }

    /// A finished file whose name is another download's `.part` (here
    /// saved with `-o a.part`) carries the validators, not the mark of a
    /// partial download: the download to `a` refuses it and leaves it whole.
    func testAFinishedFileNamedLikeAPartIsNotTakenForOne() throws {
        try assertUserAttributesWork()
        let first = Resource.generated(size: 64 << 10, seed: 1434)
        let second = Resource.generated(size: 64 << 10, seed: 1435)
        server.setResource(first, at: "first")
        server.setResource(second, at: "second")
        let saved = try CLI.run(["-q", "-o", path("a.part"), server.url("first")], in: directory)
        XCTAssertEqual(saved.status, 0, saved.stderr)

        let refused = try CLI.run(["-q", "-o", path("a"), server.url("second")], in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("not made by rangeget"), refused.stderr)
        assertSameBytes(path("a.part"), first)
    }

    /// An output that is another download's data file (`-o a.part` while a
    /// download to `a` is partial, its room reserved): not "already
    /// complete", though its size and validators match, but refused.
    func testAnotherDownloadsPartIsNotAFinishedOutput() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 1437)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(256 << 10)
        let child = try launch(["-q", "-n", "2", "--min-split", "1M", "-o", path("a"), server.url("f")])
        XCTAssertTrue(wait(timeout: 20) { FileManager.default.fileExists(atPath: self.path("a.part.json")) })
        child.kill9()
        server.setRatePerConnection(nil)

        let run = try CLI.run(["-q", "-o", path("a.part"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("is a partial download, not a finished file"), run.stderr)
    }

    /// A small file the server names (Content-Disposition) whose `.part`
    /// an earlier run left with a manifest and its second half done: the
    /// opening request keeps the whole file in memory (the name is known
    /// only from its head), and the resume writes it whole, at once.
    func testAHeldSmallFileCompletesAPartialDownloadOfItsName() throws {
        var resource = Resource.generated(size: 96 << 10, seed: 1436)
        resource.contentDisposition = "attachment; filename=\"named.bin\""
        server.setResource(resource, at: "get")
        let folder = path("out")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let half: Int64 = 48 << 10
        var partial = [UInt8](repeating: 0, count: Int(half)) + resource.bytes(in: half..<resource.size)
        XCTAssertTrue(FileManager.default.createFile(atPath: folder + "/named.bin.part", contents: Data(partial)))
        partial = Array(
            """
            {"done":[[\(half),\(resource.size)]],"etag":\(String(reflecting: resource.etag!)),\
            "lastModified":"\(defaultLastModifiedHeader)","size":\(resource.size),"url":"\(server.url("get"))","version":1}
            """.utf8)
        XCTAssertTrue(FileManager.default.createFile(atPath: folder + "/named.bin.part.json", contents: Data(partial)))

        let run = try CLI.run(["-q", "-d", folder, server.url("get")], in: directory, timeout: 20)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(folder + "/named.bin", resource)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), ["named.bin"])
    }

    /// The test directory must keep user extended attributes (the project's
    /// own file system does; tmpfs before Linux 6.6 does not).
    private func assertUserAttributesWork() throws {
        let probe = path(".xattr-probe")
        XCTAssertTrue(FileManager.default.createFile(atPath: probe, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: probe) }
        try setAttribute("user.rangeget.probe", to: "1", of: probe)
        XCTAssertEqual(attribute("user.rangeget.probe", of: probe), "1")
    }

    /// The extended attribute `name` of the file at `path` (getxattr), nil when it has none.
    private func attribute(_ name: String, of path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = Attributes.get(path, name, &buffer, buffer.count)
        return length < 0 ? nil : String(decoding: buffer.prefix(length), as: UTF8.self)
    }

    private func setAttribute(_ name: String, to value: String, of path: String) throws {
        let bytes = Array(value.utf8)
        guard Attributes.set(path, name, bytes, bytes.count, 0) == 0 else {
            throw AttributeError(
                description: "cannot set \(name) on \(path) (\(String(cString: strerror(errno)))): "
                    + "the test directory needs a file system with user extended attributes")
        }
    }

    private struct AttributeError: Error, CustomStringConvertible {
        var description: String
    }
}

/// glibc's getxattr(2) and setxattr(2): the Glibc module leaves out
/// <sys/xattr.h>, so they are looked up in the C library itself.
private enum Attributes {
    typealias Get = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeMutableRawPointer?, Int) -> Int
    typealias Set = @convention(c) (UnsafePointer<CChar>, UnsafePointer<CChar>, UnsafeRawPointer?, Int, Int32) -> Int32

    static let get = unsafeBitCast(dlsym(nil, "getxattr")!, to: Get.self)
    static let set = unsafeBitCast(dlsym(nil, "setxattr")!, to: Set.self)
}
