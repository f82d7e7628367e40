// Hostile servers (RELIABILITY.md, "Added after the first release"; issue
// 12): numbers past any integer type in Retry-After, Content-Length and
// Content-Range, a 206 whose body runs past its Content-Range, a server
// without ranges that always cuts the body, control characters in headers
// that messages quote, credentials in URLs and in `-H` headers that a
// redirect would carry elsewhere, and which thread events come from.
// rangeget must not crash, write outside the target, skip silently, loop
// forever or leak a secret. The faults come from RangeServer's hostile
// faults (`retry-after`, `claim-length`, `overlong`, `header`), so each
// test runs against a real socket on 127.0.0.1.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class ReliabilityHostileServerTests: EndToEndTestCase {
    /// No crash: 132 (SIGILL, how a Swift trap ends), 133 (SIGTRAP), 134 (SIGABRT), 139 (SIGSEGV).
    private func assertNoTrap(_ run: Run, _ context: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(
            [132, 133, 134, 139].contains(run.status), "\(context): crashed: \(run.stderr.prefix(300))",
            file: file, line: line)
    }

    private func hasControlCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.properties.generalCategory == .control && $0 != "\n" }
    }

    // MARK: Retry-After

    /// Retry-After values a server controls: past Int64, past any Double's
    /// integers, a date whose year does not fit `tm`. Each is one bounded
    /// wait (read as at most 1e9 s) or none; the message names it; never a trap.
    /// (They trapped: `Int(Double)` in the message, `Int32(year - 1900)` in the date.)
    func testHugeRetryAfterValuesAreBoundedNeverATrap() throws {
        let cases: [(value: String, message: String)] = [
            ("9223372036854775807", "HTTP 503 (retry after over 31 years)"),
            ("99999999999999999999999999999999999999", "HTTP 503 (retry after over 31 years)"),
            ("Sun, 06 Nov 99999999999 08:49:37 GMT", "HTTP 503"),
            ("Fri, 31 Dec 9999 23:59:59 GMT", "HTTP 503 (retry after over 31 years)"),
            ("Sun, 06 Nov -2147483648 08:49:37 GMT", "HTTP 503"),
            ("-5", "HTTP 503")
        ]
        let resource = Resource.generated(size: 2 << 20, seed: 1201)
        for (index, item) in cases.enumerated() {
            server.setResource(resource, at: "f\(index)")
            // Request 1 is the opening GET (the first MiB); request 2 the other connection's.
            server.setFaults([FaultRule(.retryAfter(status: 503, value: item.value), when: .fromRequest(2))])
            let run = try CLI.run(
                [
                    "-q", "-n", "2", "--min-split", "1M", "--retries", "0", "-o", path("f\(index)"),
                    server.url("f\(index)")
                ], in: directory, timeout: 30)
            assertNoTrap(run, item.value)
            XCTAssertEqual(run.status, 1, "\(item.value): \(run.stderr)")
            XCTAssertTrue(
                run.stderr.contains("giving up after 1 attempts: \(item.message); the partial download is kept"),
                "\(item.value): \(run.stderr)")
        }
    }

    /// Issue 36: a Retry-After past `--max-wait` is no retry. Refused on an
    /// extra connection, the piece goes to the mirror's working connection;
    /// once the only working connection is told so, the run fails at once,
    /// quoting the wait, rather than showing `0 B/s` for minutes.
    func testAHugeRetryAfterEndsTheRunAtOnceQuotingTheWait() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 1202)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.retryAfter(status: 503, value: "9223372036854775807"), when: .fromRequest(2))])
        let started = Date()
        let run = try CLI.run(
            ["-n", "4", "--min-split", "512K", "--retries", "2", "-o", path("f"), server.url("f")],
            in: directory, timeout: 60)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, run.stderr)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(
            run.stderr.contains(
                "the server asks to wait over 31 years (HTTP 503 with Retry-After), longer than "
                    + "the longest wait, 60 s; the partial download is kept"), run.stderr)
    }

    /// A Retry-After within `--max-wait` on the only connection is waited out.
    func testARetryAfterWithinTheLongestWaitIsWaitedOut() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 1203)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.retryAfter(status: 503, value: "1"), when: .nthRequest(2))])
        let run = try CLI.run(
            ["-q", "-n", "1", "--min-split", "1M", "--max-wait", "2", "-o", path("f"), server.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("f"), resource)
        XCTAssertEqual(server.statistics.requests.filter { $0.status == 503 }.count, 1)
    }

    // MARK: Sizes near Int64.max

    /// A 200 claiming 9,000,000,000,000,000,000 bytes (HEAD too): refused at
    /// the probe with one line naming the claim, nothing written. (It was
    /// taken as a plain stream that restarted from byte 0 forever.)
    func testContentLengthNearInt64MaxIsRefusedAtTheProbe() throws {
        server.setResource(Resource.generated(size: 100_000, seed: 1203), at: "f")
        server.setFaults([FaultRule(.claimLength("9000000000000000000"))])
        for probe in [[], ["--use-head"]] {
            let started = Date()
            let run = try CLI.run(
                ["-q", "--retry-wait", "0.01"] + probe + ["-o", path("f"), server.url("f")],
                in: directory, timeout: 30)
            assertNoTrap(run, "\(probe)")
            XCTAssertEqual(run.status, 1, "\(probe): \(run.stderr)")
            XCTAssertTrue(
                run.stderr.contains("claims a size of 9000000000000000000 bytes, more than any disk holds"),
                "\(probe): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
            XCTAssertLessThan(Date().timeIntervalSince(started), 15)
            XCTAssertEqual(directoryEntries(), [], "\(probe): nothing written")
        }
    }

    /// Content-Range totals near Int64.max, from the first answer on or only
    /// mid-run: refused with a message naming the claim (exit 1, a server
    /// failure), never a trap, never an attempt to allocate 8 EiB (exit 4).
    func testContentRangeTotalNearInt64MaxIsRefused() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 1204)
        for (index, total) in [Int64.max, Int64.max - 1, Int64(1 << 62) + 1].enumerated() {
            for trigger in [Trigger.always, .fromRequest(3)] {
                let name = "f\(index)-\(trigger)"
                server.setResource(resource, at: name)
                server.setFaults([FaultRule(.wrongContentRangeTotal(total), when: trigger)])
                let run = try CLI.run(
                    [
                        "-q", "-n", "2", "--min-split", "512K", "--retry-wait", "0.01", "-o", path(name),
                        server.url(name)
                    ], in: directory, timeout: 30)
                assertNoTrap(run, "\(total) \(trigger)")
                XCTAssertEqual(run.status, 1, "\(total) \(trigger): \(run.stderr)")
                XCTAssertTrue(
                    run.stderr.contains("claims a size of \(total) bytes"), "\(total) \(trigger): \(run.stderr)")
            }
        }
    }

    // MARK: A 206 that runs past its Content-Range

    /// One overlong 206 among many: that piece is fetched again, the rest of
    /// the download is kept (no restart), and not one byte of the excess (nor
    /// of the distrusted answer) is left on disk.
    func testOneOverlong206IsRetriedNotARestart() throws {
        let size: Int64 = 4 << 20
        let resource = Resource.generated(size: size, seed: 1205)
        server.setResource(resource, at: "f")
        server.setFaults([FaultRule(.overlong(1000), when: .nthRequest(3))])
        let probe = DiskProbe(resource: resource)
        let output = path("f")
        let run = runLibrary([server.url("f")], to: output, probe: probe) {
            $0.connections = 4
            $0.minimumSplit = 1 << 20
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [], "excess bytes reached the disk")
        XCTAssertEqual(run.restartReasons, [], "an overlong answer is not a new file")
        XCTAssertTrue(run.retries.contains { $0.reason.contains("ran past its Content-Range") }, "\(run.retries)")
        let overlong = server.statistics.requests.filter { $0.fault == "overlong:1000" }
        XCTAssertEqual(overlong.count, 1)
        let again = server.statistics.requests.filter {
            $0.fault == nil && $0.rangeHeader == overlong.first?.rangeHeader
        }
        XCTAssertEqual(again.count, 1, "the piece was asked for again, whole")
        XCTAssertLessThan(server.statistics.bodyBytesSent, size + size / 2, "the rest was not fetched again")
    }

    /// The opening request overlong (soak seed 777090): its body waits,
    /// paused, while the probe decides, so the excess is already buffered in
    /// libcurl when the transfer resumes. libcurl 7.88 goes on reading after
    /// the write callback refused those bytes at the resume; the callback
    /// had taken the bytes back (position 0) and wrote the excess `!` over
    /// the file's first bytes, which then counted: exit 0, wrong bytes.
    func testAnOverlongOpeningAnswerWritesNothingPastItsRefusal() throws {
        let size: Int64 = 3 << 20
        let resource = Resource.generated(size: size, seed: 1207)
        let slow = RangeServer(
            configuration: .init(latency: 0.03, faults: [FaultRule(.overlong(65536), when: .nthRequest(1))]))
        try slow.start()
        defer { slow.stop() }
        slow.setResource(resource, at: "f")
        let probe = DiskProbe(resource: resource)
        let output = path("f")
        let run = runLibrary([slow.url("f")], to: output, probe: probe) {
            $0.connections = 8
            $0.minimumSplit = 64 << 10
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        XCTAssertEqual(probe.snapshot.wrongWrites, [], "excess bytes reached the disk")
        XCTAssertEqual(slow.statistics.requests.first?.fault, "overlong:65536", "the opening was the overlong answer")
    }

    /// Every answer overlong: a bounded number of attempts, then exit 1 naming
    /// the fault, not "the file keeps changing" (exit 3) after restarts.
    func testAlwaysOverlongFailsClearlyAfterTheRetries() throws {
        server.setResource(Resource.generated(size: 2 << 20, seed: 1206), at: "f")
        server.setFaults([FaultRule(.overlong(10))])
        let run = try CLI.run(
            [
                "-q", "-n", "2", "--min-split", "1M", "--retries", "2", "--retry-wait", "0.01",
                "-o", path("f"), server.url("f")
            ], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("giving up after 3 attempts"), run.stderr)
        XCTAssertTrue(run.stderr.contains("ran past its Content-Range"), run.stderr)
        XCTAssertLessThanOrEqual(server.statistics.requests.count(where: { $0.method == "GET" }), 2 * 3 + 2)
    }

    // MARK: A single stream that is always cut

    /// No ranges, and every body ends early (a 200 that claims 2 MB and
    /// sends 1 MB): the one stream restarts from byte 0 with a growing delay
    /// and gives up after --retries restarts. (It restarted forever, at once.)
    func testSingleStreamAlwaysCutGivesUpAfterTheRetries() throws {
        server.setResource(Resource.generated(size: 1 << 20, seed: 1207), at: "f")
        server.setFaults([FaultRule(.claimLength("2000000"))])
        let run = runLibrary(
            [server.url("f")], to: path("f"),
            stopWhen: { event in
                // Only a guard against the old endless loop.
                if case let .retry(_, _, _, delay, _, _) = event { return delay == 0 }
                return false
            },
            configure: { options in
                options.retries = 3
                options.retryWait = 0.01
            })
        // The body ends with the connection: the last attempt failed on the network.
        guard case let .network(_, message, .connectionLost)? = run.error else {
            return XCTFail("expected a lost connection, got \(String(describing: run.error)) after \(run.retries)")
        }
        XCTAssertTrue(message.hasPrefix("giving up after 4 attempts of one stream from byte 0"), message)
        XCTAssertEqual(run.retries.map(\.delay), [0.01, 0.02, 0.04], "\(run.retries)")
        XCTAssertEqual(
            server.statistics.requests.count(where: { $0.method == "GET" }), 4, "the opening GET and 3 restarts")
    }

    // MARK: Text a server controls

    /// Escape sequences and other control characters in an ETag (quoted by
    /// the "file changed" message) and in a Content-Range (quoted by the
    /// rejection) never reach a message: events and the error line have none.
    func testControlCharactersInHeadersNeverReachMessages() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 1208)
        server.setResource(resource, at: "etag")
        server.setFaults([
            FaultRule(.header(name: "ETag", value: "\"v\u{1B}]0;owned\u{7}\u{9B}2J\u{202E}\""), when: .fromRequest(3))
        ])
        let changed = runLibrary([server.url("etag")], to: path("etag")) {
            $0.connections = 2
            $0.minimumSplit = 512 << 10
        }
        XCTAssertFalse(changed.restartReasons.isEmpty, "the new ETag is a changed file")
        for reason in changed.restartReasons + changed.retries.map(\.reason) {
            XCTAssertFalse(hasControlCharacter(reason), reason.debugDescription)
            XCTAssertFalse(reason.unicodeScalars.contains("\u{202E}"), reason.debugDescription)
        }

        server.setResource(resource, at: "range")
        server.setFaults([
            FaultRule(.header(name: "Content-Range", value: "bytes\u{1B}[2J\u{7} 0-1/2"), when: .fromRequest(2))
        ])
        let run = try CLI.run(
            [
                "-q", "-n", "2", "--min-split", "1M", "--retries", "1", "--retry-wait", "0.01",
                "-o", path("range"), server.url("range")
            ], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("unexpected Content-Range bytes\\u{1B}[2J\\u{7} 0-1/2"), run.stderr.debugDescription)
        XCTAssertFalse(hasControlCharacter(run.stderr), run.stderr.debugDescription)
    }

    // MARK: Secrets

    /// `user:password@` in a URL reaches no error line, no `--json` and no
    /// event: the library hands out URLs without it.
    func testURLCredentialsNeverReachMessagesJSONOrEvents() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 1209)
        server.setResource(resource, at: "f")
        let secret = "S3CR3T"
        let good = "http://alice:\(secret)@127.0.0.1:\(server.port)/f"
        let missing = "http://alice:\(secret)@127.0.0.1:\(server.port)/missing"

        let failed = try CLI.run(["-o", path("m"), missing], in: directory)
        XCTAssertEqual(failed.status, 1, failed.stderr)
        XCTAssertFalse(failed.stderr.contains(secret), failed.stderr)
        XCTAssertTrue(failed.stderr.contains("http://127.0.0.1:\(server.port)/missing"), failed.stderr)

        let json = try CLI.run(["--json", "-o", path("j"), good], in: directory)
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertFalse(json.stdout.contains(secret), json.stdout)
        XCTAssertFalse(json.stderr.contains(secret), json.stderr)

        // A failure's --json, a list's "failed:" line and bench's table and advice.
        let failedJSON = try CLI.run(["--json", "-o", path("m"), missing], in: directory)
        XCTAssertEqual(failedJSON.status, 1)
        XCTAssertFalse(failedJSON.stdout.contains(secret), failedJSON.stdout)
        try "\(missing)\n".write(toFile: path("list"), atomically: true, encoding: .utf8)
        let list = try CLI.run(["-d", directory, "-i", path("list")], in: directory)
        XCTAssertEqual(list.status, 1)
        XCTAssertFalse(list.stdout.contains(secret) || list.stderr.contains(secret), list.stdout + list.stderr)
        let bench = try CLI.run(["bench", "--seconds", "0.2", "-n", "2", good], in: directory)
        XCTAssertEqual(bench.status, 0, bench.stderr)
        XCTAssertFalse(bench.stdout.contains(secret) || bench.stderr.contains(secret), bench.stdout + bench.stderr)

        let library = runLibrary([good, "http://bob:\(secret)@127.0.0.1:\(server.port)/f"], to: path("l")) { _ in }
        XCTAssertNil(library.error)
        let texts = library.events.flatMap { event -> [String] in
            switch event {
            case let .probed(remote): return [remote.url, remote.effectiveURL]
            case let .transfer(.pieceStarted(_, _, url)): return [url]
            case let .mirrorDropped(url, reason): return [url, reason]
            case let .transfer(.connectionsMoved(from, to, _)): return [from, to]
            case let .finished(result): return result.mirrors.map(\.url)
            default: return []
            }
        }
        XCTAssertFalse(texts.isEmpty)
        XCTAssertEqual(texts.filter { $0.contains(secret) }, [])
        XCTAssertEqual(try XCTUnwrap(library.result.get()).mirrors.filter { $0.url.contains(secret) }, [])
    }

    /// `-H` headers other than Accept, Accept-Language, Cache-Control and
    /// User-Agent go to the origin they were given for and nowhere a
    /// redirect leads: not through libcurl's own redirect following (which
    /// forwards all but Authorization and Cookie), not on the ranged GETs.
    /// With either probe.
    func testCredentialHeadersNeverFollowARedirectToAnotherOrigin() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 1210)
        let target = try anotherServer()
        target.setResource(resource, at: "data")
        server.setFaults([FaultRule(.redirect(to: target.url("data"), status: 302))])
        let secrets = [
            "PRIVATE-TOKEN: glpat-SECRET1", "X-Api-Key: SECRET2", "Proxy-Authorization: Basic SECRET3",
            "X-Session: SECRET4", "Authorization: Bearer SECRET5", "Cookie: id=SECRET6"
        ]
        let harmless = ["Accept: application/octet-stream", "Accept-Language: de"]
        for probe in [[], ["--use-head"]] {
            server.resetStatistics()
            target.resetStatistics()
            let output = path("out\(probe.count)")
            let run = try CLI.run(
                ["-q", "-n", "4", "--min-split", "256K"] + probe
                    + (secrets + harmless).flatMap { ["-H", $0] } + ["-o", output, server.url("f")],
                in: directory)
            XCTAssertEqual(run.status, 0, run.stderr)
            assertSameBytes(output, resource)
            XCTAssertTrue(
                server.statistics.requests.contains { $0.headers["private-token"] == "glpat-SECRET1" },
                "the origin gets its headers")
            XCTAssertFalse(target.statistics.requests.isEmpty)
            for request in target.statistics.requests {
                let leaked = request.headers.filter { $0.value.contains("SECRET") }
                XCTAssertEqual(leaked, [:], "\(probe) \(request.method) \(request.rangeHeader ?? "") leaked")
                XCTAssertEqual(request.headers["accept"], "application/octet-stream", "harmless headers still go")
            }
        }
    }

    /// With a credential header, libcurl follows no redirect, but the
    /// download still does: the probe takes a hop within the origin itself,
    /// keeping `-H` headers and the URL's credentials there; a ranged GET
    /// that is redirected resolves the URL again and goes on (not a failed
    /// attempt: even `--retries 0` lets it).
    func testRedirectsWithinTheOriginStillWorkWithCredentialHeaders() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 1211)
        server.setResource(resource, at: "f")
        server.setResource(resource, at: "g")
        let url = "http://alice:pw@127.0.0.1:\(server.port)/f"
        // The trigger counts per path: the HEAD to /f goes to /g, whose first request goes to /g again.
        server.setFaults([FaultRule(.redirect(to: "/g", status: 302), when: .nthRequest(1))])
        let run = try CLI.run(
            [
                "-q", "-n", "2", "--min-split", "1M", "--use-head", "-H", "PRIVATE-TOKEN: T",
                "-o", path("probe"), url
            ], in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("probe"), resource)
        let atG = server.statistics.requests(to: "g")
        XCTAssertGreaterThanOrEqual(atG.count(where: { $0.status == 206 }), 2, "the data came from /g")
        XCTAssertTrue(
            atG.allSatisfy {
                $0.headers["private-token"] == "T" && $0.headers["authorization"]?.hasPrefix("Basic ") == true
            },
            "\(atG.map(\.headers))")

        server.resetStatistics()
        server.setResource(resource, at: "h")
        // Request 2 to /h is the second connection's ranged GET.
        server.setFaults([FaultRule(.redirect(to: "/g", status: 302), when: .nthRequest(2))])
        let ranged = try CLI.run(
            [
                "-q", "-n", "2", "--min-split", "1M", "--retries", "0", "-H", "PRIVATE-TOKEN: T",
                "-o", path("ranged"), server.url("h")
            ], in: directory, timeout: 30)
        XCTAssertEqual(ranged.status, 0, ranged.stderr)
        assertSameBytes(path("ranged"), resource)
        XCTAssertTrue(server.statistics.requests.allSatisfy { $0.headers["private-token"] == "T" })
    }

    // MARK: Events

    /// Every event, `checkpoint` included, comes from the thread that runs
    /// the download (the calling thread of `run(onEvent:)`), never from the
    /// checkpoint thread, as the documentation says.
    func testEveryEventComesFromTheTransferThread() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 1212)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        let caller = pthread_self()
        let threads = Mutex<[(event: String, onCaller: Bool)]>([])
        var options = DownloadOptions()
        options.connections = 2
        options.checkpointInterval = 0.1
        let download = Download(url: server.url("f"), destination: .file(path("f")), options: options)
        _ = try download.run { event in
            let onCaller = pthread_equal(pthread_self(), caller) != 0
            // The engine's events by their own names (`checkpoint`), the others by theirs.
            let name = if case let .transfer(inner) = event { "\(inner)" } else { "\(event)" }
            threads.withLock { $0.append((name.prefix { $0 != "(" }.description, onCaller)) }
        }
        assertSameBytes(path("f"), resource)
        let seen = threads.withLock { $0 }
        XCTAssertGreaterThan(seen.count(where: { $0.event == "checkpoint" }), 3, "\(seen.map(\.event))")
        XCTAssertEqual(seen.filter { !$0.onCaller }.map(\.event), [], "events from another thread")
    }
}
