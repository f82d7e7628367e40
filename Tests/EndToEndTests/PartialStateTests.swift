// Issue 14: what a partial download left behind is reported as it is.
// `rangeget status` tells a resumable partial from one whose checksum
// failed (complete, kept, shown with both digests) and from a single
// stream of unknown length (not resumable), and exits 4 only for damage;
// and a single stream's messages agree with what the next run will do.
import Foundation
import Glibc
import RangeServer
import XCTest

final class PartialStateTests: EndToEndTestCase {
    /// `rangeget status --json` in the test directory: its exit code and entries by output name.
    private func status() throws -> (code: Int32, entries: [String: [String: Any]]) {
        let run = try CLI.run(["status", "--json"], in: directory)
        var entries: [String: [String: Any]] = [:]
        for entry in try run.jsonArray() { entries[entry["output"] as? String ?? "?"] = entry }
        return (run.status, entries)
    }

    func testStatusTellsResumableChecksumFailedAndNotResumableApart() throws {
        let stream = Resource.generated(size: 8 << 20, seed: 1440)
        let summed = Resource.generated(size: 2 << 20, seed: 1441)
        let partial = Resource.generated(size: 8 << 20, seed: 1442)
        server.setResource(stream, at: "stream")
        server.setResource(summed, at: "summed")
        server.setResource(partial, at: "partial")

        // (a) One stream of unknown length, killed mid-way: no manifest.
        server.setFaults([FaultRule(.chunkedNoLength)])
        server.setRatePerConnection(2 << 20)
        let killed = try interrupted(["-q", "-o", "stream", server.url("stream")], by: SIGKILL) {
            fileSize(path("stream.part")) >= 1 << 20
        }
        XCTAssertEqual(killed.status, 128 + SIGKILL)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("stream.part.json")))
        server.setFaults([])
        server.resetStatistics()

        // (c) A healthy partial, stopped with Ctrl-C (which saves its progress).
        let stopped = try interrupted(["-q", "-n", "2", "-o", "partial", server.url("partial")]) {
            server.statistics.requests.reduce(0) { $0 + $1.bodyBytesSent } >= 1 << 20
        }
        XCTAssertEqual(stopped.status, 130)
        XCTAssertGreaterThan(ManifestFile.doneBytes(path("partial.part.json")), 0)
        server.setRatePerConnection(nil)

        // (b) Complete, but not what --checksum expected: exit 3, the data kept.
        let wrong = String(repeating: "0", count: 64)
        let right = try sha256(of: summed)
        let mismatch = try CLI.run(
            ["-q", "--checksum", "sha256=\(wrong)", "-o", "summed", server.url("summed")],
            in: directory)
        XCTAssertEqual(mismatch.status, 3, mismatch.stderr)
        XCTAssertTrue(
            mismatch.stderr.contains("sha256 of the download is \(right), expected \(wrong)"), mismatch.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("summed")))

        let (code, entries) = try status()
        XCTAssertEqual(code, 0, "nothing is damaged")
        XCTAssertEqual(Set(entries.keys), ["stream", "summed", "partial"])
        XCTAssertEqual(entries["stream"]?["state"] as? String, "not resumable")
        XCTAssertEqual(entries["stream"]?["healthy"] as? Bool, false)
        XCTAssertEqual(
            entries["stream"]?["problem"] as? String,
            "one stream of unknown length (no manifest): the next run starts over")
        XCTAssertEqual(entries["summed"]?["state"] as? String, "checksum failed")
        XCTAssertEqual(entries["summed"]?["healthy"] as? Bool, false)
        XCTAssertEqual(
            entries["summed"]?["problem"] as? String,
            "sha256 is \(right), expected \(wrong) (--restart fetches it again)")
        XCTAssertEqual(entries["summed"]?["bytesLeft"] as? Int, 0)
        XCTAssertEqual(entries["partial"]?["state"] as? String, "resumable")
        XCTAssertEqual(entries["partial"]?["healthy"] as? Bool, true)
        XCTAssertNil(entries["partial"]?["problem"])
        XCTAssertGreaterThan(entries["partial"]?["bytesDone"] as? Int ?? 0, 0)

        let table = try CLI.run(["status"], in: directory)
        XCTAssertEqual(table.status, 0, table.stderr)
        XCTAssertTrue(table.stdout.contains("not resumable: one stream of unknown length"), table.stdout)
        XCTAssertTrue(table.stdout.contains("checksum failed: sha256 is \(right), expected \(wrong)"), table.stdout)
        // The table says what --json and the help say: resumable, not "ok".
        XCTAssertTrue(table.stdout.contains(" resumable "), table.stdout)
        XCTAssertFalse(table.stdout.contains(" ok "), table.stdout)

        // The right checksum finishes the checksum-failed one without fetching a byte.
        server.resetStatistics()
        let fixed = try CLI.run(
            ["-q", "--checksum", "sha256=\(right)", "-o", "summed", server.url("summed")], in: directory)
        XCTAssertEqual(fixed.status, 0, fixed.stderr)
        XCTAssertEqual(server.statistics.requests.reduce(0) { $0 + $1.bodyBytesSent }, 0, "no byte fetched again")
        assertSameBytes(path("summed"), summed)
        XCTAssertEqual(Set(try status().entries.keys), ["stream", "partial"])

        // Damage, and only damage, makes status exit 4.
        XCTAssertEqual(truncate(path("partial.part"), 0), 0)
        let (damagedCode, damaged) = try status()
        XCTAssertEqual(damagedCode, 4)
        XCTAssertEqual(damaged["partial"]?["state"] as? String, "damaged")
        XCTAssertEqual(damaged["partial"]?["problem"] as? String, "partial.part is shorter than the manifest says")
        XCTAssertEqual(damaged["stream"]?["state"] as? String, "not resumable")
    }

    /// A manifest whose mtime is past what a year in Int32 holds (tmpfs and
    /// tar keep such times): `status` trapped formatting its date (year
    /// 2147483648), and must list it like any other.
    func testStatusListsAManifestWithAnMtimeTooFarOutForAnInt32Year() throws {
        // ext4 clamps mtimes to the year 2446; tmpfs keeps them whole.
        let shared = "/dev/shm/rangeget-e2e-\(UUID().uuidString)"
        guard (try? FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)) != nil
        else {
            throw XCTSkip("no /dev/shm to keep an mtime past the year 2446 in")
        }
        addTeardownBlock { try? FileManager.default.removeItem(atPath: shared) }
        let summed = Resource.generated(size: 256 << 10, seed: 1443)
        server.setResource(summed, at: "summed")
        // A failed checksum keeps a healthy manifest, and status exits 0 on it.
        let wrong = String(repeating: "0", count: 64)
        let mismatch = try CLI.run(
            ["-q", "--checksum", "sha256=\(wrong)", "-o", "summed", server.url("summed")],
            in: shared)
        XCTAssertEqual(mismatch.status, 3, mismatch.stderr)
        let manifest = shared + "/summed.part.json"
        let seconds = 67_767_976_233_532_800
        var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, manifest, &times, 0), 0, String(cString: strerror(errno)))
        var info = stat()
        XCTAssertEqual(stat(manifest, &info), 0)
        guard info.st_mtim.tv_sec == seconds else { throw XCTSkip("/dev/shm did not keep the mtime") }

        let table = try CLI.run(["status"], in: shared)
        XCTAssertEqual(table.status, 0, table.stderr)
        XCTAssertTrue(table.stdout.contains("2147483648-01-01T00:00:00Z"), table.stdout)
        XCTAssertTrue(table.stdout.contains("checksum failed"), table.stdout)
    }

    /// One Ctrl-C delivered twice at once (to the process group, and
    /// forwarded by a wrapper) is one interrupt: the orderly stop and its
    /// line, not an exit at once without a word (which it was).
    func testTwoInterruptsAtOnceStopInOrderAndSaySo() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 1447)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let child = try launch(["-n", "4", "-o", "f", server.url("f")])
        XCTAssertTrue(wait(timeout: 20) { ManifestFile.doneBytes(path("f.part.json")) > 0 }, "progress was saved")
        kill(child.pid, SIGINT)
        kill(child.pid, SIGINT)
        let run = child.finish(timeout: 20)
        XCTAssertEqual(run.status, 130, run.stderr)
        XCTAssertTrue(run.stderr.contains("rangeget: interrupted"), run.stderr)
        XCTAssertFalse(run.stderr.contains("interrupted again"), run.stderr)

        server.setRatePerConnection(nil)
        let rerun = try CLI.run(["-o", "f", server.url("f")], in: directory)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertTrue(rerun.stderr.contains("resuming"), rerun.stderr)
        assertSameBytes(path("f"), resource)
    }

    // MARK: - A single stream's messages

    /// Of unknown length: the probe line says it is not resumable, the
    /// Ctrl-C line that the next run starts over, and the next run does.
    func testCtrlCOfAStreamOfUnknownLengthSaysTheNextRunStartsOver() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 1443)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.chunkedNoLength)])
        server.setRatePerConnection(2 << 20)
        let run = try interrupted(["-o", "f", server.url("f")]) { fileSize(path("f.part")) >= 1 << 20 }
        XCTAssertEqual(run.status, 130, run.stderr)
        XCTAssertTrue(
            run.stderr.contains(
                "the server does not say how long the file is: downloading as one stream (not resumable)"), run.stderr)
        XCTAssertTrue(
            run.stderr.contains(
                "interrupted; the server did not say how long the file is, so nothing can be resumed: the next run starts over"
            ),
            run.stderr)
        XCTAssertFalse(run.stderr.contains("again to resume"), run.stderr)

        server.setRatePerConnection(nil)
        server.resetStatistics()
        let rerun = try CLI.run(["-o", "f", server.url("f")], in: directory)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertFalse(rerun.stderr.contains("resuming"), rerun.stderr)
        // The new request's body (a late write to the old, closed connection may count in the total).
        XCTAssertGreaterThanOrEqual(
            server.statistics.requests.reduce(0) { $0 + $1.bodyBytesSent }, resource.size,
            "the whole file again")
        assertSameBytes(path("f"), resource)
    }

    /// Of known length from a server without ranges: the probe line says a
    /// later run resumes it only if the server then serves ranges, and so
    /// does the Ctrl-C line; the next run, the server still without ranges,
    /// says it downloads from the start, and interrupted in turn says the
    /// same as the first.
    func testCtrlCOfAStreamWithoutRangesPromisesAResumeOnlyIfTheServerServesThem() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 1444)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.ignoreRange)])
        server.setRatePerConnection(2 << 20)
        let interruptLine =
            "interrupted; the server does not serve byte ranges: a later run resumes it only if the server "
            + "then serves them, and otherwise starts over"
        let run = try interrupted(["-o", "f", server.url("f")]) { fileSize(path("f.part")) >= 1 << 20 }
        XCTAssertEqual(run.status, 130, run.stderr)
        XCTAssertTrue(
            run.stderr.contains(
                "the server does not serve byte ranges: downloading as one stream "
                    + "(a later run resumes it only if the server then serves them)"), run.stderr)
        XCTAssertTrue(run.stderr.contains(interruptLine), run.stderr)
        XCTAssertFalse(run.stderr.contains("again to resume"), run.stderr)
        XCTAssertGreaterThan(
            ManifestFile.doneBytes(path("f.part.json")), 0,
            "the bytes from 0 are kept for a server with ranges")
        // status says what the next run does: it starts over unless the server serves ranges by then.
        let entry = try status().entries["f"]
        XCTAssertEqual(entry?["state"] as? String, "not resumable")
        XCTAssertEqual(entry?["healthy"] as? Bool, false)
        XCTAssertEqual(
            entry?["problem"] as? String,
            "one stream (the server served no byte ranges): the next run "
                + "starts over unless the server serves ranges by then")

        // The server still serves no ranges: the next run starts from byte 0, and says so.
        server.resetStatistics()
        let again = try interrupted(["-o", "f", server.url("f")]) {
            // The stream from byte 0, asked for without a Range, is under way.
            server.statistics.requests.contains {
                $0.method == "GET" && $0.rangeHeader == nil && $0.bodyBytesSent >= 256 << 10
            }
        }
        XCTAssertEqual(again.status, 130, again.stderr)
        XCTAssertTrue(again.stderr.contains("downloading as one stream from the start"), again.stderr)
        XCTAssertTrue(again.stderr.contains(interruptLine), again.stderr)

        server.setRatePerConnection(nil)
        server.resetStatistics()
        let rerun = try CLI.run(["-o", "f", server.url("f")], in: directory)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        // It sends its ranged requests on the manifest's word ("resuming"), and the 200s tell it otherwise.
        let lines = rerun.stderr.split(separator: "\n")
        let fromTheStart = try XCTUnwrap(
            lines.lastIndex { $0.hasSuffix("downloading as one stream from the start") },
            rerun.stderr)
        XCTAssertFalse(lines[fromTheStart...].contains { $0.contains("resuming") }, rerun.stderr)
        assertSameBytes(path("f"), resource)
    }

    /// In a list the line for each interrupted file says the same.
    func testCtrlCOfAListSaysWhatTheNextRunDoesWithEachStream() throws {
        let unranged = RangeServer(configuration: .init(ratePerConnection: 1 << 20, faults: [FaultRule(.ignoreRange)]))
        unranged.setResource(.generated(size: 8 << 20, seed: 1446), at: "unranged")
        try unranged.start()
        defer { unranged.stop() }
        server.setResource(.generated(size: 8 << 20, seed: 1445), at: "unknown")
        server.setFaults([FaultRule(.chunkedNoLength)])
        server.setRatePerConnection(1 << 20)
        try Data((server.url("unknown") + "\n" + unranged.url("unranged") + "\n").utf8)
            .write(to: URL(fileURLWithPath: path("list")))
        let run = try interrupted(["-n", "2", "-i", "list"]) {
            fileSize(path("unknown.part")) >= 256 << 10 && fileSize(path("unranged.part")) >= 256 << 10
        }
        XCTAssertEqual(run.status, 130, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("failed: interrupted; the server did not say how long the file is"), run.stderr)
        XCTAssertTrue(
            run.stderr.contains("failed: interrupted; the server does not serve byte ranges: a later run resumes"),
            run.stderr)
        XCTAssertFalse(run.stderr.contains("again to resume"), run.stderr)
    }
}
