// FlushGate: rangeget started with every flush of the disk held. The shim
// Benchmarks/slowflush.c, built here with the system's C compiler and
// preloaded, makes fsync, fdatasync and syncfs wait while a gate file
// exists, so a test can look at the disk while a download waits to be made
// durable, then let it go on (or kill it there).
import Foundation
import Glibc
import XCTest

extension EndToEndTestCase {
    /// Starts rangeget with `arguments` with its flushes held until `open`
    /// is called on the gate returned; `openFiles`: with that many file
    /// descriptors at most (`ulimit -n`).
    func launchWithFlushesHeld(_ arguments: [String], openFiles: Int? = nil) throws -> (child: Child, gate: FlushGate) {
        let gate = FlushGate(path: path("flush-gate"))
        XCTAssertTrue(FileManager.default.createFile(atPath: gate.path, contents: nil))
        let command =
            [
                "/usr/bin/env", "LD_PRELOAD=\(try buildFlushShim())", "SLOW_FLUSH_US=0",
                "SLOW_FLUSH_GATE=\(gate.path)", CLI.binary
            ] + arguments
        let limit = openFiles.map { "ulimit -n \($0) && " } ?? ""
        let child = try launch(["-c", limit + "exec \"$@\"", "sh"] + command, executable: "/bin/sh")
        return (child, gate)
    }

    /// Benchmarks/slowflush.c built as a shared library in the test directory.
    private func buildFlushShim() throws -> String {
        let source = CLI.repositoryRoot.appendingPathComponent("Benchmarks/slowflush.c").path
        let library = path("slowflush.so")
        let build = try CLI.run(
            ["cc", "-shared", "-fPIC", "-O2", "-o", library, source, "-ldl"],
            in: directory, executable: "/usr/bin/env")
        XCTAssertEqual(build.status, 0, "cc could not build \(source): \(build.stderr)")
        return library
    }

    /// The files process `pid` holds open that have no name (`O_TMPFILE`,
    /// or unlinked), as /proc shows them: "DIR/#INODE (deleted)".
    func unnamedFiles(of pid: Int32) -> [String] {
        let folder = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return entries.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/" + $0) }
            .filter { $0.hasSuffix(" (deleted)") }
    }
}

/// The gate file of `launchWithFlushesHeld`.
struct FlushGate {
    let path: String

    /// Lets every flush through, from now on.
    func open() throws {
        try FileManager.default.removeItem(atPath: path)
    }
}
