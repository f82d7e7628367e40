// ScriptedServer: a loopback HTTP/1.1 server whose every response a test
// writes by hand, for the few malformed answers RangeServer cannot produce
// (a Content-Length past Int64, a hostile Content-Range, a reset mid-body),
// and a plain-HTTP answer to a TLS handshake.
import Foundation
import Glibc
import RangeServer
import Synchronization

/// One request as the scripted server read it.
struct ScriptedRequest: Sendable {
    var method: String
    var target: String
    /// Names lowercased.
    var headers: [String: String]
}

/// What the scripted server sends: a head (status line and fields, without the
/// blank line) and a body; then it closes, or resets the connection.
struct ScriptedResponse: Sendable {
    var head: String
    var body: [UInt8] = []
    /// Send only this many body bytes, then reset the connection (RST).
    var resetAfter: Int?
    /// Seconds to keep the connection open after sending (a body that stops short and stalls).
    var holdOpen: Double = 0

    /// A correct answer for `resource` to `request`: 206 for a range, else 200.
    static func serving(
        _ resource: Resource, _ request: ScriptedRequest, etag: String = "\"scripted-1\"",
        extraFields: [String] = [], contentRange: ((Range<Int64>) -> String)? = nil
    ) -> ScriptedResponse {
        var fields = ["Accept-Ranges: bytes", "ETag: \(etag)", "Connection: close"] + extraFields
        if let range = requestedRange(request.headers["range"], size: resource.size) {
            let value = contentRange?(range) ?? "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(resource.size)"
            fields += ["Content-Range: \(value)", "Content-Length: \(range.count)"]
            let body = request.method == "HEAD" ? [] : resource.bytes(in: range)
            return ScriptedResponse(
                head: (["HTTP/1.1 206 Partial Content"] + fields).joined(separator: "\r\n"), body: body)
        }
        fields.append("Content-Length: \(resource.size)")
        let body = request.method == "HEAD" ? [] : resource.bytes(in: 0..<resource.size)
        return ScriptedResponse(head: (["HTTP/1.1 200 OK"] + fields).joined(separator: "\r\n"), body: body)
    }
}

/// A loopback HTTP/1.1 server answering each request with whatever `handler`
/// returns, one request per connection (it always closes).
final class ScriptedServer: Sendable {
    private let listener: Int32
    let port: UInt16
    private let handler: @Sendable (ScriptedRequest) -> ScriptedResponse
    private let state = Mutex<(requests: [ScriptedRequest], clients: Set<Int32>, stopped: Bool)>(([], [], false))
    private let threads = DispatchGroup()

    init(handler: @escaping @Sendable (ScriptedRequest) -> ScriptedResponse) throws {
        self.handler = handler
        let (fd, port) = try LoopbackSocket.bound()
        guard listen(fd, 64) == 0 else {
            let error = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            close(fd)
            throw error
        }
        listener = fd
        self.port = port
        threads.enter()
        Thread { [self] in
            acceptLoop()
            threads.leave()
        }.start()
    }

    deinit { stop() }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/" + path }

    var requests: [ScriptedRequest] { state.withLock { $0.requests } }

    func stop() {
        let clients = state.withLock { state -> Set<Int32>? in
            guard !state.stopped else { return nil }
            state.stopped = true
            return state.clients
        }
        guard let clients else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in clients { shutdown(fd, Int32(SHUT_RDWR)) }
        _ = threads.wait(timeout: .now() + 5)
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.clients.insert(client)
                return true
            }
            guard accepted else {
                close(client)
                return
            }
            threads.enter()
            Thread { [self] in
                serve(client)
                state.withLock { state in
                    state.clients.remove(client)
                    close(client)
                }
                threads.leave()
            }.start()
        }
    }

    private func serve(_ fd: Int32) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        let terminator: [UInt8] = [13, 10, 13, 10]
        while received.count < 64 << 10 {
            if let end = received.firstRange(of: terminator) {
                let text = String(decoding: received[..<end.lowerBound], as: UTF8.self)
                var lines = text.components(separatedBy: "\r\n")
                let requestLine = lines.removeFirst().split(separator: " ")
                guard requestLine.count >= 2 else { return }
                var headers: [String: String] = [:]
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                        in: .whitespaces)
                }
                let request = ScriptedRequest(
                    method: String(requestLine[0]), target: String(requestLine[1]), headers: headers)
                state.withLock { $0.requests.append(request) }
                let response = handler(request)
                respond(response, on: fd)
                if response.holdOpen > 0 { usleep(UInt32(response.holdOpen * 1_000_000)) }
                return
            }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            received += buffer[0..<count]
            // No method starts so (a TLS handshake starts with 0x16): a bad
            // request, answered at once in plain HTTP, as nginx answers it.
            if let first = received.first, !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(first) {
                return respond(
                    ScriptedResponse(head: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close"), on: fd
                )
            }
        }
    }

    private func respond(_ response: ScriptedResponse, on fd: Int32) {
        var bytes = Array((response.head + "\r\n\r\n").utf8)
        let bodyCount = min(response.body.count, response.resetAfter ?? response.body.count)
        bytes += response.body[0..<bodyCount]
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
        if response.resetAfter != nil {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
    }
}

extension EndToEndTestCase {
    /// A ScriptedServer answering every request with `handler`, stopped when the test ends.
    func scriptedServer(_ handler: @escaping @Sendable (ScriptedRequest) -> ScriptedResponse) throws -> ScriptedServer {
        let server = try ScriptedServer(handler: handler)
        addTeardownBlock { server.stop() }
        return server
    }
}
