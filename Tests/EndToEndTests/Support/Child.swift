// Child: every process a test starts (rangeget, the example, make, nginx)
// runs as one, its output going to files, never a pipe a killed child could
// block on; and the ways tests start rangeget to signal or limit it (SIGINT
// or SIGKILL once it is under way, `ulimit -f`).
import Foundation
import Glibc
import XCTest

/// A child process whose output goes to files (never a pipe a killed child could block).
final class Child {
    let process = Process()
    let stdoutURL: URL
    let stderrURL: URL

    init(executable: String, arguments: [String], in directory: String) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        stdoutURL = URL(fileURLWithPath: directory).appendingPathComponent(".stdout-\(UUID().uuidString)")
        stderrURL = URL(fileURLWithPath: directory).appendingPathComponent(".stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// SIGKILL and reap; safe to call on an exited child.
    func kill9() {
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    /// Waits up to `timeout` seconds; kills the child (and fails) if it is still running.
    func finish(timeout: Double, file: StaticString = #filePath, line: UInt = #line) -> Run {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill9()
            XCTFail("child \(process.arguments ?? []) did not finish within \(timeout) s", file: file, line: line)
        }
        process.waitUntilExit()
        defer {
            try? FileManager.default.removeItem(at: stdoutURL)
            try? FileManager.default.removeItem(at: stderrURL)
        }
        let status =
            process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return Run(
            status: status,
            stdout: (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "")
    }
}

extension EndToEndTestCase {
    /// Starts rangeget (or `executable`) with `arguments` in the test
    /// directory; a child still running when the test ends is killed.
    func launch(_ arguments: [String], executable: String = CLI.binary) throws -> Child {
        let child = try Child(executable: executable, arguments: arguments, in: directory)
        addTeardownBlock { child.kill9() }
        return child
    }

    /// Starts rangeget with `arguments`, sends it `signal` once `ready` holds
    /// (the test fails if that takes over 20 s; `what` says what it waited
    /// for), and returns how it ended.
    func interrupted(
        _ arguments: [String], by signal: Int32 = SIGINT, once what: String = "the download is under way",
        when ready: () -> Bool
    ) throws -> Run {
        let child = try launch(arguments)
        XCTAssertTrue(wait(timeout: 20, until: ready), "\(what): \(arguments)")
        kill(child.pid, signal)
        return child.finish(timeout: 20)
    }

    /// Runs rangeget under `/bin/sh -c 'ulimit -f BLOCKS; exec rangeget ...'` (512-byte blocks).
    func runWithFileSizeLimit(blocks: Int, _ arguments: [String], timeout: Double = 60) throws -> Run {
        let quoted = ([CLI.binary] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let child = try Child(
            executable: "/bin/sh", arguments: ["-c", "ulimit -f \(blocks) && exec " + quoted.joined(separator: " ")],
            in: directory)
        return child.finish(timeout: timeout)
    }
}
