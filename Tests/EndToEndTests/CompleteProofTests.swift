// Issue 36: an existing file counts as the server's only on evidence:
// rangeget's own record showing the file unchanged since it saved it (with
// the server's size and validator, or sampled bytes where the server names
// no validator), or the checksum the user gave. A file of the right size
// and nothing more (another tool's preallocated partial, zeros, rangeget's
// own file overwritten in place) is refused with exit 2 and the two ways on.
import Foundation
import Glibc
import RangeServer
import XCTest

final class CompleteProofTests: EndToEndTestCase {
    private let resource = Resource.generated(size: 1 << 20, seed: 3601)
    private let refusal = "is not shown to be the server's file"
    private let waysOn = "use --checksum to verify it, or --force to replace it"

    override func setUpWithError() throws {
        try super.setUpWithError()
        server.setResource(resource, at: "f")
    }

    private var arguments: [String] { ["-o", path("f"), server.url("f")] }

    /// Downloads the file; then a rerun finds it complete without a byte fetched.
    private func downloadAndRerun() throws {
        let first = try CLI.run(["-q"] + arguments, in: directory)
        XCTAssertEqual(first.status, 0, first.stderr)
        let rerun = try CLI.run(arguments, in: directory)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertTrue(rerun.stderr.contains("already complete"), rerun.stderr)
    }

    /// The run refuses the file at `f`, leaves it as it was, and `--force` replaces it.
    private func assertRefusedThenForced(_ reason: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let before = try Data(contentsOf: URL(fileURLWithPath: path("f")))
        let refused = try CLI.run(arguments, in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr, file: file, line: line)
        XCTAssertTrue(
            refused.stderr.contains("\(path("f")) already exists and \(refusal) (\(reason)); \(waysOn)"),
            refused.stderr, file: file, line: line)
        XCTAssertEqual(
            try Data(contentsOf: URL(fileURLWithPath: path("f"))), before, "left alone", file: file, line: line)
        let forced = try CLI.run(["-q", "--force"] + arguments, in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr, file: file, line: line)
        assertSameBytes(path("f"), resource, file: file, line: line)
    }

    /// Bytes 100..<110 of `f` overwritten in place: same inode, same size.
    private func overwriteInPlace() throws {
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path("f")))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data(repeating: 0x78, count: 10))
        try handle.close()
    }

    func testAFileOfZerosOfTheRightSizeIsRefusedNotTakenAsComplete() throws {
        XCTAssertTrue(FileManager.default.createFile(atPath: path("f"), contents: Data(count: Int(resource.size))))
        try assertRefusedThenForced("rangeget has no record of saving it")
    }

    /// As aria2c leaves a file it preallocated: full size, only some bytes.
    func testAnotherToolsPreallocatedPartialIsRefused() throws {
        var bytes = [UInt8](repeating: 0, count: Int(resource.size))
        bytes.replaceSubrange(0..<(256 << 10), with: resource.bytes(in: 0..<(256 << 10)))
        XCTAssertTrue(FileManager.default.createFile(atPath: path("f"), contents: Data(bytes)))
        try assertRefusedThenForced("rangeget has no record of saving it")
    }

    func testRangegetsOwnFileOverwrittenInPlaceIsRefused() throws {
        try downloadAndRerun()
        try overwriteInPlace()
        try assertRefusedThenForced(
            "its modification or change time is not the one rangeget recorded as it saved the file")
    }

    /// `cp -p` over the file, or `touch -r` after an edit, sets the
    /// modification time back; the change time it cannot set tells.
    func testAnOverwriteThatRestoresTheModificationTimeIsRefused() throws {
        try downloadAndRerun()
        var info = stat()
        XCTAssertEqual(lstat(path("f"), &info), 0)
        sleep(2)
        try overwriteInPlace()
        var times = [info.st_atim, info.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, path("f"), &times, 0), 0)
        var after = stat()
        XCTAssertEqual(lstat(path("f"), &after), 0)
        XCTAssertEqual(after.st_mtim.tv_nsec, info.st_mtim.tv_nsec, "the modification time is back to the nanosecond")
        try assertRefusedThenForced(
            "its modification or change time is not the one rangeget recorded as it saved the file")
    }

    func testTheRightChecksumProvesAFileWithoutARecordAndAWrongOneRefusesIt() throws {
        try resource.write(to: path("f"))
        let sum = try sha256(of: resource)
        let proven = try CLI.run(["--json", "--checksum", "sha256=" + sum] + arguments, in: directory)
        XCTAssertEqual(proven.status, 0, proven.stderr)
        XCTAssertEqual(try proven.jsonObject()["alreadyComplete"] as? Bool, true)
        XCTAssertEqual(try proven.jsonObject()["bytesFetched"] as? Int, 0)

        try overwriteInPlace()
        let refused = try CLI.run(["--checksum", "sha256=" + sum] + arguments, in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains("already exists and is not the expected file (its sha256 is "), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("expected \(sum)); use --force to replace it"), refused.stderr)
    }

    /// A server with neither ETag nor Last-Modified: the record shows the
    /// file unchanged here, and sampled bytes tie it to the server's; a
    /// server file of the same size with other bytes everywhere is not it.
    func testWithoutValidatorsSampledBytesDecide() throws {
        var bare = resource
        bare.etag = nil
        bare.lastModified = nil
        server.setResource(bare, at: "f")
        try downloadAndRerun()
        var other = Resource.generated(size: resource.size, seed: 3602)
        other.etag = nil
        other.lastModified = nil
        server.setResource(other, at: "f")
        let refused = try CLI.run(arguments, in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(
            refused.stderr.contains("already exists and is not the server's file now (it differs from it at bytes "),
            refused.stderr)
        assertSameBytes(path("f"), resource)
    }

    /// In a list, the unproven file fails with its line and the others go on.
    func testAListRerunFailsTheOverwrittenFileAndSkipsTheOthers() throws {
        let second = Resource.generated(size: 256 << 10, seed: 3603)
        server.setResource(second, at: "g")
        try Data([server.url("f"), server.url("g")].map { $0 + "\n" }.joined().utf8)
            .write(to: URL(fileURLWithPath: path("list")))
        let first = try CLI.run(["-q", "-i", "list"], in: directory)
        XCTAssertEqual(first.status, 0, first.stderr)
        try overwriteInPlace()
        let rerun = try CLI.run(["-i", "list"], in: directory)
        XCTAssertNotEqual(rerun.status, 0, rerun.stderr)
        XCTAssertTrue(rerun.stderr.contains("./f already exists and \(refusal)"), rerun.stderr)
        XCTAssertTrue(rerun.stderr.contains("./g is already complete"), rerun.stderr)
        assertSameBytes(path("g"), second)
    }
}
