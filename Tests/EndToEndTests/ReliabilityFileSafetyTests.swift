// Issue 12, the files rangeget keeps (RELIABILITY.md, "Added after the first
// release"): a `.part` that is not rangeget's is never taken over, links are
// never followed, a file that appears at the output is never replaced without
// --force, a server-chosen size never fills the disk, a resume without
// validators never splices a changed file, and a power cut can cost only the
// quick state, never the durable manifest.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class ReliabilityFileSafetyTests: EndToEndTestCase {
    private var children: [Child] = []

    override func tearDownWithError() throws {
        for child in children { child.kill9() }
        try super.tearDownWithError()
    }

    private func start(_ arguments: [String]) throws -> Child {
        let child = try Child(executable: CLI.binary, arguments: arguments, in: directory)
        children.append(child)
        return child
    }

    private func inode(_ path: String) -> ino_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_ino : nil
    }

    // MARK: A .part that is not rangeget's

    /// Issue 12 (5): a hard link planted at the manifest's or the quick
    /// state's temporary file was truncated and written through (`O_TRUNC`
    /// without `O_EXCL`); a symbolic link at the manifest is never read.
    func testLinksAtTheManifestAndItsTemporaryFilesAreNeverFollowed() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 1204)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        let output = path("f")
        let precious = Data("do not touch".utf8)
        let victims = [path("victim-manifest"), path("victim-quick")]
        for (victim, name) in zip(victims, [output + ".part.json.tmp", output + ".part.quick.tmp"]) {
            _ = FileManager.default.createFile(atPath: victim, contents: precious)
            try FileManager.default.linkItem(atPath: victim, toPath: name)
        }
        let run = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        for victim in victims {
            XCTAssertEqual(FileManager.default.contents(atPath: victim), precious, "\(victim) was written through")
        }

        let victim = victims[0]
        _ = FileManager.default.createFile(atPath: output + ".part", contents: Data(count: 4096))
        try FileManager.default.createSymbolicLink(atPath: output + ".part.json", withDestinationPath: victim)
        let linked = try CLI.run(["-q", "--force", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(linked.status, 4, linked.stderr)
        XCTAssertTrue(linked.stderr.contains("symbolic link"), linked.stderr)
        XCTAssertTrue(linked.stderr.contains("--restart"), linked.stderr)
        XCTAssertEqual(FileManager.default.contents(atPath: victim), precious)
    }
}
