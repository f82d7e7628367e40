// Whole downloads through the built binary: byte-identical files for edge
// sizes and connection counts, fallback when ranges don't work, the CLI's
// refusals.
import Foundation
import RangeGet
import RangeServer
import XCTest

final class DownloadTests: EndToEndTestCase {
    func testEdgeSizesAreByteIdenticalAcrossConnectionCounts() throws {
        let mib: Int64 = 1 << 20
        for connections in [1, 4, 16] {
            for size in [0, 1, 7, Int64(connections) + 1, mib + 13] {
                let resource = Resource.generated(size: size, seed: UInt64(size) + 11)
                server.setResource(resource, at: "f-\(size)")
                let output = path("out-\(size)-\(connections)")
                let run = try CLI.run(
                    [
                        "-q", "-n", "\(connections)", "--min-split", "1", "-o", output,
                        server.url("f-\(size)")
                    ], in: directory)
                XCTAssertEqual(run.status, 0, "size \(size), \(connections) connections: \(run.stderr)")
                assertSameBytes(output, resource)
                XCTAssertFalse(FileManager.default.fileExists(atPath: output + ".part"), "the .part is renamed")
                XCTAssertFalse(FileManager.default.fileExists(atPath: output + ".part.json"), "the manifest is removed")
            }
        }
    }

    func testSixtyFourMebibytesOverSixteenConnections() throws {
        let resource = Resource.generated(size: 64 << 20, seed: 64)
        server.setResource(resource, at: "big.bin")
        let run = try CLI.run(["-n", "16", "-d", directory, server.url("big.bin")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("big.bin"), resource)
        XCTAssertTrue(run.stderr.contains("saved"), run.stderr)
        let ranged = server.statistics.requests.filter { $0.method == "GET" && $0.rangeHeader != nil }
        XCTAssertGreaterThanOrEqual(ranged.count, 16, "the file came over many ranged requests")
        // Every byte was asked for; only an end-game race asks for a tail twice,
        // and a race is for a piece under two minimum splits (1 MiB) per connection.
        let asked = ranged.compactMap { requestedRange($0.rangeHeader) }
        XCTAssertEqual(covered(asked), [0..<(64 << 20)])
        let twice = asked.reduce(Int64(0)) { $0 + Int64($1.count) } - (64 << 20)
        XCTAssertLessThanOrEqual(twice, 16 * (2 << 20), "bytes asked for twice: \(twice)")
        // A steal or a race asks for the tail of a running request: where two
        // requests overlap, both end at the same byte. (Asking again for bytes
        // before a piece, as a planner off by a split would, ends apart.)
        for (index, first) in asked.enumerated() {
            for second in asked[(index + 1)...] where first.overlaps(second) {
                XCTAssertEqual(first.upperBound, second.upperBound, "\(first) and \(second) overlap, not at a tail")
            }
        }
    }

    func testServerIgnoringRangesGivesOneCorrectStream() throws {
        let resource = Resource.generated(size: (3 << 20) + 5, seed: 3)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.ignoreRange)])
        let output = path("f")
        let run = try CLI.run(["-n", "8", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(run.stderr.contains("one stream"), run.stderr)
    }

    func testNameComesFromContentDispositionSanitised() throws {
        var resource = Resource.generated(size: 1000, seed: 9)
        resource.contentDisposition = "attachment; filename=\"../../evil/.report.pdf\""
        server.setResource(resource, at: "download")
        let run = try CLI.run(["-q", server.url("download")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("report.pdf"), resource)
    }

    func testExistingFileIsNotOverwrittenWithoutForce() throws {
        let resource = Resource.generated(size: 100, seed: 5)
        server.setResource(resource, at: "f")
        let output = path("f")
        _ = FileManager.default.createFile(atPath: output, contents: Data("keep me".utf8))
        let refused = try CLI.run(["-q", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.stderr.contains("--force"), refused.stderr)
        XCTAssertEqual(try String(contentsOfFile: output, encoding: .utf8), "keep me")
        let forced = try CLI.run(["-q", "--force", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        assertSameBytes(output, resource)
    }

    func testBadInputGetsOneLineAndExitTwo() throws {
        let cases: [[String]] = [
            ["--no-such-flag", server.url("f")],
            ["-n", "0", server.url("f")],
            ["-n", "-3", server.url("f")],
            ["-n", "many", server.url("f")],
            ["ftp://127.0.0.1/file"],
            ["not a url"],
            [],
            ["-d", "/proc/no-such-dir", server.url("f")],
            ["-o"]
        ]
        for arguments in cases {
            let run = try CLI.run(arguments, in: directory)
            XCTAssertEqual(run.status, 2, "\(arguments): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "\(arguments): one line, got \(run.stderr)")
            XCTAssertTrue(run.stderr.hasPrefix("rangeget: "), run.stderr)
        }
        let contents = try FileManager.default.contentsOfDirectory(atPath: directory).filter { !$0.hasPrefix(".std") }
        XCTAssertEqual(contents, [], "nothing written")
    }

    func testMissingFileFailsWithExitOne() throws {
        let run = try CLI.run(
            ["-q", "--retries", "1", "--retry-wait", "0.05", "-o", path("x"), server.url("absent")],
            in: directory)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("404"), run.stderr)
    }

    func testHelpAndVersion() throws {
        let help = try CLI.run(["--help"], in: directory)
        XCTAssertEqual(help.status, 0)
        for option in ["--output", "--dir", "--connections", "--quiet", "--restart", "--force", "--version"] {
            XCTAssertTrue(help.stdout.contains(option), "help lists \(option)")
        }
        let version = try CLI.run(["--version"], in: directory)
        XCTAssertEqual(version.status, 0)
        XCTAssertTrue(version.stdout.hasPrefix("rangeget "), version.stdout)
    }
}

/// A background checkpoint still running when the last byte arrives must not
/// bring the manifest back after the file was renamed into place.
final class CheckpointRaceTests: EndToEndTestCase {
    func testNoManifestIsLeftBehindWhenACheckpointIsInFlightAtTheEnd() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 31)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        var options = DownloadOptions()
        options.connections = 2
        options.checkpointInterval = 0.02
        // Slow manifest saves: one is nearly always in flight.
        options.systemCalls.fsync = { descriptor in
            usleep(200_000)
            return SystemCalls.live.fsync(descriptor)
        }
        let output = path("f")
        let result = try Download(url: server.url("f"), destination: .file(output), options: options).run(onEvent: {
            _ in
        })
        XCTAssertEqual(result.path, output)
        assertSameBytes(output, resource)
        usleep(300_000)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output + ".part.json"), "stale manifest after completion")
        XCTAssertFalse(FileManager.default.fileExists(atPath: output + ".part.json.tmp"))
    }
}
