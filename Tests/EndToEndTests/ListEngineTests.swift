// Issue 15: one engine for a whole list. These tests check, from the outside
// (the built binary against loopback RangeServers), what the issue asks of
// a list run: connections reused across the files (counted at the server),
// no manifest for a file one response fetches whole (and a run killed in
// the middle of one resumed or restarted, never refused), a kill -9 in the
// middle of a list leaving the complete files intact and the partial one
// resumable, and `--json` reporting each file as it finishes.
//
// On the code before the rework (lanes, one Download and multi handle per
// file), these fail, as expected:
// - testAListReusesConnectionsAcrossItsFiles and
//   testAListWithOneConnectionUsesOneConnectionInAll: every file opens its
//   own TCP connection (60 and 8 connections accepted).
// - testNoManifestForASingleFileFetchedWholeByItsFirstResponse and
//   testNoManifestForAListEntryFetchedWholeByItsFirstResponse: a single
//   stream of known length gets a `.part.json` as soon as its response
//   starts (Download.run saves a fresh manifest before the engine runs).
//   The reruns after the kill already complete (exit 0).
// - testJSONReportsEachFileAsItFinishesThenTheSummary: `--json` prints one
//   object at the end of the run, nothing while files finish.
// This one is expected to pass already (issue 14 made lists resumable):
// - testAKillInTheMiddleOfAListKeepsCompleteFilesAndResumesThePartialOne.
//
// No timed assertions: a slow file is held back by a server rate (lifted
// when the test has seen what it waits for), every wait is bounded, and
// what is compared is counts at the server, names in a directory and bytes.
import Foundation
import Glibc
import RangeServer
import Synchronization
import XCTest

