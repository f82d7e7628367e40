// One session for many downloads (issue 38), driven as a library user would
// drive it, with no @testable import: a list of files through one session
// keeps to the session's connections (TCP sockets counted in the kernel's table),
// downloads made from one session share its budget, lists report per entry,
// and the Foundation conventions (URL, response headers, a missing
// directory) hold.
import Foundation
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class SessionTests: EndToEndTestCase {
    /// Serves generated files of `sizes` (seeds from `seed` on) at `name(index)`, at 2 MiB/s per connection.
    private func serveSlowly(_ sizes: [Int64], seed: UInt64, name: (Int) -> String) -> [Resource] {
        server.setRatePerConnection(2 << 20)
        return sizes.enumerated().map { index, size in
            let resource = Resource.generated(size: size, seed: seed + UInt64(index))
            server.setResource(resource, at: name(index))
            return resource
        }
    }

    /// The README's example: six files through one session with `-n 8`.
    /// At most 8 TCP connections were open at any moment (counted by the
    /// server as it accepted them), every file has the server's bytes, and
    /// each entry was told its events and its end.
    func testAListOfSixFilesThroughOneSessionKeepsToItsConnections() async throws {
        // Slow enough per connection that the files overlap and want more than 8 connections together.
        let resources = serveSlowly([3 << 20, 2 << 20, 1 << 20, 512 << 10, 3 << 20, 64 << 10], seed: 3800) {
            "f\($0).bin"
        }
        let session = DownloadSession(configuration: .init(connections: 8))
        var options = DownloadOptions()
        options.connections = 8
        options.minimumSplit = 256 << 10
        let entries = resources.indices.map { DownloadList.Entry(url: URL(string: server.url("f\($0).bin"))!) }
        let list = session.list(entries, into: directory, options: options)
        let sockets = ClientSockets(toPort: server.port)
        let started = Mutex(Set<Int>())
        let ended = Mutex([Int: Result<DownloadResult, DownloadError>]())
        let summary = await list.run(
            onEvent: { index, event in
                if case .probed = event { started.withLock { _ = $0.insert(index) } }
            },
            onEnd: { index, result in
                ended.withLock { $0[index] = result }
            })
        XCTAssertEqual([summary.entries, summary.started, summary.complete, summary.alreadyComplete], [6, 6, 6, 0])
        XCTAssertEqual(summary.failed, [])
        XCTAssertFalse(summary.stopped)
        XCTAssertEqual(started.withLock { $0 }, Set(0..<6), "every entry was probed")
        for (index, resource) in resources.enumerated() {
            guard case let .success(result)? = ended.withLock({ $0[index] }) else {
                return XCTFail("entry \(index): \(String(describing: ended.withLock { $0[index] }))")
            }
            XCTAssertEqual(result.path, path("f\(index).bin"))
            assertSameBytes(result.path, resource)
        }
        let peak = sockets.stop()
        XCTAssertLessThanOrEqual(peak, 8, "at most 8 TCP connections at once")
        XCTAssertGreaterThan(peak, 1, "the files shared the connections")
        XCTAssertLessThanOrEqual(session.peakConnectionsInUse, 8)
        XCTAssertEqual(session.connectionsInUse, 0, "nothing is left running")
    }

    /// The command line's list runs on a session of its own: `-n 8` bounds
    /// the sockets of the whole list, and `--json`'s last line says how many
    /// TCP connections the list opened in all (races and steals may open
    /// more over the run than are ever open at once).
    func testTheCommandsListKeepsToItsConnectionsAndReportsHowManyItOpened() throws {
        let resources = serveSlowly((0..<6).map { Int64(1 + $0) << 19 }, seed: 3810) { "g\($0)" }
        let list = path("list.txt")
        try resources.indices.map { server.url("g\($0)") }.joined(separator: "\n").write(
            toFile: list, atomically: true,
            encoding: .utf8)
        let out = path("out")
        let sockets = ClientSockets(toPort: server.port, othersOnly: true)
        let run = try CLI.run(["-n", "8", "--min-split", "256K", "--json", "-d", out, "-i", list], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        for (index, resource) in resources.enumerated() { assertSameBytes(out + "/g\(index)", resource) }
        let last = try XCTUnwrap(run.stdout.split(separator: "\n").last)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
        let opened = try XCTUnwrap(summary["tcpConnections"] as? Int, "\(summary)")
        XCTAssertEqual(opened, server.statistics.connectionsAccepted, "every TCP connection the list opened")
        XCTAssertLessThanOrEqual(sockets.stop(), 8)
    }

    /// Downloads made from one session share its connection budget, each
    /// also keeping to its own `connections`; one made without a session
    /// runs alone. Both kinds fetch the right bytes, and the result carries
    /// the response's headers and final URL.
    func testDownloadsOfOneSessionShareItsBudget() async throws {
        let resources = serveSlowly([4 << 20, 4 << 20, 4 << 20], seed: 3820) { "s\($0)" }
        let session = DownloadSession(configuration: .init(connections: 4))
        var options = DownloadOptions()
        options.connections = 3
        options.minimumSplit = 256 << 10
        let downloads = resources.indices.map { index in
            session.download(
                from: URL(string: server.url("s\(index)"))!, to: .file(path("s\(index)")), options: options)
        }
        let sockets = ClientSockets(toPort: server.port)
        let results = try await withThrowingTaskGroup(of: (Int, DownloadResult).self) { group in
            for (index, download) in downloads.enumerated() { group.addTask { (index, try await download.run()) } }
            return try await group.reduce(into: [Int: DownloadResult]()) { $0[$1.0] = $1.1 }
        }
        for (index, resource) in resources.enumerated() { assertSameBytes(path("s\(index)"), resource) }
        XCTAssertLessThanOrEqual(sockets.stop(), 4, "three downloads of 3 on a session of 4")
        XCTAssertEqual(session.peakConnectionsInUse, 4, "they wanted 9 together: the session's 4 bound them")
        let remote = try XCTUnwrap(results[0]?.remoteFile)
        XCTAssertEqual(remote.contentType, "application/octet-stream")
        XCTAssertEqual(remote.headers["etag"], resources[0].etag)
        XCTAssertEqual(remote.effectiveURL, server.url("s0"))
        XCTAssertTrue(downloads.allSatisfy { $0.session === session })
        XCTAssertNil(Download(url: URL(string: server.url("s0"))!, destination: .file(path("alone"))).session)
    }

    /// Forty downloads at once on one session run on two threads the
    /// library starts: the session's loop and its worker (each download's
    /// attempts are tasks there, which wait for probes and transfers
    /// without holding it). Half probe with HEAD (requests on the loop),
    /// half with the opening request; one is paused and resumed midway (it
    /// waits parked, not on a thread). Every file has the server's bytes,
    /// and the downloads overlapped: the session's 8 connections were all
    /// in use at once.
    func testFortyDownloadsOfOneSessionRunOnTheLoopAndOneWorker() async throws {
        let resources = serveSlowly(Array(repeating: 256 << 10, count: 40), seed: 3850) { "t\($0)" }
        let session = DownloadSession(configuration: .init(connections: 8))
        let downloads = resources.indices.map { index in
            var options = DownloadOptions()
            options.connections = 2
            options.minimumSplit = 64 << 10
            options.probeWithHead = index.isMultiple(of: 2)
            return session.download(from: server.url("t\(index)"), to: .file(path("t\(index)")), options: options)
        }
        XCTAssertTrue(
            LibraryThreads.waitForNone(within: 5), "earlier tests' threads ended: \(LibraryThreads.current())")
        let threads = LibraryThreads()
        let paused = downloads[1]
        let pausedOnce = Task {
            for await event in paused.events {
                guard case let .progress(progress) = event, progress.bytesDone > 0 else { continue }
                paused.pause()
                break
            }
            while paused.state != .paused { try await Task.sleep(nanoseconds: 5_000_000) }
            try await Task.sleep(nanoseconds: 100_000_000)
            paused.resume()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for download in downloads { group.addTask { _ = try await download.run() } }
            try await group.waitForAll()
        }
        try await pausedOnce.value
        let seen = threads.stop()
        for (index, resource) in resources.enumerated() { assertSameBytes(path("t\(index)"), resource) }
        XCTAssertLessThanOrEqual(seen.peak, 2, "threads at once: \(seen.atPeak)")
        XCTAssertEqual(seen.names, ["rangeget loop", "rangeget worker"])
        XCTAssertEqual(session.peakConnectionsInUse, 8, "the downloads overlapped")
    }

    /// The final URL after a redirect is on the probe event and the result.
    func testTheFinalURLAfterARedirectIsReported() async throws {
        let target = try anotherServer()
        let resource = Resource.generated(size: 1 << 20, seed: 3830)
        target.setResource(resource, at: "data")
        server.setFaults([FaultRule(.redirect(to: target.url("data"), status: 302))])
        let download = DownloadSession.shared.download(from: server.url("moved"), to: .file(path("moved")))
        let probed = Task { () -> RemoteFile? in
            for await event in download.events { if case let .probed(remote) = event { return remote } }
            return nil
        }
        let result = try await download.run()
        assertSameBytes(result.path, resource)
        XCTAssertEqual(result.remoteFile?.effectiveURL, target.url("data"))
        let remote = await probed.value
        XCTAssertEqual(remote?.effectiveURL, target.url("data"))
        XCTAssertEqual(remote?.url, server.url("moved"))
    }

    /// A list read from a list file and a sums file, through the library:
    /// a bad line fails alone (a `ListFile` problem), a file whose digest
    /// does not match fails verification, the rest complete, and a URL
    /// listed twice is fetched once.
    func testAListFileWithASumsFileRunsThroughTheLibrary() async throws {
        let good = Resource.generated(size: 300 << 10, seed: 3840)
        let bad = Resource.generated(size: 200 << 10, seed: 3841)
        server.setResource(good, at: "good.bin")
        server.setResource(bad, at: "bad.bin")
        let text = """
            \(server.url("good.bin"))
            ftp://example.org/nope
            \(server.url("bad.bin"))
              out=renamed.bin
            \(server.url("good.bin"))
            """
        let listFile = ListFile(parsing: text)
        XCTAssertEqual(listFile.entries.map(\.line), [1, 3, 5])
        XCTAssertEqual(listFile.entries.map(\.output), [nil, "renamed.bin", nil])
        XCTAssertEqual(listFile.problems.map(\.line), [2])
        var options = DownloadOptions()
        options.checksumList = try Checksum.list(
            parsing: """
                \(try sha256(of: good))  good.bin
                \(String(repeating: "0", count: 64))  renamed.bin
                """)
        let out = path("missing/nested")
        let summary = await DownloadSession().list(listFile.entries, into: out, options: options).run()
        XCTAssertEqual(summary.complete, 2, "the good file, and its second entry, found complete")
        XCTAssertEqual(summary.alreadyComplete, 1)
        XCTAssertEqual(summary.failed, [1], "the file whose digest differs")
        assertSameBytes(out + "/good.bin", good)
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: out + "/renamed.bin"), "a file that failed its check has no name")
        XCTAssertEqual(
            server.statistics.requests(to: "good.bin").filter { $0.method == "GET" && $0.bodyBytesSent > 0 }
                .reduce(0) { $0 + $1.bodyBytesSent }, good.size, "the file listed twice was fetched once")
        XCTAssertThrowsError(try Checksum.list(parsing: "abc  x\n")) { error in
            XCTAssertEqual(error as? DownloadError, .usage("checksum file line 1: expected 'HEX  NAME'"))
        }
    }

    /// Stopping a list stops its running files keeping their resume state,
    /// starts no other, and says so in the summary.
    func testStoppingAListKeepsWhatItFetched() async throws {
        let resources = (0..<4).map { Resource.generated(size: 4 << 20, seed: 3850 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: "t\(index)") }
        server.setRatePerConnection(512 << 10)
        var options = DownloadOptions()
        options.connections = 2
        let list = DownloadSession(configuration: .init(connections: 2))
            .list(
                resources.indices.map { DownloadList.Entry(urls: [server.url("t\($0)")]) }, into: directory,
                options: options, jobs: 1)
        let task = Task { await list.run() }
        XCTAssertTrue(wait(timeout: 10) { server.statistics.bodyBytesSent > 256 << 10 }, "the first file is under way")
        task.cancel()
        let summary = await task.value
        XCTAssertTrue(summary.stopped)
        XCTAssertEqual(summary.complete, 0)
        XCTAssertLessThan(summary.started, 4, "no file started after the stop")
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: path("t0.part")), "the first file's partial download is kept")
    }

    /// The README's list example is Examples/list, word for word, and it
    /// works: six files through one session of 8 connections, every file
    /// right, never a ninth socket.
    func testTheReadmesListExampleIsTheExampleProgramAndItWorks() throws {
        let source = try String(
            contentsOf: CLI.repositoryRoot.appendingPathComponent("Examples/list/main.swift"),
            encoding: .utf8)
        let begin = try XCTUnwrap(source.range(of: "// README: begin\n"))
        let end = try XCTUnwrap(source.range(of: "// README: end\n"))
        let readme = try String(contentsOf: CLI.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        XCTAssertTrue(
            readme.contains(String(source[begin.upperBound..<end.lowerBound])),
            "README.md shows Examples/list/main.swift between its README markers")
        let resources = (0..<6).map { Resource.generated(size: Int64(1 + $0) << 19, seed: 3860 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: "e\(index).bin") }
        server.setRatePerConnection(2 << 20)
        // The example's sockets only: an earlier test's session in this
        // process may keep an idle socket to a server that had this port
        // (a fresh clone's run counted 9).
        let sockets = ClientSockets(toPort: server.port, othersOnly: true)
        let run = try CLI.run(
            [path("files")] + resources.indices.map { server.url("e\($0).bin") }, in: directory,
            timeout: 60, executable: CLI.listExample)
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertLessThanOrEqual(sockets.stop(), 8)
        for (index, resource) in resources.enumerated() { assertSameBytes(path("files/e\(index).bin"), resource) }
        XCTAssertTrue(run.stdout.contains("6 of 6 files, at most "), run.stdout)
    }

    /// Request headers are name/value pairs: they reach the server as
    /// given, and a pair that would break the request (a line break in a
    /// value, a name that is no token, the engine's own Range) fails the
    /// download with `.usage` before any request.
    func testHeadersArePairsAndAPairThatWouldBreakTheRequestIsRefused() async throws {
        let resource = Resource.generated(size: 64 << 10, seed: 3870)
        server.setResource(resource, at: "h")
        var options = DownloadOptions()
        options.transfer.headers = [("X-Token", "secret value"), ("Accept", "*/*")]
        _ = try await Download(url: server.url("h"), destination: .file(path("h")), options: options).run()
        assertSameBytes(path("h"), resource)
        let sent = try XCTUnwrap(server.statistics.requests(to: "h").first)
        XCTAssertEqual(sent.headers["x-token"], "secret value")
        for bad in [("X-Evil", "a\r\nHost: other"), ("Bad Name", "x"), ("Range", "bytes=0-")] {
            options.transfer.headers = [bad]
            server.resetStatistics()
            do {
                _ = try await Download(url: server.url("h"), destination: .file(path("h2")), options: options).run()
                XCTFail("\(bad) was sent")
            } catch {
                guard case .usage = error else { return XCTFail("\(bad): \(error)") }
            }
            XCTAssertEqual(server.statistics.requests.count, 0, "\(bad): no request went out")
        }
    }
}
