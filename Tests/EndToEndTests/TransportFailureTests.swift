// Network failures reach a Swift caller and `--json` with their kind
// (issue 16): `DownloadError.network` carries a `TransportFailure`, and the
// JSON object has it as `failure`, where before the kind was only in the
// message's text. A refused connection, a TLS handshake with a server that
// speaks none, a certificate that fails verification, a server that never
// answers, and a name that does not resolve. Every server is on 127.0.0.1.
import Foundation
import Glibc
import RangeGet
import RangeServer
import XCTest

final class TransportFailureTests: EndToEndTestCase {
    /// Runs `url` through the library and through `rangeget --json`
    /// (`arguments` being the command's words for what `configure` sets),
    /// and checks that both report a network failure of `kind` and no HTTP status.
    private func assertFails(
        _ url: String, with kind: TransportFailure, arguments: [String] = [],
        configure: (inout DownloadOptions) -> Void = { _ in },
        file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let run = runLibrary([url], to: path("library")) { options in
            options.retries = 1
            configure(&options)
        }
        guard case let .network(_, message, failure)? = run.error else {
            return XCTFail("expected a network failure, got \(String(describing: run.error))", file: file, line: line)
        }
        XCTAssertEqual(failure, kind, message, file: file, line: line)
        XCTAssertEqual(run.error?.transportFailure, kind, file: file, line: line)
        XCTAssertNil(run.error?.httpStatus, file: file, line: line)

        let command = try CLI.run(
            ["--json", "--retries", "1", "--retry-wait", "0.01"] + arguments + ["-o", path("command"), url],
            in: directory, timeout: 60)
        XCTAssertEqual(command.status, 1, command.stderr, file: file, line: line)
        let object = try command.jsonObject()
        XCTAssertEqual(object["outcome"] as? String, "failed", command.stdout, file: file, line: line)
        XCTAssertEqual(object["failure"] as? String, kind.rawValue, command.stdout, file: file, line: line)
        XCTAssertTrue(object["httpStatus"] is NSNull, command.stdout, file: file, line: line)
    }

    /// Nothing listens on the port: a socket bound there but not listening
    /// (kept open, so no other test can take the port) refuses every connection.
    func testARefusedConnectionIsConnectFailed() throws {
        let closed = try LoopbackSocket.bound()
        defer { close(closed.descriptor) }
        try assertFails("http://127.0.0.1:\(closed.port)/f", with: .connectFailed)
    }

    /// https:// to a server that speaks plain HTTP and answers the handshake
    /// with a 400, as nginx does: the handshake fails. (RangeServer would
    /// wait for the end of a request head that never comes: a timeout.)
    func testHTTPSToAPlainHTTPServerIsATLSFailure() throws {
        let plain = try scriptedServer { _ in ScriptedResponse(head: "HTTP/1.1 404 Not Found\r\nContent-Length: 0") }
        try assertFails("https://127.0.0.1:\(plain.port)/f", with: .tls)
    }

    /// nginx's certificate, made for the test and trusted by nobody, without `--insecure`.
    func testAnUntrustedCertificateIsACertificateFailure() throws {
        let tls = try startNginx()
        try tls.serve(Resource.generated(size: 1000, seed: 1602), at: "f")
        try assertFails(tls.url("f"), with: .certificate)
    }

    /// A server that takes every request and never answers: the probes time
    /// out, the one stream left to try stalls, and so does its retry.
    func testAServerThatNeverAnswersIsATimeout() throws {
        server.setResource(Resource.generated(size: 1000, seed: 1603), at: "f")
        server.setFaults([FaultRule(.hang)])
        try assertFails(server.url("f"), with: .timeout, arguments: ["--connect-timeout", "1", "--stall-timeout", "1"])
        {
            $0.transfer.connectTimeout = 1
            $0.transfer.stallTimeout = 1
        }
    }

    /// A name that cannot resolve, without a query leaving the machine: a
    /// label longer than 63 bytes is refused by the resolver library itself
    /// (RFC 1035; glibc's res_mkquery) before any packet is sent, so this
    /// needs no network and no resolver. (`nonexistent.invalid` would be
    /// sent to the configured name server, which is not on loopback.)
    func testANameThatDoesNotResolveIsADNSFailure() throws {
        let host = String(repeating: "a", count: 64) + ".invalid"
        let started = Date()
        try assertFails("http://\(host)/f", with: .dnsResolution)
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "refused locally, not after a resolver's timeout")
    }
}
