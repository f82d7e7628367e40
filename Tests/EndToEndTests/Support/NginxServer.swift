// A real HTTPS server for the tests that need TLS or HTTP/2 (issues 11 and
// 13): nginx on 127.0.0.1, offering HTTP/2 and HTTP/1.1 by ALPN, with a
// certificate for 127.0.0.1 made by openssl at start. It serves files the
// test writes, and reports what it saw from its access log (connection
// serial, protocol, range) and stub_status (TCP connections accepted), so a
// test can say "exactly 4 TCP connections, all HTTP/1.1". Usable from CLI
// and library tests alike. A missing tool or a failed step throws with the
// cause and the fix; nothing is skipped.
// One file above 350 lines: one fixture whose parts share its paths and port.
import Foundation
import Glibc
import RangeServer
import XCTest

/// Why the fixture could not run, with the fix where there is one.
struct NginxServerError: Error, CustomStringConvertible {
    var description: String
}

/// nginx in a private temporary prefix, stopped by `stop()` (or when the test process dies).
final class NginxServer {
    /// One request as the access log recorded it.
    struct Request {
        /// nginx's serial number of the TCP connection that carried it.
        var connection: Int
        /// Which request on that connection it was (1 for the first).
        var connectionRequests: Int
        /// "HTTP/1.1" or "HTTP/2.0".
        var httpProtocol: String
        var method: String
        var path: String
        var status: Int
        var bodyBytes: Int64
        /// The Range header, nil when absent.
        var range: String?
        /// The If-Range header, nil when absent.
        var ifRange: String?
    }

    /// What the server saw since it started (or since `resetTraffic`).
    struct Traffic {
        var requests: [Request]
        /// TCP connections accepted on the HTTPS port, with or without a request
        /// on them (stub_status's count, less the fixture's own status queries).
        var acceptedConnections: Int

        /// Distinct TCP connections that carried at least one request.
        var connections: Int { Set(requests.map(\.connection)).count }

        /// The protocols requests used, e.g. ["HTTP/1.1"].
        var protocols: Set<String> { Set(requests.map(\.httpProtocol)) }

        /// One line per request, for assertion messages.
        var summary: String {
            let lines = requests.map {
                "#\($0.connection).\($0.connectionRequests) \($0.httpProtocol) \($0.method) \($0.path) \($0.status)"
                    + " \($0.range ?? "-") \($0.bodyBytes) B"
            }
            return "\(acceptedConnections) TCP connections accepted; requests:\n" + lines.joined(separator: "\n")
        }
    }

    /// The HTTPS port on 127.0.0.1.
    private(set) var port: Int = 0
    /// The self-signed certificate (subjectAltName IP:127.0.0.1), for `--cacert`.
    let certificate: String
    /// The private prefix: config, logs, pid, certificate, and `files/`.
    let prefix: String
    private let files: String
    private let statusSocket: String
    private var child: Child?
    /// stub_status's accepted count when traffic was last reset, and the
    /// status queries made since (each is a connection nginx accepts).
    private var acceptedAtReset = 0
    private var queriesSinceReset = 0

    private static let fix =
        "Run `make test` (scripts/install-deps installs nginx and openssl), or `apt-get install nginx openssl`."

