// Issue 15: a small file that the opening request brings whole is written
// to a file with no name (O_TMPFILE) and linked to its final name only once
// its data is durable: no `.part` is created, marked and renamed, and a kill
// before the commit leaves nothing behind. These tests hold every flush of
// the disk (FlushGate) to look at the directory while a download waits for
// its commit, and check that when the data must stay (a final name taken
// meanwhile, a checksum that fails) it stays under the `.part` name the
// messages give.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class UnnamedFileTests: EndToEndTestCase {
    private var output: String { path("out/small.bin") }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
    }

    private func saved() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path("out"))) ?? []).sorted()
    }

    /// Starts a download of `resource` to `output` with its flushes held, and
    /// waits until its data file is open with no name.
    private func startHeld(_ resource: Resource, _ extra: [String] = []) throws -> (child: Child, gate: FlushGate) {
        server.setResource(resource, at: "small.bin")
        let started = try launchWithFlushesHeld(["-q"] + extra + ["-o", output, server.url("small.bin")])
        XCTAssertTrue(
            wait(timeout: 20) { unnamedFiles(of: started.child.pid).contains { $0.contains("/out/#") } },
            "the download never opened a file without a name in out/: \(unnamedFiles(of: started.child.pid))")
        return started
    }

    /// While it waits for its flush the file has no name at all; killed
    /// there, it leaves nothing; the same command then saves it.
    func testASmallFileHasNoNameUntilItsDataIsDurable() throws {
        let resource = Resource.generated(size: 16 << 10, seed: 2100)
        let (child, _) = try startHeld(resource)
        XCTAssertEqual(saved(), [], "with its flush held, no .part and no final name are there")
        child.kill9()
        XCTAssertEqual(saved(), [], "a kill -9 before the commit leaves nothing behind")

        let rerun = try CLI.run(["-q", "-o", output, server.url("small.bin")], in: directory)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(saved(), ["small.bin"])
    }

    /// Another file takes the final name while the download waits for its
    /// flush: it is never replaced, and the data stays under the `.part`
    /// name the message gives, recorded as complete, so `--force` then
    /// saves it without fetching it again.
    func testAFinalNameTakenMeanwhileKeepsTheDataAsItsPart() throws {
        let resource = Resource.generated(size: 16 << 10, seed: 2101)
        let (child, gate) = try startHeld(resource)
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: output))
        try gate.open()
        let run = child.finish(timeout: 30)

        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("appeared during the download (the data stays in \(output).part)"), run.stderr)
        XCTAssertEqual(try String(contentsOfFile: output, encoding: .utf8), "someone else's")
        assertSameBytes(output + ".part", resource)
        XCTAssertEqual(saved(), ["small.bin", "small.bin.part", "small.bin.part.json"])

        let requests = server.statistics.requests.filter { $0.method == "GET" }.count
        let forced = try CLI.run(["-q", "--force", "-o", output, server.url("small.bin")], in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(saved(), ["small.bin"])
        let fetched = server.statistics.requests.filter { $0.method == "GET" && $0.headers["range"] != "bytes=0-0" }
        XCTAssertEqual(fetched.count, requests, "the kept data was fetched again: \(server.statistics.requests)")
    }

    /// A small file whose checksum fails is kept as its `.part`, as a large
    /// one is, and saved by the next run with the right checksum.
    func testASmallFileThatFailsItsChecksumStaysAsItsPart() throws {
        let resource = Resource.generated(size: 16 << 10, seed: 2102)
        server.setResource(resource, at: "small.bin")
        let wrong = String(repeating: "0", count: 64)
        let failed = try CLI.run(
            ["-q", "--checksum", "sha256=\(wrong)", "-o", output, server.url("small.bin")],
            in: directory)
        XCTAssertEqual(failed.status, 3, failed.stderr)
        XCTAssertTrue(failed.stderr.contains("the data stays in \(output).part"), failed.stderr)
        assertSameBytes(output + ".part", resource)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output), "nothing unverified under the final name")

        let good = try CLI.run(
            [
                "-q", "--checksum", "sha256=\(try sha256(of: resource))", "-o", output,
                server.url("small.bin")
            ], in: directory)
        XCTAssertEqual(good.status, 0, good.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(saved(), ["small.bin"])
    }

    /// Each disk call on the unnamed file failing (EIO, in-process through
    /// the SystemCalls seam): one clear line naming the output, and nothing
    /// left in the directory, no final name and no `.part`; the next run
    /// saves the file. Where no unnamed file can be made, the download
    /// creates an `OUTPUT.part.new` instead (OutputFile.temporary) and finishes.
    func testEveryDiskCallOfAnUnnamedFileFailsCleanly() throws {
        let resource = Resource.generated(size: 16 << 10, seed: 2103)
        server.setResource(resource, at: "small.bin")
        let unnamed: @Sendable (Int32) -> Bool = { openPath($0)?.hasSuffix(" (deleted)") == true }
        let failing: @Sendable (Int32) -> Int32 = { code in
            errno = code
            return -1
        }
        let live = SystemCalls.live
        let partCreated = Mutex(false)
        let cases: [(name: String, expected: String?, fault: (inout SystemCalls) -> Void)] = [
            (
                "no unnamed files", nil,
                { [output] calls in
                    calls.openUnnamed = { _ in failing(EOPNOTSUPP) }
                    calls.open = { path, flags, mode in
                        if path == output + ".part.new", flags & O_CREAT != 0 { partCreated.withLock { $0 = true } }
                        return live.open(path, flags, mode)
                    }
                }
            ),
            (
                "pwrite", "cannot write \(output)",
                { calls in
                    calls.pwrite = { unnamed($0) ? Int(failing(EIO)) : live.pwrite($0, $1, $2, $3) }
                }
            ),
            (
                "fsetxattr", "cannot record the origin of \(output)",
                { calls in
                    calls.fsetxattr = { unnamed($0) ? failing(EIO) : live.fsetxattr($0, $1, $2) }
                }
            ),
            (
                "fdatasync", "cannot sync \(output)",
                { calls in
                    calls.fdatasync = { unnamed($0) ? failing(EIO) : live.fdatasync($0) }
                }
            ),
            ("linkat", "cannot save \(output)", { $0.linkOpenFile = { _, _ in failing(EIO) } })
        ]
        for (name, expected, fault) in cases {
            let run = runLibrary([server.url("small.bin")], to: output) { options in
                fault(&options.systemCalls)
            }
            if let expected {
                XCTAssertEqual(run.error?.description, expected + ": " + String(cString: strerror(EIO)), name)
                XCTAssertEqual(saved(), [], "\(name): the failed download left something behind")
            } else {
                XCTAssertNil(run.error, name)
                XCTAssertTrue(partCreated.withLock { $0 }, "\(name): no .part.new was created")
                assertSameBytes(output, resource)
                try FileManager.default.removeItem(atPath: output)
            }
            let rerun = runLibrary([server.url("small.bin")], to: output) { _ in }
            XCTAssertNil(rerun.error, "\(name): the run without the fault")
            assertSameBytes(output, resource)
            XCTAssertEqual(saved(), ["small.bin"], name)
            try FileManager.default.removeItem(atPath: output)
        }
    }

    /// A small file whose list has no checksum for it stays as its `.part`,
    /// recorded as complete: the next run, with the entry, verifies it and
    /// saves it without fetching it again.
    func testASmallFileMissingFromTheChecksumListIsKeptAsComplete() throws {
        let resource = Resource.generated(size: 16 << 10, seed: 2104)
        server.setResource(resource, at: "small.bin")
        try Data(server.url("small.bin").utf8).write(to: URL(fileURLWithPath: path("list")))
        try Data("\(String(repeating: "0", count: 64))  other.bin\n".utf8).write(to: URL(fileURLWithPath: path("SUMS")))
        let arguments = ["-q", "-i", path("list"), "-d", path("out"), "--checksum-file", path("SUMS")]
        let failed = try CLI.run(arguments, in: directory)
        XCTAssertEqual(failed.status, 3, failed.stderr)
        XCTAssertTrue(failed.stderr.contains("the data stays in \(output).part"), failed.stderr)
        assertSameBytes(output + ".part", resource)

        let fetched = server.statistics.requests.filter { $0.method == "GET" }.count
        try Data("\(try sha256(of: resource))  small.bin\n".utf8).write(to: URL(fileURLWithPath: path("SUMS")))
        let good = try CLI.run(arguments, in: directory)
        XCTAssertEqual(good.status, 0, good.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(saved(), ["small.bin"])
        XCTAssertEqual(
            server.statistics.requests.filter { $0.method == "GET" && $0.headers["range"] != "bytes=0-0" }.count,
            fetched, "the kept data was fetched again: \(server.statistics.requests)")
    }
}
