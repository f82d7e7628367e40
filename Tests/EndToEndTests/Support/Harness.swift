// The base of every end-to-end test: how a run ended (Run), where the built
// executables are and how one runs to completion (CLI), and the test case
// with its fresh directory and RangeServer on 127.0.0.1 (EndToEndTestCase).
// The other helpers each have a file beside this one in Support/: Child
// (child processes), FileChecks, ManifestFile, ByteRanges, DiskProbe (the
// disk seam), LibraryRun, ScriptedServer, NginxServer, LoopbackSocket,
// ClientSockets (sockets counted in the kernel's table), FlushGate, Draws,
// SoakPlan, ReliabilityServerSupport. The test files are the folder above.
import Foundation
import RangeServer
import XCTest

/// The result of running the binary to completion.
struct Run {
    /// The exit code, or 128 + the signal that ended it (as a shell reports it).
    var status: Int32
    var stdout: String
    var stderr: String

    /// stdout as the JSON object `--json` prints.
    func jsonObject() throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any]
        return try XCTUnwrap(object, stdout)
    }

    /// stdout as the JSON array `status --json` prints.
    func jsonArray() throws -> [[String: Any]] {
        let array = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [[String: Any]]
        return try XCTUnwrap(array, stdout)
    }

    /// `--json` with a list: one object per file in the order they ended, then the summary.
    func jsonLines() throws -> (files: [[String: Any]], summary: [String: Any]) {
        let objects = try stdout.split(separator: "\n").map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], String(line))
        }
        let summary = try XCTUnwrap(objects.last, stdout)
        return (Array(objects.dropLast()), summary)
    }
}

enum CLI {
    /// The package's root directory (where Package.swift and the Makefile
    /// are), three folders up from this file's: Support, EndToEndTests, Tests.
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `rangeget` executable built next to this test bundle.
    static let binary = builtProduct("rangeget")

    /// The `rangeget-example` executable (Examples/fetch), built beside it.
    static let example = builtProduct("rangeget-example")

    /// The `rangeget-list-example` executable (Examples/list, the README's list example).
    static let listExample = builtProduct("rangeget-list-example")

    /// The executable `name` that `swift build` made: next to this test
    /// bundle, else in the package's .build/debug.
    private static func builtProduct(_ name: String) -> String {
        let besideTests = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: besideTests) { return besideTests }
        return repositoryRoot.appendingPathComponent(".build/debug/" + name).path
    }

    /// Runs the binary (or `executable`) to completion; after `timeout`
    /// seconds it is killed and the test fails.
    static func run(
        _ arguments: [String], in directory: String, timeout: Double = 120,
        executable: String? = nil
    ) throws -> Run {
        try Child(executable: executable ?? binary, arguments: arguments, in: directory).finish(timeout: timeout)
    }
}

extension CLI {
    /// Runs the binary so that file permissions apply to it even as root:
    /// without the capabilities that override them (CAP_DAC_OVERRIDE,
    /// CAP_DAC_READ_SEARCH), through setpriv. Not as root: a plain run.
    static func runWithoutPermissionOverride(_ arguments: [String], in directory: String) throws -> Run {
        guard geteuid() == 0 else { return try run(arguments, in: directory) }
        let setpriv = "/usr/bin/setpriv"
        guard FileManager.default.isExecutableFile(atPath: setpriv) else {
            throw XCTSkip("\(setpriv) is missing (util-linux): root cannot be denied a permission without it")
        }
        let drop = "-dac_override,-dac_read_search"
        return try run(
            ["--inh-caps=\(drop)", "--bounding-set=\(drop)", "--", binary] + arguments, in: directory,
            executable: setpriv)
    }
}

/// A fresh temporary directory, removed by `tearDown`.
class EndToEndTestCase: XCTestCase {
    var directory: String!
    var server: RangeServer!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "rangeget-e2e-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        server = RangeServer()
        try server.start()
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The file `name` in the test directory.
    func path(_ name: String) -> String { directory + "/" + name }

    /// One more RangeServer on 127.0.0.1 (another origin, mirror or rate),
    /// stopped when the test ends.
    func anotherServer() throws -> RangeServer {
        let other = RangeServer()
        try other.start()
        addTeardownBlock { other.stop() }
        return other
    }

    /// `server` and two more, each serving `resource` at "f" capping each
    /// connection at its rate in `rates` (the 2/8/32 MiB/s, scaled down).
    func cappedMirrors(
        serving resource: Resource, rates: [Int] = [1 << 19, 2 << 20, 8 << 20]
    ) throws -> [RangeServer] {
        let mirrors = [server!] + (try (1..<rates.count).map { _ in try anotherServer() })
        for (mirror, rate) in zip(mirrors, rates) {
            mirror.setResource(resource, at: "f")
            mirror.setRatePerConnection(rate)
        }
        return mirrors
    }

    /// Waits until `condition` holds or `timeout` passes, asking every
    /// `interval` seconds; returns whether it holds.
    func wait(timeout: Double, every interval: Double = 0.02, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            usleep(UInt32(interval * 1_000_000))
        }
        return condition()
    }
}