    /// Starts nginx. `rateLimit` caps each response at that many bytes per
    /// second (nginx's `limit_rate`), so several transfers are in flight at
    /// once; `redirects` maps a path (without the leading /) to the Location
    /// a 302 from it sends.
    init(rateLimit: Int? = nil, redirects: [String: String] = [:]) throws {
        prefix = NSTemporaryDirectory() + "rangeget-nginx-\(UUID().uuidString)"
        files = prefix + "/files"
        certificate = prefix + "/cert.pem"
        statusSocket = prefix + "/status.sock"
        // sockaddr_un holds 108 bytes, the terminating NUL included.
        guard statusSocket.utf8.count < 108 else {
            throw NginxServerError(
                description: "the status socket path \(statusSocket) is longer than a Unix socket allows;"
                    + " set TMPDIR to a shorter directory")
        }
        for location in redirects.values where location.contains(where: { "\"$\\;{}".contains($0) }) {
            throw NginxServerError(description: "a redirect target with nginx syntax in it: \(location)")
        }
        let nginx = try Self.executable("nginx", alsoIn: ["/usr/sbin", "/usr/local/sbin", "/sbin"], fix: Self.fix)
        let openssl = try Self.executable("openssl", alsoIn: ["/usr/bin", "/usr/local/bin", "/bin"], fix: Self.fix)
        let setpriv = try Self.executable("setpriv", alsoIn: ["/usr/bin", "/bin"], fix: "`apt-get install util-linux`.")
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        do {
            try makeCertificate(openssl)
            try launch(nginx, setpriv: setpriv, rateLimit: rateLimit, redirects: redirects)
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// The https URL of a served file.
    func url(_ name: String) -> String { "https://127.0.0.1:\(port)/" + name }

    /// Serves `resource`'s bytes at /`name`.
    func serve(_ resource: Resource, at name: String) throws {
        try resource.write(to: files + "/" + name)
    }

    /// What the server saw. Waits (up to `timeout` seconds) until no client
    /// connection is open, so every request has been logged: call it after
    /// the client has finished.
    func traffic(timeout: Double = 5) throws -> Traffic {
        let deadline = Date().addingTimeInterval(timeout)
        var status = try statusQuery()
        // The status query itself is one active connection.
        while status.active > 1 {
            guard Date() < deadline else {
                throw NginxServerError(
                    description: "nginx still has \(status.active - 1) client connections open"
                        + " \(timeout) s after traffic() was asked for; is the client still running?")
            }
            usleep(10_000)
            status = try statusQuery()
        }
        let accepted = status.accepted - acceptedAtReset - queriesSinceReset
        return Traffic(requests: try loggedRequests(), acceptedConnections: accepted)
    }

    /// Forgets the traffic seen so far (after waiting, as `traffic` does, for the clients to finish).
    func resetTraffic() throws {
        _ = try traffic()
        guard truncate(prefix + "/access.log", 0) == 0 else {
            throw NginxServerError(
                description: "cannot truncate \(prefix)/access.log: \(String(cString: strerror(errno)))")
        }
        acceptedAtReset = try statusQuery().accepted
        queriesSinceReset = 0
    }

    /// Stops nginx (SIGTERM, then SIGKILL after 5 s) and removes the prefix; safe to call twice.
    func stop() {
        if let child {
            if child.isRunning { kill(child.pid, SIGTERM) }
            let deadline = Date().addingTimeInterval(5)
            while child.isRunning && Date() < deadline { usleep(10_000) }
            child.kill9()
            self.child = nil
        }
        try? FileManager.default.removeItem(atPath: prefix)
    }

    // MARK: - Starting

    /// The path of `name` on PATH or in `directories`; throws naming every place looked in.
    private static func executable(_ name: String, alsoIn directories: [String], fix: String) throws -> String {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        var searched: [String] = []
        for directory in path + directories where !searched.contains(directory) {
            searched.append(directory)
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw NginxServerError(
            description: "\(name) is not installed: no executable \(name) in "
                + searched.joined(separator: ", ") + ". " + fix)
    }

    /// A key and a self-signed certificate for 127.0.0.1 (EC: made in milliseconds).
    private func makeCertificate(_ openssl: String) throws {
        let arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", prefix + "/key.pem", "-out", certificate, "-days", "2", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1"
        ]
        let run = try Child(executable: openssl, arguments: arguments, in: prefix).finish(timeout: 30)
        guard run.status == 0 else {
            throw NginxServerError(
                description: "`\(openssl) \(arguments.joined(separator: " "))` exited with status"
                    + " \(run.status): \(run.stderr)")
        }
    }

    /// Starts nginx on a free port, trying another port when one is taken
    /// between choosing it and nginx binding it.
    private func launch(_ nginx: String, setpriv: String, rateLimit: Int?, redirects: [String: String]) throws {
        for attempt in 1...3 {
            port = try Self.freeLoopbackPort()
            try? FileManager.default.removeItem(atPath: statusSocket)
            let config = prefix + "/nginx.conf"
            try configuration(rateLimit: rateLimit, redirects: redirects).write(
                toFile: config, atomically: true, encoding: .utf8)
            // setpriv's parent-death signal ends nginx with the test process, even when that crashes.
            let child = try Child(
                executable: setpriv,
                arguments: ["--pdeathsig", "KILL", nginx, "-p", prefix, "-c", config, "-e", prefix + "/error.log"],
                in: prefix)
            self.child = child
            switch try waitUntilReady(child) {
            case .ready: return
            case .portTaken where attempt < 3:
                child.kill9()
                self.child = nil
            case .portTaken:
                throw NginxServerError(
                    description: "nginx found 3 free ports taken before it could bind them:\n" + errorLog())
            }
        }
    }

    private enum Readiness { case ready, portTaken }

    /// Waits up to 5 s for nginx to answer on its status socket.
    private func waitUntilReady(_ child: Child) throws -> Readiness {
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if errorLog().contains("127.0.0.1:\(port) failed (98: Address already in use)") { return .portTaken }
            if !child.isRunning {
                let run = child.finish(timeout: 1)
                let config = (try? String(contentsOfFile: prefix + "/nginx.conf", encoding: .utf8)) ?? ""
                throw NginxServerError(
                    description: "nginx exited with status \(run.status) before it answered:\n"
                        + run.stderr + "\nerror log:\n" + errorLog() + "\nnginx.conf:\n" + config)
            }
            if let status = try? statusQuery() {
                acceptedAtReset = status.accepted
                queriesSinceReset = 0
                return .ready
            }
            usleep(10_000)
        }
        throw NginxServerError(
            description: "nginx did not answer on \(statusSocket) within 5 s; error log:\n" + errorLog())
    }

    private func errorLog() -> String {
        (try? String(contentsOfFile: prefix + "/error.log", encoding: .utf8)) ?? "(no error log)"
    }

    /// A port on 127.0.0.1 that nothing listens on now.
    private static func freeLoopbackPort() throws -> Int {
        do {
            let (fd, port) = try LoopbackSocket.bound()
            close(fd)
            return Int(port)
        } catch let error as POSIXError {
            throw NginxServerError(
                description: "no free port on 127.0.0.1: \(String(cString: strerror(error.code.rawValue)))")
        }
    }

    /// nginx.conf: one process in the foreground, everything inside the
    /// prefix, the HTTPS server and a status server on a Unix socket.
    private func configuration(rateLimit: Int?, redirects: [String: String]) -> String {
        let redirectBlocks = redirects.keys.sorted().map { path in
            "        location = /\(path) { return 302 \"\(redirects[path]!)\"; }"
        }
        let fields = [
            "connection", "connection_requests", "server_protocol", "request_method", "uri", "status",
            "body_bytes_sent", "http_range", "http_if_range"
        ]
        let logFormat = "{" + fields.map { "\"\($0)\":\"$\($0)\"" }.joined(separator: ",") + "}"
        return """
            daemon off;
            master_process off;
            pid \(prefix)/nginx.pid;
            error_log \(prefix)/error.log info;
            events { worker_connections 256; }
            http {
                log_format requests escape=json '\(logFormat)';
                access_log \(prefix)/access.log requests;
                client_body_temp_path \(prefix)/temp-body;
                proxy_temp_path \(prefix)/temp-proxy;
                fastcgi_temp_path \(prefix)/temp-fastcgi;
                uwsgi_temp_path \(prefix)/temp-uwsgi;
                scgi_temp_path \(prefix)/temp-scgi;
                default_type application/octet-stream;
                server {
                    listen unix:\(statusSocket);
                    access_log off;
                    location = /status { stub_status; }
                }
                server {
                    listen 127.0.0.1:\(port) ssl http2;
                    ssl_certificate \(certificate);
                    ssl_certificate_key \(prefix)/key.pem;
                    root \(files);
                    # Without sendfile limit_rate paces every 32 KiB output buffer:
                    # a response runs at the rate from its first byte.
                    sendfile off;
                    location / { \(rateLimit.map { "limit_rate \($0);" } ?? "") }
            \(redirectBlocks.joined(separator: "\n"))
                }
            }

            """
    }

    // MARK: - Reading what it saw

    /// stub_status over the Unix socket: connections open now (this query
    /// included) and accepted since nginx started (all listeners).
    private func statusQuery() throws -> (active: Int, accepted: Int) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw NginxServerError(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: statusSocket.utf8) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            throw NginxServerError(description: "connect \(statusSocket): \(String(cString: strerror(errno)))")
        }
        queriesSinceReset += 1
        let request = Array("GET /status HTTP/1.0\r\nHost: status\r\n\r\n".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            throw NginxServerError(description: "send to \(statusSocket): \(String(cString: strerror(errno)))")
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            response += buffer[0..<count]
        }
        // "Active connections: 1 \nserver accepts handled requests\n 5 5 9 \n..."
        let text = String(decoding: response, as: UTF8.self)
        let lines = text.components(separatedBy: "\r\n\r\n").last?.split(separator: "\n") ?? []
        guard lines.count >= 3,
            let active = lines[0].split(separator: " ").last.flatMap({ Int($0) }),
            let accepted = lines[2].split(separator: " ").first.flatMap({ Int($0) })
        else {
            throw NginxServerError(description: "unexpected stub_status answer: \(text.debugDescription)")
        }
        return (active, accepted)
    }

    private func loggedRequests() throws -> [Request] {
        let log = prefix + "/access.log"
        guard let data = FileManager.default.contents(atPath: log) else { return [] }
        return try data.split(separator: UInt8(ascii: "\n")).map { line in
            guard let fields = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: String],
                let connection = fields["connection"].flatMap({ Int($0) }),
                let connectionRequests = fields["connection_requests"].flatMap({ Int($0) }),
                let status = fields["status"].flatMap({ Int($0) }),
                let bodyBytes = fields["body_bytes_sent"].flatMap({ Int64($0) })
            else {
                throw NginxServerError(
                    description: "unreadable line in \(log): \(String(decoding: line, as: UTF8.self))")
            }
            return Request(
                connection: connection, connectionRequests: connectionRequests,
                httpProtocol: fields["server_protocol"] ?? "", method: fields["request_method"] ?? "",
                path: fields["uri"] ?? "", status: status, bodyBytes: bodyBytes,
                range: fields["http_range"].flatMap { $0.isEmpty ? nil : $0 },
                ifRange: fields["http_if_range"].flatMap { $0.isEmpty ? nil : $0 })
        }
    }
}

extension EndToEndTestCase {
    /// nginx as `NginxServer.init` starts it, stopped when the test ends.
    func startNginx(rateLimit: Int? = nil, redirects: [String: String] = [:]) throws -> NginxServer {
        let nginx = try NginxServer(rateLimit: rateLimit, redirects: redirects)
        addTeardownBlock { nginx.stop() }
        return nginx
    }
}
