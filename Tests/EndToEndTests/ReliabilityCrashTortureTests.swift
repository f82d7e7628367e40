// RELIABILITY.md case 19: kill -9 at any moment, many times in a row. The
// binary is SIGKILLed at seeded random moments (during startup, the probe,
// transfers and checkpoints alike) on a throttled server; after every kill the
// manifest must be loadable and match the data file; in the end the file is
// byte-identical and the bytes served exceed the size by at most about one
// checkpoint interval of transfer per kill.
import Foundation
import Glibc
import RangeGet
import RangeServer
import XCTest

final class ReliabilityCrashTortureTests: EndToEndTestCase {
    /// Checks a sample of every range a resumed run would trust (first, last and
    /// one random 64 KiB of each) against the resource; returns the bytes listed.
    private func assertManifestSampleMatchesDisk(
        _ manifestPath: String, data dataPath: String, _ resource: Resource,
        random: inout SplitMix64, context: String
    ) -> Int64 {
        let ranges: [Range<Int64>]
        do {
            ranges = try ManifestFile.trusted(manifestPath) ?? []
        } catch {
            XCTFail("\(context): the manifest is unreadable after a kill: \(error)")
            return 0
        }
        guard let handle = FileHandle(forReadingAtPath: dataPath) else {
            if !ranges.isEmpty { XCTFail("\(context): no data file, but the manifest lists \(ranges)") }
            return 0
        }
        defer { try? handle.close() }
        let window: Int64 = 64 << 10
        var listed: Int64 = 0
        for range in ranges {
            listed += Int64(range.count)
            var starts = [range.lowerBound, max(range.lowerBound, range.upperBound - window)]
            if range.count > window {
                starts.append(range.lowerBound + Int64.random(in: 0...(Int64(range.count) - window), using: &random))
            }
            for start in starts {
                let sample = start..<min(start + window, range.upperBound)
                if handle.firstDifference(from: resource, in: sample) != nil {
                    XCTFail("\(context): the manifest lists \(range) but bytes \(sample) on disk differ")
                    return listed
                }
            }
        }
        return listed
    }

    /// 20 SIGKILLs in a row: 14 at random moments from launch to 1.5 s (startup,
    /// probe, preallocation, first checkpoint), 6 at a random moment up to 1 s
    /// after a checkpoint recorded new progress; then a clean run finishes.
    func test19TwentySIGKILLsAtRandomMomentsThenAByteIdenticalFile() throws {
        let connections = 4
        let rate = 512 << 10
        let size: Int64 = 64 << 20
        let kills = 20
        let resource = Resource.generated(size: size, seed: 19)
        server.setResource(resource, at: "torture.bin")
        server.setRatePerConnection(rate)
        let output = path("torture.bin")
        let arguments = ["-q", "-n", "\(connections)", "-o", output, server.url("torture.bin")]
        var random = SplitMix64(seed: 0x19_19)
        var durable: Int64 = 0
        var rounds: [String] = []
        let started = Date()
        for round in 1...kills {
            let sentBefore = server.statistics.bodyBytesSent
            let child = try launch(arguments)
            let afterProgress = round % 3 == 0 || round == kills
            if afterProgress {
                let before = ManifestFile.doneBytes(output + ".part.json")
                XCTAssertTrue(
                    wait(timeout: 15) { ManifestFile.doneBytes(output + ".part.json") > before },
                    "round \(round): a durable checkpoint recorded new progress")
            }
            let delay =
                afterProgress ? Double.random(in: 0...1.0, using: &random) : Double.random(in: 0...1.5, using: &random)
            usleep(UInt32(delay * 1_000_000))
            XCTAssertTrue(
                child.isRunning, "round \(round): rangeget ended before the kill (file too small for the torture)")
            kill(child.pid, SIGKILL)
            child.process.waitUntilExit()
            XCTAssertEqual(child.process.terminationReason, .uncaughtSignal, "round \(round)")
            _ = child.finish(timeout: 1)
            let listed = assertManifestSampleMatchesDisk(
                output + ".part.json", data: output + ".part", resource,
                random: &random, context: "round \(round)")
            XCTAssertGreaterThanOrEqual(listed, durable, "round \(round): durable progress never goes back")
            XCTAssertLessThan(listed, size)
            usleep(20_000) // let the server count its last writes
            let sent = server.statistics.bodyBytesSent - sentBefore
            rounds.append(
                "\(round):\(afterProgress ? "+" : "")\(String(format: "%.2f", delay))s sent \(sent >> 10)K "
                    + "kept \((listed - durable) >> 10)K")
            durable = max(durable, listed)
        }
        XCTAssertGreaterThan(durable, 0, "the kills still let progress through")

        server.setRatePerConnection(nil)
        let run = try CLI.run(
            ["-n", "\(connections)", "-o", output, server.url("torture.bin")], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("resuming"), run.stderr)
        assertSameBytes(output, resource)
        XCTAssertEqual(directoryEntries(), ["torture.bin"], "no .part, manifest or temporary file left")
        // The README's claim: a kill costs what was still in the sockets plus at
        // most one write per connection not yet in the journal (a paced slice
        // here, a few KiB). Allowed: 64 KiB per connection per kill, plus a
        // twentieth of the file for what work stealing leaves in cut sockets
        // during the unthrottled last run.
        let perKill = Int64(connections) * (64 << 10)
        let bound = size + size / 20 + Int64(kills) * perKill
        XCTAssertLessThanOrEqual(
            server.statistics.bodyBytesSent, bound,
            "served \(server.statistics.bodyBytesSent) bytes for a \(size)-byte file after \(kills) kills")
        print(
            "crash torture: \(kills) kills, \(durable) bytes durable before the last run, "
                + "\(server.statistics.bodyBytesSent) bytes served for \(size) (bound \(bound)), "
                + "\(String(format: "%.1f", Date().timeIntervalSince(started))) s; rounds: "
                + rounds.joined(separator: ", "))
    }
}
