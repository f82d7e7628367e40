// Issues 11 and 13: N connections must be N TCP connections. libcurl's multi
// handle multiplexes HTTP/2 streams by default, so `rangeget -n 8` against an
// HTTPS server that speaks HTTP/2 ran every range over ONE TCP connection.
// These tests run the built binary (and the library) against a real nginx
// offering HTTP/2 and count the TCP connections it accepted: by default one
// per transfer over HTTP/1.1; `--http2` offers HTTP/2, still one range per
// connection; only `--multiplex` shares one connection.
//
// Each download is 8 MiB with `-n 4 --min-split 1M`: four pieces of 2 MiB.
// nginx sends each response at 2 MiB/s, so the four are in flight at once
// (about a second), none finishes far ahead of the others, and no piece is
// left big enough to steal, whose cut would end a transfer and cost a new
// connection. The counts are then exact.
import Foundation
import RangeGet
import RangeServer
import XCTest

final class HTTP2ConnectionTests: EndToEndTestCase {
    private var nginx: NginxServer?
    private let resource = Resource.generated(size: 8 << 20, seed: 1101)

    /// nginx serving the file at /f. Each test starts it rather than setUp:
    /// XCTest reports an error thrown in setUp as a skip as well as a failure.
    private func startedNginx() throws -> NginxServer {
        if let nginx { return nginx }
        let started = try startNginx(rateLimit: 2 << 20)
        nginx = started
        try started.serve(resource, at: "f")
        return started
    }

    /// Downloads the file with `-n 4` (pieces of 2 MiB) and `flags` to
    /// `output`, checks it, and returns the run and what nginx saw.
    private func download(_ flags: [String], to output: String = "out") throws -> (Run, NginxServer.Traffic) {
        let nginx = try startedNginx()
        let arguments =
            ["-q", "-n", "4", "--min-split", "1M", "--cacert", nginx.certificate] + flags
            + ["-o", path(output), nginx.url("f")]
        let run = try CLI.run(arguments, in: directory, timeout: 30)
        // Without the download nothing below means anything: a failed run ends the test here.
        _ = try XCTUnwrap(run.status == 0 ? run : nil, "rangeget \(flags) exited with \(run.status): \(run.stderr)")
        assertSameBytes(path(output), resource)
        return (run, try nginx.traffic())
    }

    /// Exactly 4 TCP connections, not 5: the opening request (`bytes=0-1M`,
    /// which is also the probe) is adopted as connection 0's first piece, and
    /// connection 0 fetches the rest of its piece on the same keep-alive
    /// connection. Every request is a ranged GET over HTTP/1.1.
    func testDefaultOpensOneTCPConnectionPerTransferOverHTTP11() throws {
        let (_, traffic) = try download([])
        XCTAssertEqual(traffic.acceptedConnections, 4, traffic.summary)
        XCTAssertEqual(traffic.connections, 4, traffic.summary)
        XCTAssertEqual(traffic.protocols, ["HTTP/1.1"], traffic.summary)
        XCTAssertTrue(
            traffic.requests.allSatisfy { $0.method == "GET" && $0.status == 206 && $0.range != nil }, traffic.summary)
    }

    /// `--http2` offers HTTP/2 but keeps one range per TCP connection: 4
    /// connections (for the same reason as above), every request HTTP/2.0.
    func testHTTP2FlagSpeaksHTTP2WithOneConnectionPerTransfer() throws {
        let (_, traffic) = try download(["--http2"])
        XCTAssertEqual(traffic.acceptedConnections, 4, traffic.summary)
        XCTAssertEqual(traffic.connections, 4, traffic.summary)
        XCTAssertEqual(traffic.protocols, ["HTTP/2.0"], traffic.summary)
    }

    /// `--multiplex` (which implies HTTP/2) is the only way to share a
    /// connection: every range on 1 TCP connection.
    func testMultiplexFlagCarriesEveryTransferOnOneConnection() throws {
        let (_, traffic) = try download(["--multiplex"])
        XCTAssertEqual(traffic.acceptedConnections, 1, traffic.summary)
        XCTAssertEqual(traffic.connections, 1, traffic.summary)
        XCTAssertEqual(traffic.protocols, ["HTTP/2.0"], traffic.summary)
        XCTAssertGreaterThanOrEqual(traffic.requests.count { $0.range != nil }, 4, traffic.summary)
    }

    /// With `--use-head` the probe is a HEAD on a connection of its own, made
    /// before the engine's connections: 5 TCP connections, the HEAD alone on one.
    func testUseHeadProbesOnAConnectionOfItsOwn() throws {
        let (_, traffic) = try download(["--use-head"])
        XCTAssertEqual(traffic.acceptedConnections, 5, traffic.summary)
        XCTAssertEqual(traffic.connections, 5, traffic.summary)
        let heads = traffic.requests.filter { $0.method == "HEAD" }
        XCTAssertEqual(heads.count, 1, traffic.summary)
        XCTAssertFalse(
            traffic.requests.contains { $0.method != "HEAD" && $0.connection == heads.first?.connection },
            "the HEAD's connection carried a GET too: \(traffic.summary)")
        let ranged = traffic.requests.filter { $0.range != nil }
        XCTAssertEqual(Set(ranged.map(\.httpProtocol)), ["HTTP/1.1"], traffic.summary)
    }

    /// `--json` reports the TCP connections the run opened (top level
    /// `tcpConnections`, what the server counted) and each mirror's
    /// `httpVersion`.
    func testJSONReportsTCPConnectionsAndHTTPVersion() throws {
        for (flags, version) in [([String](), "1.1"), (["--http2"], "2")] {
            try startedNginx().resetTraffic()
            let (run, traffic) = try download(flags + ["--json"], to: "out-\(version)")
            let object = try run.jsonObject()
            XCTAssertEqual(traffic.acceptedConnections, 4, "\(flags): \(traffic.summary)")
            XCTAssertEqual(object["tcpConnections"] as? Int, traffic.acceptedConnections, "\(flags): \(run.stdout)")
            let mirrors = try XCTUnwrap(object["mirrors"] as? [[String: Any]], run.stdout)
            XCTAssertEqual(mirrors.map { $0["httpVersion"] as? String }, [version], "\(flags): \(run.stdout)")
        }
    }

    /// The library's default is the command's: one TCP connection per
    /// transfer, over HTTP/1.1.
    func testLibraryDefaultOpensOneTCPConnectionPerTransferOverHTTP11() throws {
        let nginx = try startedNginx()
        let output = path("library-out")
        let run = runLibrary([nginx.url("f")], to: output) { options in
            options.connections = 4
            options.minimumSplit = 1 << 20
            options.transfer.caCertificates = nginx.certificate
        }
        XCTAssertNil(run.error)
        assertSameBytes(output, resource)
        let traffic = try nginx.traffic()
        XCTAssertEqual(traffic.acceptedConnections, 4, traffic.summary)
        XCTAssertEqual(traffic.protocols, ["HTTP/1.1"], traffic.summary)
    }
}