final class ListEngineTests: EndToEndTestCase {
    /// The `-d` directory of every run: only the downloads and their partial files.
    private var downloads: String { path("out") }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try FileManager.default.createDirectory(atPath: path("out"), withIntermediateDirectories: true)
    }

    /// Writes the list file `list` in the test directory: one entry per
    /// line, `out=NAME` on an indented line below when a name is given.
    private func writeList(_ entries: [(url: String, out: String?)]) throws {
        let text = entries.map { entry in entry.url + "\n" + (entry.out.map { "  out=\($0)\n" } ?? "") }.joined()
        try Data(text.utf8).write(to: URL(fileURLWithPath: path("list")))
    }

    /// The names in the `-d` directory, sorted.
    private func downloaded() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []).sorted()
    }

    /// Polls the `-d` directory every 10 ms until `condition` holds (at most
    /// `timeout` seconds); returns whether it held and every name of the
    /// download seen there meanwhile (not the empty file rangeget creates
    /// and removes at once to check that the directory is writable,
    /// OutputDirectory's, which a poll catches now and then).
    private func watchDownloads(timeout: Double, until condition: () -> Bool) -> (met: Bool, seen: Set<String>) {
        var seen = Set<String>()
        let deadline = Date().addingTimeInterval(timeout)
        var met = false
        while Date() < deadline {
            seen.formUnion(downloaded())
            if condition() {
                met = true
                break
            }
            usleep(10_000)
        }
        seen.formUnion(downloaded())
        return (met || condition(), seen.filter { !$0.hasPrefix(".rangeget-write-test-") })
    }

    // MARK: - 1. Connections reused across the files of a list

    /// 60 files of 16 KiB from one server with `-n 4`: each comes whole in
    /// one response, and the connections go from one file to the next
    /// (keep-alive) instead of one new connection per file.
    func testAListReusesConnectionsAcrossItsFiles() throws {
        let count = 60
        let connections = 4
        let resources = (0..<count).map { Resource.generated(size: 16 << 10, seed: 1500 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: name(index)) }
        try writeList((0..<count).map { (server.url(name($0)), nil) })

        let run = try CLI.run(["-q", "-n", "\(connections)", "-i", "list", "-d", "out"], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, resource) in resources.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        XCTAssertEqual(downloaded(), (0..<count).map(name).sorted(), "nothing but the files is left")
        let accepted = server.statistics.connectionsAccepted
        XCTAssertLessThanOrEqual(
            accepted, connections + 2,
            "\(count) files over -n \(connections) took \(accepted) TCP connections: the engine "
                + "holds at most \(connections) at a time and keeps them alive from one file to the "
                + "next, so the whole list needs about \(connections) (2 spare for a connection the "
                + "engine closes and replaces), not one per file")
    }

    /// Several files with `-n 1`: one connection carries them all.
    func testAListWithOneConnectionUsesOneConnectionInAll() throws {
        let count = 8
        let resources = (0..<count).map { Resource.generated(size: 16 << 10, seed: 1600 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: name(index)) }
        try writeList((0..<count).map { (server.url(name($0)), nil) })

        let run = try CLI.run(["-q", "-n", "1", "-i", "list", "-d", "out"], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, resource) in resources.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        XCTAssertEqual(
            server.statistics.connectionsAccepted, 1,
            "-n 1 over \(count) files of one server: a single keep-alive connection fetches them all")
        XCTAssertEqual(server.statistics.requests.count, count, "one request per file: \(server.statistics.requests)")
    }

    /// The small files of a list reuse the easy handles of earlier files'
    /// openings (a handle keeps the options it was given): each request still
    /// asks for its own file and range, and the credentials of one file's
    /// URL go with its requests only, never with the next file's.
    func testEachFileOfAListSendsItsOwnRequestOnReusedHandles() throws {
        let count = 30
        let resources = (0..<count).map { Resource.generated(size: 16 << 10, seed: 1700 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: name(index)) }
        let credentials = { (index: Int) in index % 3 == 0 ? "u\(index):p\(index)" : nil }
        try writeList(
            (0..<count).map { index in
                let url = server.url(name(index))
                guard let userinfo = credentials(index) else { return (url, nil) }
                return (url.replacingOccurrences(of: "http://", with: "http://\(userinfo)@"), nil)
            })

        let run = try CLI.run(["-q", "-n", "2", "-j", "2", "-i", "list", "-d", "out"], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, resource) in resources.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        let requests = server.statistics.requests
        XCTAssertEqual(requests.count, count, "one request per file: \(requests)")
        for index in 0..<count {
            let sent = requests.filter { $0.path == "/" + name(index) }
            XCTAssertEqual(sent.count, 1, name(index))
            // (`bytes=0-` where the server's requests waited 10 ms for their first byte: a loaded machine)
            XCTAssertTrue(["bytes=0-1048575", "bytes=0-"].contains(sent.first?.rangeHeader), "\(name(index)): \(sent)")
            let expected = credentials(index).map { "Basic " + Data($0.utf8).base64EncodedString() }
            XCTAssertEqual(sent.first?.headers["authorization"], expected, name(index))
        }
    }

    private func name(_ index: Int) -> String { String(format: "f%02d", index) }

    // MARK: - 2. No manifest for a file fetched whole by its first response

    /// 256 KiB, below the 1 MiB minimum split and above the 128 KiB that an
    /// opening request keeps in memory: the opening request
    /// (`Range: bytes=0-1048575`) gets it whole, written as it comes. Served
    /// at 32 KiB/s it takes about 8 s; while it comes its `.part` is there
    /// and no `.part.json` ever is. Killed (-9) after 32 KiB, the same
    /// command run again completes it (restarted or resumed, never refused).
    func testNoManifestForASingleFileFetchedWholeByItsFirstResponse() throws {
        let resource = Resource.generated(size: 256 << 10, seed: 1700)
        let watched = try killWhileServedSlowly(resource)
        XCTAssertEqual(
            server.statistics.requests.first?.rangeHeader, "bytes=0-1048575",
            "the first request asks for the minimum split, which holds the whole file")
        XCTAssertTrue(watched.contains("small.bin.part"), "the .part was there: \(watched)")
        XCTAssertFalse(
            watched.contains { $0.hasSuffix(".part.json") },
            "a file fetched whole by its first response needs no manifest, but one appeared: \(watched)")
        XCTAssertFalse(downloaded().contains { $0.hasSuffix(".part.json") }, "after the kill: \(downloaded())")
        try assertRerunCompletes(resource)
    }

    /// Serves `resource` as `small.bin` at 32 KiB/s, runs `rangeget -q -d out`
    /// on it and kills it (-9) once 32 KiB are sent; what `out` held meanwhile.
    private func killWhileServedSlowly(_ resource: Resource) throws -> Set<String> {
        server.setResource(resource, at: "small.bin")
        server.setRatePerConnection(32 << 10)
        let child = try launch(["-q", "-d", "out", server.url("small.bin")])
        let watched = watchDownloads(timeout: 20) { server.statistics.bodyBytesSent >= 32 << 10 }
        child.kill9()
        XCTAssertTrue(watched.met, "32 KiB of the file were sent")
        return watched.seen
    }

    /// The same command as `killWhileServedSlowly`'s, run again at full
    /// speed, completes the file (never refused).
    private func assertRerunCompletes(_ resource: Resource, file: StaticString = #filePath, line: UInt = #line) throws {
        server.setRatePerConnection(nil)
        let rerun = try CLI.run(["-q", "-d", "out", server.url("small.bin")], in: directory, timeout: 30)
        XCTAssertEqual(
            rerun.status, 0, "the rerun after a kill in the middle is never refused: \(rerun.stderr)",
            file: file, line: line)
        assertSameBytes(downloads + "/small.bin", resource, file: file, line: line)
        XCTAssertEqual(downloaded(), ["small.bin"], file: file, line: line)
    }

    /// The same for an entry of a list (named with `out=`), between two
    /// small files of another server: no `.part.json` for any of them, and
    /// the rerun of the list after a kill -9 completes all three.
    func testNoManifestForAListEntryFetchedWholeByItsFirstResponse() throws {
        // A server of its own for the slow file: a rate set on it slows that file and nothing else.
        let slow = try anotherServer()
        let first = Resource.generated(size: 16 << 10, seed: 1710)
        let held = Resource.generated(size: 256 << 10, seed: 1711)
        let last = Resource.generated(size: 16 << 10, seed: 1712)
        server.setResource(first, at: "a")
        slow.setResource(held, at: "held")
        server.setResource(last, at: "b")
        slow.setRatePerConnection(32 << 10)
        try writeList([(server.url("a"), nil), (slow.url("held"), "renamed.bin"), (server.url("b"), nil)])
        let arguments = ["-q", "-n", "4", "-i", "list", "-d", "out"]

        let child = try launch(arguments)
        let watched = watchDownloads(timeout: 20) { slow.statistics.bodyBytesSent >= 32 << 10 }
        child.kill9()
        XCTAssertTrue(watched.met, "32 KiB of the held file were sent")
        XCTAssertEqual(slow.statistics.requests.first?.rangeHeader, "bytes=0-1048575")
        XCTAssertTrue(watched.seen.contains("renamed.bin.part"), "the .part was there: \(watched.seen)")
        XCTAssertFalse(
            watched.seen.contains { $0.hasSuffix(".part.json") },
            "files fetched whole by their first responses need no manifest, but one appeared: \(watched.seen)")
        XCTAssertFalse(downloaded().contains { $0.hasSuffix(".part.json") }, "after the kill: \(downloaded())")

        slow.setRatePerConnection(nil)
        let rerun = try CLI.run(arguments, in: directory, timeout: 30)
        XCTAssertEqual(rerun.status, 0, "the rerun after a kill in the middle is never refused: \(rerun.stderr)")
        assertSameBytes(downloads + "/a", first)
        assertSameBytes(downloads + "/renamed.bin", held)
        assertSameBytes(downloads + "/b", last)
        XCTAssertEqual(downloaded(), ["a", "b", "renamed.bin"])
    }

    /// 64 KiB, at most the 128 KiB an opening request keeps in memory: no
    /// file of it is made until every byte is in, so a kill -9 while it
    /// comes (at 32 KiB/s) leaves nothing behind, and the rerun fetches it.
    func testASmallFileIsKeptInMemoryUntilItIsWhole() throws {
        let resource = Resource.generated(size: 64 << 10, seed: 1730)
        let seen = try killWhileServedSlowly(resource)
        XCTAssertEqual(seen, [], "nothing is written before the whole file is in")
        XCTAssertEqual(downloaded(), [], "after the kill")
        try assertRerunCompletes(resource)
    }

    /// A small file whose 206 runs past its own Content-Range (1000 bytes
    /// more): the request that would keep it in memory ends at the first
    /// byte too many, none of it is written, and the file is fetched again.
    func testASmallFileWhoseAnswerRunsPastItsContentRangeIsFetchedAgain() throws {
        let resource = Resource.generated(size: 16 << 10, seed: 1740)
        server.setResource(resource, at: "small.bin")
        server.setFaults([FaultRule(.overlong(1000), when: .nthRequest(1))])

        let run = try CLI.run(["-q", "-d", "out", server.url("small.bin")], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(downloads + "/small.bin", resource)
        let requests = server.statistics.requests
        XCTAssertEqual(requests.first?.fault, "overlong:1000")
        XCTAssertTrue(
            requests.dropFirst().contains { $0.method == "GET" && $0.fault == nil },
            "fetched again: \(requests)")
    }

    // MARK: - 3. A kill -9 in the middle of a list

    /// Ten small files and, last, an 8 MiB one served at 512 KiB/s per
    /// connection (ranged, so it has a manifest), `-n 4`. Killed (-9) once
    /// the small ones are saved and 2 MiB of the large one are sent: the
    /// saved files are the server's bytes, the large one's `.part` and
    /// manifest are there; the rerun exits 0, fetches nothing of the saved
    /// files (at most a HEAD each, no body byte) and not the whole large one
    /// again.
    func testAKillInTheMiddleOfAListKeepsCompleteFilesAndResumesThePartialOne() throws {
        let slow = try anotherServer()
        let smallCount = 10
        let small = (0..<smallCount).map {
            Resource.generated(size: (16 << 10) + Int64($0) * 4096, seed: 1800 + UInt64($0))
        }
        for (index, resource) in small.enumerated() { server.setResource(resource, at: name(index)) }
        let large = Resource.generated(size: 8 << 20, seed: 1820)
        slow.setResource(large, at: "large")
        slow.setRatePerConnection(512 << 10)
        try writeList((0..<smallCount).map { (server.url(name($0)), nil) } + [(slow.url("large"), nil)])
        let arguments = ["-q", "-n", "4", "-i", "list", "-d", "out"]

        let child = try launch(arguments)
        let smallSaved = {
            small.indices.allSatisfy { self.fileSize(self.downloads + "/" + self.name($0)) == small[$0].size }
        }
        XCTAssertTrue(
            wait(timeout: 20) { smallSaved() && slow.statistics.bodyBytesSent >= 2 << 20 },
            "the small files saved, the large one under way")
        child.kill9()
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: downloads + "/large"),
            "the large file was still partial at the kill (the test needs it so)")
        for (index, resource) in small.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: downloads + "/large.part"), "\(downloaded())")
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: downloads + "/large.part.json"),
            "a ranged download keeps a manifest: \(downloaded())")

        slow.setRatePerConnection(nil)
        server.resetStatistics()
        slow.resetStatistics()
        let rerun = try CLI.run(arguments, in: directory, timeout: 30)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        for (index, resource) in small.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        assertSameBytes(downloads + "/large", large)
        XCTAssertEqual(downloaded(), ((0..<smallCount).map(name) + ["large"]).sorted(), "no partial file is left")
        for index in small.indices {
            let requests = server.statistics.requests(to: name(index))
            XCTAssertLessThanOrEqual(
                requests.count, 1, "\(name(index)) was complete: checked once at most: \(requests)")
            XCTAssertEqual(
                requests.reduce(0) { $0 + $1.bodyBytesSent }, 0,
                "\(name(index)) was complete: no byte of it is fetched again: \(requests)")
        }
        let servedAgain = slow.statistics.bodyBytesSent
        XCTAssertLessThan(
            servedAgain, large.size,
            "the rerun resumed the large file: \(servedAgain) of its \(large.size) bytes served again")
    }

    // MARK: - 4. --json: a line per file as it finishes, then the summary

    /// Three small files and, first in the list, a 512 KiB one held back at
    /// 32 KiB/s. While it is held, the three small ones are saved and their
    /// lines are on stdout already; once it is let go, its line follows and
    /// the summary ends the output. Every line is one JSON object; a file's
    /// line is the entry today's summary lists for it in `files`.
    func testJSONReportsEachFileAsItFinishesThenTheSummary() throws {
        let slow = try anotherServer()
        let held = Resource.generated(size: 512 << 10, seed: 1900)
        slow.setResource(held, at: "held")
        slow.setRatePerConnection(32 << 10)
        let fast = (0..<3).map { Resource.generated(size: 16 << 10, seed: 1901 + UInt64($0)) }
        for (index, resource) in fast.enumerated() { server.setResource(resource, at: name(index)) }
        try writeList([(slow.url("held"), nil)] + (0..<fast.count).map { (server.url(name($0)), nil) })

        let child = try launch(["--json", "-n", "4", "-i", "list", "-d", "out"])
        XCTAssertTrue(
            wait(timeout: 20) {
                fast.indices.allSatisfy { self.fileSize(self.downloads + "/" + self.name($0)) == fast[$0].size }
            }, "the small files are saved while the held one comes")
        // Bounded: a line is printed (and flushed) when its file is saved.
        let early = wait(timeout: 5) { self.jsonLines(child.stdoutURL).count >= fast.count }
        let earlyLines = jsonLines(child.stdoutURL)
        XCTAssertTrue(early, "a line for each small file while the held one is still coming: \(earlyLines)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: downloads + "/held"), "the held file was still coming")
        XCTAssertEqual(
            Set(earlyLines.compactMap { fileName($0["file"]) }), Set((0..<fast.count).map(name)),
            "the early lines are the small files': \(earlyLines)")

        slow.setRatePerConnection(nil)
        let run = child.finish(timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(downloads + "/held", held)
        for (index, resource) in fast.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }

        let lines = run.stdout.split(separator: "\n").map(String.init)
        let objects = lines.map { line in (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] }
        for (line, object) in zip(lines, objects) {
            XCTAssertNotNil(object, "a line of stdout that is no JSON object: \(line)")
        }
        let parsed = objects.compactMap { $0 }
        XCTAssertEqual(parsed.count, fast.count + 2, "one line per file, then the summary: \(run.stdout)")
        guard parsed.count == fast.count + 2, let summary = parsed.last else { return }
        let perFile = Array(parsed.dropLast())
        XCTAssertEqual(perFile.map { fileName($0["file"]) }.last, "held", "the held file finished last: \(run.stdout)")
        XCTAssertEqual(Set(perFile.compactMap { fileName($0["file"]) }), Set(["held"] + (0..<fast.count).map(name)))
        // The keys a saved file's entry has in today's `files`.
        let entryKeys: Set<String> = [
            "outcome", "exitCode", "file", "size", "seconds", "averageBytesPerSecond", "bytesFetched",
            "bytesReused", "retries", "connectionsUsed", "tcpConnections", "alreadyComplete", "mirrors"
        ]
        for object in perFile {
            XCTAssertEqual(object["outcome"] as? String, "complete", "\(object)")
            XCTAssertEqual(object["exitCode"] as? Int, 0, "\(object)")
            XCTAssertTrue(
                entryKeys.isSubset(of: Set(object.keys)),
                "a file's line has the shape of its entry in the summary's files: \(object)")
        }
        XCTAssertEqual(perFile.first { fileName($0["file"]) == "held" }?["size"] as? Int, Int(held.size))

        XCTAssertEqual(summary["outcome"] as? String, "complete", "the last line is the summary: \(summary)")
        if let files = summary["files"] as? [[String: Any]] {
            XCTAssertEqual(files.count, fast.count + 1, "\(summary)")
            for object in perFile {
                let entry = files.first { fileName($0["file"]) == fileName(object["file"]) }
                XCTAssertEqual(
                    entry.map(NSDictionary.init(dictionary:)), NSDictionary(dictionary: object),
                    "a file's line is its entry in the summary's files")
            }
        } else {
            XCTAssertTrue(
                summary.values.contains { ($0 as? Int) == fast.count + 1 },
                "the summary has the files, or their count (\(fast.count + 1)): \(summary)")
        }
    }

    /// The complete lines of the file at `url` that parse as JSON objects.
    private func jsonLines(_ url: URL) -> [[String: Any]] {
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: true).dropLast(text.hasSuffix("\n") ? 0 : 1)
            .compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    // MARK: - 5. The next file is fetched while the last one is committed

    /// With `-j 1`, a file whose bytes are all fetched hands its turn on
    /// while it is verified and synced: the list's next file is requested
    /// while the first one's checksum (128 MiB of SHA-256, about half a
    /// second of CPU) is still being computed, so before its final name
    /// exists. (Before, with one lane, the name was always there first.)
    func testTheNextFileIsRequestedWhileTheLastOneIsCommitted() throws {
        let large = Resource.generated(size: 128 << 20, seed: 1900)
        let small = Resource.generated(size: 16 << 10, seed: 1901)
        server.setResource(large, at: "large")
        let finalName = downloads + "/large"
        let committedBeforeTheNext = Mutex<Bool?>(nil)
        let next = try scriptedServer { request in
            committedBeforeTheNext.withLock { if $0 == nil { $0 = FileManager.default.fileExists(atPath: finalName) } }
            return .serving(small, request)
        }
        try writeList([(server.url("large"), nil), (next.url("small"), nil)])
        let sums = "\(try sha256(of: large))  large\n\(try sha256(of: small))  small\n"
        try Data(sums.utf8).write(to: URL(fileURLWithPath: path("SUMS")))

        let run = try CLI.run(
            ["-q", "-n", "1", "-j", "1", "-i", "list", "-d", "out", "--checksum-file", path("SUMS")],
            in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(finalName, large)
        assertSameBytes(downloads + "/small", small)
        XCTAssertEqual(
            committedBeforeTheNext.withLock { $0 }, false,
            "the next file was requested only after the first was verified, synced and renamed")
    }

    // MARK: - 6. Held flushes do not hold back the fetching

    /// Every flush of the disk is held: Benchmarks/slowflush.c, preloaded,
    /// makes fsync, fdatasync and syncfs wait while a gate file exists, so
    /// no file of the list can be committed. With `-n 1 -j 1` the files are
    /// all fetched meanwhile, one after another: a file whose bytes are all
    /// there hands its commit to the committer thread, and its lane takes up
    /// the next file. (With a fixed two lanes per job, two files were
    /// fetched, then nothing until a flush ended; with a lane waiting per
    /// file, a thread was started for each.) Once the gate goes, each file is
    /// committed and saved byte for byte.
    func testFilesAreFetchedWhileEveryFlushIsHeld() throws {
        let count = 24
        let resources = (0..<count).map { Resource.generated(size: 16 << 10, seed: 2000 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: name(index)) }
        try writeList((0..<count).map { (server.url(name($0)), nil) })
        let (child, gate) = try launchWithFlushesHeld(["-q", "-n", "1", "-j", "1", "-i", "list", "-d", "out"])
        let allRequested = wait(timeout: 30) { server.statistics.requests.count >= count }
        let requestedWhileHeld = server.statistics.requests.count
        let savedWhileHeld = downloaded().filter { !$0.hasSuffix(".part") }
        let threadsWhileHeld = threads(of: child.pid)
        try gate.open()
        let run = child.finish(timeout: 60)

        XCTAssertTrue(
            allRequested,
            "with every flush held, only \(requestedWhileHeld) of \(count) "
                + "files were requested: files waiting for their commit held back the fetching")
        // The main thread, one lane, the loop's, the committer's and the runtime's few: none per waiting file.
        XCTAssertLessThanOrEqual(
            threadsWhileHeld, 8,
            "\(count) files waiting for their commit kept "
                + "\(threadsWhileHeld) threads")
        XCTAssertEqual(savedWhileHeld, [], "a final name appeared before its data was flushed")
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, resource) in resources.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        XCTAssertEqual(downloaded(), (0..<count).map(name).sorted(), "nothing but the files is left")
    }

    /// Files waiting for their commit keep their data files open, so their
    /// number is bounded: with every flush held, a list of 600 files run
    /// with at most 400 descriptors stops fetching before they run out (256
    /// files wait at most, beyond those fetched), then goes on once the
    /// flushes do, and saves every file. (Unbounded, about 380 were saved
    /// and the rest failed with "Too many open files".)
    func testFilesWaitingForTheirCommitAreBoundedBeforeTheOpenFilesRunOut() throws {
        let count = 600
        let resource = Resource.generated(size: 4 << 10, seed: 2100)
        for index in 0..<count { server.setResource(resource, at: name(index)) }
        try writeList((0..<count).map { (server.url(name($0)), nil) })
        let (child, gate) = try launchWithFlushesHeld(
            ["-q", "-n", "2", "-j", "2", "-i", "list", "-d", "out"],
            openFiles: 400)
        // Until the fetching stops: no request for half a second.
        var requested = -1
        _ = wait(timeout: 30) {
            let now = server.statistics.requests.count
            defer { requested = now }
            usleep(500_000)
            return now == requested
        }
        try gate.open()
        let run = child.finish(timeout: 60)

        XCTAssertLessThan(requested, count, "with every flush held, all \(count) files were fetched and kept open")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(downloaded().count, count, "not every file was saved: \(run.stderr.prefix(300))")
        for index in [0, count / 2, count - 1] { assertSameBytes(downloads + "/" + name(index), resource) }
    }

    // MARK: - 8. A distant server: a file larger than the minimum split in one request

    /// 12 files of 1.5 MiB with `-n 2` from a server that waits 30 ms before
    /// every response. The first two openings go out before any delay is
    /// known and ask for the minimum split; from then on, while the files
    /// still to start take every free slot, a file's opening asks for the
    /// whole file (`bytes=0-`) and nothing more is requested of it: one
    /// wait per file instead of two.
    func testAListFromADistantServerFetchesEachLargerFileInOneRequest() throws {
        let count = 12
        let resources = (0..<count).map { Resource.generated(size: 3 << 19, seed: 2400 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: name(index)) }
        server.setLatency(0.03)
        try writeList((0..<count).map { (server.url(name($0)), nil) })

        let run = try CLI.run(["-q", "-n", "2", "-i", "list", "-d", "out"], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, resource) in resources.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        let inOne = (0..<count).filter { index in
            let gets = server.statistics.requests(to: name(index)).filter { $0.method == "GET" }
            return gets.count == 1 && gets[0].rangeHeader == "bytes=0-"
        }
        // The first two go out blind, and the last one or two may find a slot
        // free (nothing waits to take it) and be split as a single file is.
        XCTAssertGreaterThanOrEqual(
            inOne.count, count - 4,
            "files fetched in one request: \(inOne.map(name)); requests: "
                + "\(server.statistics.requests.map { "\($0.path) \($0.rangeHeader ?? "-")" })")
    }

    /// The same list from two servers at once, alternating: one waits 30 ms
    /// before every response, the other answers at once. Only the distant
    /// one's files are asked for whole; the near one's keep the minimum
    /// split (a request there costs next to nothing, and a server that
    /// sends each response's first chunk at once rewards two). One delay
    /// for the whole run, averaged over both, would treat them alike.
    func testOnlyTheDistantServersFilesOfAListAreAskedForWhole() throws {
        let near = try anotherServer()
        let count = 16
        let resources = (0..<count).map { Resource.generated(size: 3 << 19, seed: 2600 + UInt64($0)) }
        let distant = { (index: Int) in index % 2 == 0 }
        for (index, resource) in resources.enumerated() {
            (distant(index) ? server : near).setResource(resource, at: name(index))
        }
        server.setLatency(0.03)
        try writeList((0..<count).map { ((distant($0) ? server : near).url(name($0)), nil) })

        let run = try CLI.run(["-q", "-n", "2", "-i", "list", "-d", "out"], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, resource) in resources.enumerated() { assertSameBytes(downloads + "/" + name(index), resource) }
        func openings(_ of: RangeServer, _ indices: [Int]) -> [String] {
            indices.compactMap { of.statistics.requests(to: name($0)).first { $0.method == "GET" }?.rangeHeader }
        }
        let far = openings(server, (0..<count).filter(distant))
        let close = openings(near, (0..<count).filter { !distant($0) })
        XCTAssertGreaterThanOrEqual(
            far.filter { $0 == "bytes=0-" }.count, far.count - 3, "the distant server's: \(far)")
        // (a loaded machine may see 10 ms on loopback now and then)
        XCTAssertGreaterThanOrEqual(
            close.filter { $0 == "bytes=0-1048575" }.count, close.count - 2,
            "the near server's: \(close)")
    }

    /// A large file whose opening asked for all of it still keeps a plan: a
    /// kill -9 while it comes leaves its `.part` and manifest, and the rerun
    /// fetches only what is missing. Two small files from its server (20 ms
    /// before every response) measure the wait first; the large one (8 MiB
    /// at 512 KiB/s) follows, with two more files behind it to take the
    /// other slot.
    func testALargeFileFetchedInOneRequestByAListStaysResumable() throws {
        let slow = try anotherServer()
        let firsts = (0..<2).map { Resource.generated(size: 16 << 10, seed: 2500 + UInt64($0)) }
        let lasts = (0..<2).map { Resource.generated(size: 3 << 19, seed: 2510 + UInt64($0)) }
        for (index, resource) in firsts.enumerated() { slow.setResource(resource, at: name(index)) }
        for (index, resource) in lasts.enumerated() { server.setResource(resource, at: name(firsts.count + index)) }
        let large = Resource.generated(size: 8 << 20, seed: 2520)
        slow.setResource(large, at: "large")
        slow.setRatePerConnection(512 << 10)
        // Each small body leaves with its head: its opening ends in the turn
        // that sees the head, and is timed there (Opening.transferFinished).
        slow.setBurst(64 << 10)
        slow.setLatency(0.02)
        let entries =
            firsts.indices.map { (slow.url(name($0)), nil as String?) } + [(slow.url("large"), nil)]
            + lasts.indices.map { (server.url(name(firsts.count + $0)), nil as String?) }
        try writeList(entries)
        let arguments = ["-q", "-n", "2", "-i", "list", "-d", "out"]

        let child = try launch(arguments)
        XCTAssertTrue(wait(timeout: 30) { slow.statistics.bodyBytesSent >= 2 << 20 }, "the large file under way")
        child.kill9()
        let opening = slow.statistics.requests(to: "large").first
        XCTAssertEqual(
            opening?.rangeHeader, "bytes=0-", "its opening asked for the whole file (what this test is about)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: downloads + "/large"), "the large file was still partial")
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: downloads + "/large.part.json"),
            "a file above the minimum split keeps a manifest: \(downloaded())")

        slow.setRatePerConnection(nil)
        slow.resetStatistics()
        let rerun = try CLI.run(arguments, in: directory, timeout: 30)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        assertSameBytes(downloads + "/large", large)
        for (index, resource) in (firsts + lasts).enumerated() {
            assertSameBytes(downloads + "/" + name(index), resource)
        }
        XCTAssertLessThan(
            slow.statistics.bodyBytesSent, large.size - (1 << 20),
            "the rerun resumed the large file: \(slow.statistics.bodyBytesSent) of its \(large.size) bytes served again"
        )
    }

    // MARK: - 7. Names: a URL listed twice, a name taken meanwhile

    /// A list naming one URL three times (the third by `out=`), three at a
    /// time: it is fetched once, and the later entries wait for the first
    /// to end, then find it complete. (Before, each entry fetched it, and
    /// the ones that came second to its name failed, leaving a `.part`.)
    func testAListNamingOneURLThriceFetchesItOnce() throws {
        let resource = Resource.generated(size: 64 << 10, seed: 1790)
        server.setResource(resource, at: "thrice.bin")
        try writeList([
            (server.url("thrice.bin"), nil), (server.url("thrice.bin"), nil),
            (server.url("thrice.bin"), "thrice.bin")
        ])
        let run = try CLI.run(["-n", "4", "-j", "3", "-i", "list", "-d", "out"], in: directory)

        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(
            run.stderr.components(separatedBy: "out/thrice.bin is already complete").count - 1, 2, run.stderr)
        XCTAssertTrue(run.stderr.contains("3 of 3 files downloaded (2 already complete)"), run.stderr)
        assertSameBytes(downloads + "/thrice.bin", resource)
        XCTAssertEqual(downloaded(), ["thrice.bin"])
        let fetches = server.statistics.requests.filter { $0.method == "GET" }
        XCTAssertEqual(fetches.count, 1, "fetched more than once: \(fetches.map(\.rangeHeader))")
    }

    /// An entry waiting for an earlier one of the same URLs hands its turn
    /// on: with `-j 2` and the first two entries one slow URL, the third
    /// (another URL) is saved while the first still comes.
    func testAnEntryWaitingForItsURLsHoldsNoTurn() throws {
        let slow = try anotherServer()
        let held = Resource.generated(size: 1 << 20, seed: 1798)
        let small = Resource.generated(size: 16 << 10, seed: 1799)
        slow.setResource(held, at: "held")
        server.setResource(small, at: "b")
        slow.setRatePerConnection(32 << 10)
        try writeList([(slow.url("held"), nil), (slow.url("held"), nil), (server.url("b"), nil)])
        let child = try launch(["-q", "-n", "4", "-j", "2", "-i", "list", "-d", "out"])
        let saved = wait(timeout: 15) { FileManager.default.fileExists(atPath: downloads + "/b") }
        let heldSent = slow.statistics.bodyBytesSent
        slow.setRatePerConnection(nil)
        let run = child.finish(timeout: 30)

        XCTAssertTrue(saved, "b waited for the slow file (1 MiB at 32 KiB/s) to end")
        XCTAssertLessThan(heldSent, held.size, "the slow file was done before b")
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(downloads + "/b", small)
        assertSameBytes(downloads + "/held", held)
        XCTAssertEqual(slow.statistics.requests.filter { $0.method == "GET" }.count, 1, "held was fetched twice")
    }

    /// Entries whose URLs differ but whose guesses of a name agree (the
    /// server names each file, Content-Disposition) are fetched together,
    /// each saved under its own name: while the first still comes (1 MiB at
    /// 32 KiB/s), the other three are saved.
    func testEntriesTheServerNamesAreFetchedTogetherEachUnderItsName() throws {
        let slow = try anotherServer()
        let resources =
            [Resource.generated(size: 1 << 20, seed: 1793)]
            + (1..<4).map { Resource.generated(size: 16 << 10, seed: 1793 + UInt64($0)) }
        for (index, resource) in resources.enumerated() {
            var named = resource
            named.contentDisposition = "attachment; filename=\"file\(index).bin\""
            (index == 0 ? slow : server).setResource(named, at: "get\(index)/download")
        }
        slow.setRatePerConnection(32 << 10)
        try writeList((0..<4).map { ((0 == $0 ? slow : server).url("get\($0)/download"), nil) })
        let child = try launch(["-q", "-n", "4", "-j", "4", "-i", "list", "-d", "out"])
        let together = wait(timeout: 15) {
            (1..<4).allSatisfy { FileManager.default.fileExists(atPath: downloads + "/file\($0).bin") }
        }
        let slowSent = slow.statistics.bodyBytesSent
        slow.setRatePerConnection(nil)
        let run = child.finish(timeout: 30)

        XCTAssertTrue(together, "the entries named by their server waited for each other: \(downloaded())")
        XCTAssertLessThan(slowSent, resources[0].size, "the slow file was done before the others")
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(downloaded(), ["file0.bin", "file1.bin", "file2.bin", "file3.bin"])
        for (index, resource) in resources.enumerated() { assertSameBytes(downloads + "/file\(index).bin", resource) }
    }

    /// The list read its directory as it began; a name another program
    /// takes later, before that file's turn, is never replaced: the file
    /// fails (exit 2), the other program's file stays as it was, and the
    /// fetched data stays in the `.part` the message names.
    func testANameTakenWhileTheListRunsIsNeverReplaced() throws {
        let (slow, held, small) = try listWithASlowFirstFile(seed: 1791)
        let child = try launch(["-n", "1", "-j", "1", "-i", "list", "-d", "out"])
        XCTAssertTrue(wait(timeout: 20) { slow.statistics.bodyBytesSent >= 32 << 10 }, "the held file never started")
        try Data("someone else's".utf8).write(to: URL(fileURLWithPath: downloads + "/b"))
        slow.setRatePerConnection(nil)
        let run = child.finish(timeout: 30)

        XCTAssertEqual(run.status, 2, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("out/b appeared during the download (the data stays in out/b.part)"), run.stderr)
        XCTAssertEqual(try String(contentsOfFile: downloads + "/b", encoding: .utf8), "someone else's")
        assertSameBytes(downloads + "/b.part", small)
        assertSameBytes(downloads + "/held", held)
    }

    /// Another run of the same list saves a file before this run's turn
    /// for it comes: this run fetched it too, finds the same bytes under
    /// its name, and counts it saved (exit 0), leaving nothing beside it.
    func testAFileAnotherRunSavedMeanwhileWithTheSameBytesCountsAsSaved() throws {
        let (slow, held, small) = try listWithASlowFirstFile(seed: 1795)
        let child = try launch(["-n", "1", "-j", "1", "-i", "list", "-d", "out"])
        XCTAssertTrue(wait(timeout: 20) { slow.statistics.bodyBytesSent >= 32 << 10 }, "the held file never started")
        let other = try CLI.run(["-q", "-d", "out", server.url("b")], in: directory)
        XCTAssertEqual(other.status, 0, other.stderr)
        slow.setRatePerConnection(nil)
        let run = child.finish(timeout: 30)

        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("2 of 2 files downloaded"), run.stderr)
        XCTAssertEqual(
            server.statistics.requests.filter { $0.method == "GET" }.count, 2,
            "b was fetched by each run: \(server.statistics.requests.map(\.method))")
        XCTAssertEqual(downloaded(), ["b", "held"])
        assertSameBytes(downloads + "/b", small)
        assertSameBytes(downloads + "/held", held)
    }

    /// The same for a file larger than an opening request brings whole:
    /// its name is looked up after that request, so this run finds the
    /// other run's file complete and skips it, fetching no more of it than
    /// that request did.
    func testALargeFileAnotherRunSavedMeanwhileIsFoundComplete() throws {
        let (slow, held, large) = try listWithASlowFirstFile(seed: 1797, size: 8 << 20)
        let child = try launch(["-n", "1", "-j", "1", "-i", "list", "-d", "out"])
        XCTAssertTrue(wait(timeout: 20) { slow.statistics.bodyBytesSent >= 32 << 10 }, "the held file never started")
        let other = try CLI.run(["-q", "-d", "out", server.url("b")], in: directory)
        XCTAssertEqual(other.status, 0, other.stderr)
        let sentBefore = server.statistics.bodyBytesSent
        slow.setRatePerConnection(nil)
        let run = child.finish(timeout: 30)

        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stderr.contains("out/b is already complete (the same as the server's): skipped"), run.stderr)
        XCTAssertEqual(downloaded(), ["b", "held"])
        assertSameBytes(downloads + "/b", large)
        assertSameBytes(downloads + "/held", held)
        // The opening request asks for the first MiB; a run that took the
        // name for free would fetch all 8 again.
        XCTAssertLessThanOrEqual(
            server.statistics.bodyBytesSent - sentBefore, 1 << 20,
            "more than the opening request's bytes of b were fetched again")
    }

    /// A list of two files for `-j 1`: `held` (256 KiB at 32 KiB/s, from
    /// the server of its own returned), then `b` (`size` bytes), whose turn
    /// comes once the rate is lifted.
    private func listWithASlowFirstFile(seed: UInt64, size: Int64 = 16 << 10)
        throws -> (slow: RangeServer, held: Resource, small: Resource)
    {
        let slow = try anotherServer()
        let held = Resource.generated(size: 256 << 10, seed: seed)
        let small = Resource.generated(size: size, seed: seed + 1)
        slow.setResource(held, at: "held")
        server.setResource(small, at: "b")
        slow.setRatePerConnection(32 << 10)
        try writeList([(slow.url("held"), nil), (server.url("b"), nil)])
        return (slow, held, small)
    }

    /// The threads process `pid` runs now.
    private func threads(of pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).count
    }

    /// The last path component of a `file` field, nil if there is none.
    private func fileName(_ value: Any?) -> String? {
        (value as? String).map { URL(fileURLWithPath: $0).lastPathComponent }
    }
}
