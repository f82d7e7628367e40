// RELIABILITY.md cases 14-18: redirects, credentials, server-chosen file
// names, secrets in the manifest, TLS. Several RangeServers on different
// ports stand in for different origins; TLS tests run a real nginx
// (NginxServer), which `make test` installs: a missing one fails them.
// One file above 350 lines: cases 14-18 are one group of a few tests each.
import Foundation
import Glibc
import RangeGet
import RangeServer
import XCTest

final class ReliabilityRedirectSecurityTests: EndToEndTestCase {
    private func rangedGETs(_ server: RangeServer) -> [RequestRecord] {
        server.statistics.requests.filter {
            $0.method == "GET" && $0.rangeHeader != nil && $0.rangeHeader != "bytes=0-0"
        }
    }

    // MARK: 14. Redirects

    /// `Location: ../final` from /sub/start resolves to /final; every ranged GET goes there.
    func test14RelativeLocationIsResolvedAndRangesGoToTheFinalURL() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 141)
        server.setResource(resource, at: "final")
        // The trigger counts per path: the first request to /sub/start is redirected
        // (and the first to /final too, to itself: one more relative hop).
        server.setFaults([FaultRule(.redirect(to: "../final", status: 302), when: .nthRequest(1))])
        let output = path("out")
        let run = try CLI.run(
            ["-q", "-n", "4", "--min-split", "512K", "-o", output, server.url("sub/start")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        // The first GET (the opening request, which doubles as the probe) went to /sub/start and was redirected.
        let ranged = rangedGETs(server).filter { $0.status == 206 }
        XCTAssertGreaterThanOrEqual(ranged.count, 2)
        XCTAssertTrue(ranged.allSatisfy { $0.path == "/final" }, "ranges go to the final URL: \(ranged.map(\.path))")
        XCTAssertEqual(server.statistics.requests(to: "sub/start").count { $0.method == "GET" && $0.status == 206 }, 0)
    }

    /// A redirect to itself forever: the hop cap ends it with exit 1 and a clear message.
    func test14RedirectLoopStopsAtTheHopCap() throws {
        server.setFaults([FaultRule(.redirect(to: "/loop", status: 302))])
        let started = Date()
        let run = try CLI.run(
            ["-q", "--retries", "1", "--retry-wait", "0.01", "-o", path("out"), server.url("loop")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.lowercased().contains("redirect"), run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(started), 15)
        XCTAssertLessThanOrEqual(server.statistics.requests.count, 50, "the hop cap bounds the requests")
        XCTAssertEqual(directoryEntries(), [], "nothing written")
    }

    /// A redirect to another port: the probe follows it, and the data comes from there.
    func test14RedirectToAnotherPortSendsRangesToTheFinalURL() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 142)
        let target = try anotherServer()
        target.setResource(resource, at: "data")
        server.setFaults([FaultRule(.redirect(to: target.url("data"), status: 302))])
        let output = path("out")
        let run = try CLI.run(["-q", "-n", "4", "--min-split", "512K", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertGreaterThanOrEqual(rangedGETs(target).count, 2)
        XCTAssertEqual(
            server.statistics.requests.filter { $0.status == 206 }.count, 0, "no data from the redirecting server")
    }

    /// A signed URL that expires mid-download (410) is resolved again from the
    /// original URL, which now redirects to a fresh one (RELIABILITY.md 14).
    func test14ExpiredSignedURLIsResolvedAgainFromTheOriginal() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 143)
        let first = try anotherServer()
        let second = try anotherServer()
        first.setResource(resource, at: "signed")
        second.setResource(resource, at: "signed")
        server.setFaults([
            FaultRule(.redirect(to: first.url("signed?sig=1"), status: 302), when: .nthRequest(1)),
            FaultRule(.redirect(to: second.url("signed?sig=2"), status: 302), when: .fromRequest(2))
        ])
        // The first signed URL serves 300,000 bytes, then it has expired.
        first.setFaults([
            FaultRule(.cutAfter(300_000), when: .nthRequest(2)),
            FaultRule(.status(410, retryAfter: nil), when: .fromRequest(3))
        ])
        let output = path("out")
        let run = try CLI.run(
            ["-q", "-n", "1", "--retries", "3", "--retry-wait", "0.02", "-o", output, server.url("f")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertFalse(rangedGETs(second).isEmpty, "the rest came from the freshly resolved URL")
    }

    // MARK: 15. Credentials never leak

    /// `-H Authorization` and `-H Cookie` go to the origin but never to the
    /// other port it redirects to: not on the probe, not on the ranged GETs.
    func test15HeaderCredentialsAreNotSentAfterARedirectToAnotherPort() throws {
        let resource = Resource.generated(size: 2 << 20, seed: 144)
        let target = try anotherServer()
        target.setResource(resource, at: "data")
        server.setFaults([FaultRule(.redirect(to: target.url("data"), status: 302))])
        let output = path("out")
        let run = try CLI.run(
            [
                "-q", "-n", "4", "--min-split", "256K", "-H", "Authorization: Bearer TOPSECRET",
                "-H", "Cookie: session=COOKIESECRET", "-o", output, server.url("f")
            ], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(
            server.statistics.requests.contains { $0.headers["authorization"] == "Bearer TOPSECRET" },
            "the origin itself gets the header")
        XCTAssertFalse(target.statistics.requests.isEmpty)
        for request in target.statistics.requests {
            XCTAssertNil(
                request.headers["authorization"], "\(request.method) \(request.rangeHeader ?? "") leaked Authorization")
            XCTAssertNil(request.headers["cookie"], "\(request.method) \(request.rangeHeader ?? "") leaked Cookie")
        }
    }

    /// `user:password@` in the URL: sent to the origin, not to another port.
    func test15URLCredentialsAreNotSentAfterARedirectToAnotherPort() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 145)
        let target = try anotherServer()
        target.setResource(resource, at: "data")
        server.setFaults([FaultRule(.redirect(to: target.url("data"), status: 302))])
        let output = path("out")
        let url = "http://alice:PASSWORD@127.0.0.1:\(server.port)/f"
        let run = try CLI.run(["-q", "-n", "2", "--min-split", "256K", "-o", output, url], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(server.statistics.requests.contains { $0.headers["authorization"]?.hasPrefix("Basic ") == true })
        XCTAssertFalse(target.statistics.requests.isEmpty)
        XCTAssertTrue(
            target.statistics.requests.allSatisfy { $0.headers["authorization"] == nil },
            "\(target.statistics.requests.map(\.headers))")
    }

    /// Redirects to file:, ftp: or other schemes are refused: exit 1, nothing written.
    func test15RedirectToANonHTTPSchemeIsRefused() throws {
        for location in [
            "file:///etc/passwd", "ftp://127.0.0.1:\(server.port)/x", "dict://127.0.0.1:\(server.port)/x",
            "gopher://127.0.0.1:\(server.port)/x"
        ] {
            server.setFaults([FaultRule(.redirect(to: location, status: 302))])
            server.resetStatistics()
            let run = try CLI.run(
                ["-q", "--retries", "1", "--retry-wait", "0.01", "-o", path("out"), server.url("f")],
                in: directory, timeout: 30)
            XCTAssertEqual(run.status, 1, "\(location): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
            XCTAssertEqual(directoryEntries(), [], "\(location): nothing written")
        }
    }

    // MARK: 16. Server-chosen file names

    /// Content-Disposition and URL names are reduced to a safe base name inside
    /// the target directory; nothing appears anywhere else.
    func test16ServerChosenNamesStayInTheTargetDirectory() throws {
        let cases: [(disposition: String?, urlPath: String, expected: String)] = [
            ("attachment; filename=\"../../escape.sh\"", "a1", "escape.sh"),
            ("attachment; filename=\"/etc/cron.d/evil\"", "a2", "evil"),
            ("attachment; filename=\"..\\\\..\\\\win.ini\"", "a3", "win.ini"),
            ("attachment; filename=\".bashrc\"", "a4", "bashrc"),
            ("attachment; filename=\"bad\u{1B}[31mname\u{07}.txt\"", "a5", "bad[31mname.txt"),
            ("attachment; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd", "a6", "passwd"),
            ("attachment; filename=\"..\"", "a7", "a7"),
            ("attachment; filename=\"....\"", "a8", "a8"),
            (nil, "dir/.profile", "profile"),
            (nil, "dir/%2e%2e%2fup.txt", "up.txt")
        ]
        let target = path("target")
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
        for (index, item) in cases.enumerated() {
            var resource = Resource.generated(size: 1000, seed: 150 + UInt64(index))
            resource.contentDisposition = item.disposition
            let served = item.urlPath.removingPercentEncoding ?? item.urlPath
            server.setResource(resource, at: served)
            let run = try CLI.run(["-q", "-d", target, server.url(item.urlPath)], in: directory)
            XCTAssertEqual(run.status, 0, "\(item): \(run.stderr)")
            assertSameBytes(target + "/" + item.expected, resource)
            try FileManager.default.removeItem(atPath: target + "/" + item.expected)
            XCTAssertEqual(
                try FileManager.default.contentsOfDirectory(atPath: target), [], "\(item): only the expected file")
            XCTAssertEqual(directoryEntries(), ["target"], "\(item): nothing outside the target directory")
        }
    }

    /// Separators hidden in grapheme clusters: U+0603 (a "prepend" mark) glues
    /// itself to the `/` after it, so a split on Characters misses the `/`;
    /// once the mark is filtered out, `..\u{603}/` is `../`. A combining mark
    /// after `/` hides it the same way. Nothing may land outside the directory,
    /// and the saved name has no `/` byte and no leading dot.
    func test16SeparatorsHiddenInGraphemeClustersDoNotEscape() throws {
        let parent = path("parent")
        let target = parent + "/target"
        try FileManager.default.createDirectory(atPath: target + "/x", withIntermediateDirectories: true)
        let names = [
            "..\u{603}/..\u{603}/escaped-one.txt",
            "x\u{603}/..\u{603}/..\u{603}/escaped-two.txt",
            "..\u{600}/escaped-three.txt",
            "x/\u{301}../\u{301}escaped-four.txt",
            ".\u{301}hidden.txt"
        ]
        for (index, name) in names.enumerated() {
            var resource = Resource.generated(size: 100, seed: 170 + UInt64(index))
            resource.contentDisposition = "attachment; filename=\"\(name)\""
            server.setResource(resource, at: "n\(index)")
            let run = try CLI.run(["-q", "-d", target, server.url("n\(index)")], in: directory)
            let outside = try FileManager.default.contentsOfDirectory(atPath: parent).filter { $0 != "target" }
            XCTAssertEqual(
                outside, [], "\(name.debugDescription) (exit \(run.status) \(run.stderr)): written outside the target")
            for file in outside { try FileManager.default.removeItem(atPath: parent + "/" + file) }
            let saved = (try FileManager.default.contentsOfDirectory(atPath: target)).filter { $0 != "x" }
            XCTAssertEqual(
                try FileManager.default.contentsOfDirectory(atPath: target + "/x"), [],
                "\(name.debugDescription): written into a subdirectory")
            for file in saved {
                XCTAssertFalse(
                    file.utf8.first == UInt8(ascii: "."),
                    "\(name.debugDescription) saved as hidden \(file.debugDescription)")
                try FileManager.default.removeItem(atPath: target + "/" + file)
            }
        }
    }

    /// A server-chosen name that already exists is not overwritten without --force.
    func test16ExistingFileIsNeverOverwrittenWithoutForce() throws {
        var resource = Resource.generated(size: 5000, seed: 160)
        resource.contentDisposition = "attachment; filename=\"report.pdf\""
        server.setResource(resource, at: "get")
        _ = FileManager.default.createFile(atPath: path("report.pdf"), contents: Data("precious".utf8))
        let refused = try CLI.run(["-q", "-d", directory, server.url("get")], in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--force"), refused.stderr)
        XCTAssertEqual(try String(contentsOfFile: path("report.pdf"), encoding: .utf8), "precious")
        XCTAssertEqual(directoryEntries(), ["report.pdf"], "no .part left behind")
        let forced = try CLI.run(["-q", "--force", "-d", directory, server.url("get")], in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        assertSameBytes(path("report.pdf"), resource)
    }

    /// The final name is a symbolic link to a file elsewhere: without --force
    /// nothing is touched; with --force the link is replaced, never written through.
    func test16SymbolicLinkAtTheOutputIsNeverWrittenThrough() throws {
        let resource = Resource.generated(size: 5000, seed: 161)
        server.setResource(resource, at: "f")
        let victim = path("victim.txt")
        _ = FileManager.default.createFile(atPath: victim, contents: Data("do not touch".utf8))
        try FileManager.default.createSymbolicLink(atPath: path("out"), withDestinationPath: victim)
        let refused = try CLI.run(["-q", "-o", path("out"), server.url("f")], in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        let forced = try CLI.run(["-q", "--force", "-o", path("out"), server.url("f")], in: directory)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        XCTAssertEqual(try String(contentsOfFile: victim, encoding: .utf8), "do not touch")
        assertSameBytes(path("out"), resource)
    }

    /// A symbolic link planted at OUTPUT.part (say in a shared directory) must
    /// not make rangeget truncate and overwrite the file it points to.
    func test16SymbolicLinkAtThePartFileIsNotFollowed() throws {
        let resource = Resource.generated(size: 5000, seed: 162)
        server.setResource(resource, at: "f")
        let victim = path("victim.txt")
        _ = FileManager.default.createFile(atPath: victim, contents: Data("do not touch".utf8))
        try FileManager.default.createSymbolicLink(atPath: path("out.part"), withDestinationPath: victim)
        let run = try CLI.run(["-q", "-o", path("out"), server.url("f")], in: directory)
        XCTAssertEqual(
            FileManager.default.contents(atPath: victim), Data("do not touch".utf8),
            "rangeget wrote through a planted .part symlink (exit \(run.status), \(run.stderr))")
    }

    // MARK: 17. No passwords in the manifest

    func test17ManifestStoresNoSecretsKeepsTheQueryAndIsPrivate() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 163)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let url = "http://alice:PASSWORD@127.0.0.1:\(server.port)/f?sig=abc123&expires=99"
        let arguments = [
            "-q", "-n", "4", "-H", "Authorization: Bearer TOPSECRET", "-H", "Cookie: id=COOKIESECRET",
            "-H", "X-Api-Key: KEYSECRET", "-o", path("out"), url
        ]
        let manifest = path("out.part.json")
        let stopped = try interrupted(arguments, once: "a checkpoint recorded progress") { claimedBytes(manifest) > 0 }
        XCTAssertEqual(stopped.status, 130)

        let text = try String(contentsOfFile: manifest, encoding: .utf8)
        XCTAssertTrue(text.contains("sig=abc123"), "the query string stays: \(text)")
        let mode = try FileManager.default.attributesOfItem(atPath: manifest)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o600)
        for entry in directoryEntries() {
            let contents = FileManager.default.contents(atPath: path(entry)) ?? Data()
            let haystack = String(decoding: contents, as: UTF8.self)
            for secret in ["PASSWORD", "TOPSECRET", "COOKIESECRET", "KEYSECRET", "alice"] {
                XCTAssertFalse(haystack.contains(secret), "\(entry) stores \(secret)")
            }
        }
        server.setRatePerConnection(nil)
        let resumed = try CLI.run(arguments.filter { $0 != "-q" }, in: directory)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertTrue(resumed.stderr.contains("resuming"), resumed.stderr)
        assertSameBytes(path("out"), resource)
    }

    // MARK: 18. TLS (and the https-to-http downgrade), with nginx

    func test18TLSVerificationIsOnByDefaultAndInsecureIsExplicit() throws {
        let resource = Resource.generated(size: 100_000, seed: 164)
        let tls = try startNginx()
        try tls.serve(resource, at: "f")
        let quick = ["-q", "--retries", "1", "--retry-wait", "0.01"]
        let refused = try CLI.run(quick + ["-o", path("out"), tls.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertTrue(refused.stderr.lowercased().contains("certificate"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("out")))

        let insecure = try CLI.run(quick + ["--insecure", "-o", path("out"), tls.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(insecure.status, 0, insecure.stderr)
        assertSameBytes(path("out"), resource)

        let trusted = try CLI.run(
            quick + ["--cacert", tls.certificate, "-o", path("out2"), tls.url("f")], in: directory, timeout: 30)
        XCTAssertEqual(trusted.status, 0, trusted.stderr)
        assertSameBytes(path("out2"), resource)
    }

    /// A certificate that fails verification is a permanent curl error
    /// (`CurlError.classification`): the download fails at once with exit 1,
    /// without the `--retries` attempts and their backoff, both when the
    /// probe meets it and when the engine does (a resume that sends its
    /// ranged requests without a probe, on the manifest's strong ETag).
    func testACertificateThatFailsVerificationIsNotRetried() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 166)
        let tls = try startNginx(rateLimit: 256 << 10)
        try tls.serve(resource, at: "f")
        let output = path("f")
        // A backoff this long would show: one retry alone takes longer than the whole run may.
        let patient = ["-q", "-n", "2", "--retries", "5", "--retry-wait", "5", "-o", output, tls.url("f")]

        try tls.resetTraffic()
        var started = Date()
        let probed = try CLI.run(patient, in: directory, timeout: 30)
        var elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(probed.status, 1, probed.stderr)
        XCTAssertTrue(probed.stderr.lowercased().contains("certificate"), probed.stderr)
        XCTAssertLessThan(elapsed, 4, "no backoff before giving up")
        // The opening request, then the classic probe's HEAD and ranged GET,
        // each refused at the handshake: three kinds of request, none retried.
        let refused = try tls.traffic()
        XCTAssertLessThanOrEqual(refused.acceptedConnections, 3, refused.summary)

        // A partial download fetched with --insecure, interrupted, then resumed without it.
        let stopped = try interrupted(["--insecure"] + patient, once: "a checkpoint recorded progress") {
            ManifestFile.doneBytes(output + ".part.json") > 0
        }
        XCTAssertEqual(stopped.status, 130)
        try tls.resetTraffic()
        started = Date()
        let resumed = try CLI.run(patient, in: directory, timeout: 30)
        elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(resumed.status, 1, resumed.stderr)
        XCTAssertTrue(resumed.stderr.lowercased().contains("certificate"), resumed.stderr)
        XCTAssertTrue(resumed.stderr.contains("not retried"), resumed.stderr)
        XCTAssertLessThan(elapsed, 4, "no backoff before giving up")
        let traffic = try tls.traffic()
        XCTAssertEqual(traffic.requests.count, 0, traffic.summary)
        XCTAssertLessThanOrEqual(traffic.acceptedConnections, 2, "one attempt per connection: \(traffic.summary)")
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: output + ".part.json"), "the partial download stays for a later run")
    }

    /// An https URL redirecting to plain http is refused: the http server never hears a request.
    func test15HTTPSToHTTPDowngradeIsRefused() throws {
        server.setResource(Resource.generated(size: 1000, seed: 165), at: "f")
        let tls = try startNginx(redirects: ["r": server.url("f")])
        let run = try CLI.run(
            ["-q", "--insecure", "--retries", "1", "--retry-wait", "0.01", "-o", path("out"), tls.url("r")],
            in: directory, timeout: 30)
        XCTAssertEqual(run.status, 1, run.stderr)
        let traffic = try tls.traffic()
        XCTAssertTrue(
            traffic.requests.contains { $0.path == "/r" && $0.status == 302 },
            "the redirect was sent: \(traffic.summary)")
        XCTAssertEqual(server.statistics.requests.count, 0, "the plain-http server was contacted")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("out")))
    }
}
