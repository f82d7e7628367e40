// A tiny blocking HTTP/1.1 client over a raw socket, so the tests see
// exactly what the server writes (cut bodies, stalls, pipelining).
import Foundation
import Glibc
import RangeServer
import XCTest

/// A response as read off the wire.
struct TestResponse {
    /// How reading the body ended.
    enum Ending: Equatable {
        /// The body was read as framed (Content-Length, chunked, or EOF when unframed).
        case complete
        /// The server closed before the announced length.
        case closedEarly
        /// No byte arrived for the read timeout.
        case timedOut
    }

    var status: Int
    /// Header fields, names lowercased, in order.
    var fields: [(name: String, value: String)]
    var body: [UInt8]
    var ending: Ending

    /// The value of header `name`; repeated fields joined with ", ".
    func header(_ name: String) -> String? {
        let values = fields.filter { $0.name == name.lowercased() }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }
}

enum TestClientError: Error {
    case connect(Int32)
    case closedBeforeHead
    case timedOutBeforeHead
    case malformed(String)
}

/// One client connection to 127.0.0.1.
final class TestConnection {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var peerClosed = false

    init(port: UInt16, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw TestClientError.connect(code)
        }
        setTimeout(timeout)
    }

    deinit { close(fd) }

    /// The receive timeout (SO_RCVTIMEO) for every later read.
    func setTimeout(_ seconds: Double) {
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// Sends a request with the given extra header lines.
    func sendRequest(_ method: String = "GET", _ path: String, headers: [String: String] = [:], close: Bool = false) {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        if close { text += "Connection: close\r\n" }
        send(text + "\r\n")
    }

    /// Reads more bytes into the buffer; false on EOF, nil on timeout.
    private func fill() -> Bool? {
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[0..<count])
                return true
            }
            if count == 0 {
                peerClosed = true
                return false
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return nil }
            peerClosed = true
            return false
        }
    }

    /// Reads one response; `bodyless` for the answer to a HEAD.
    func readResponse(bodyless: Bool = false) throws -> TestResponse {
        var headEnd: Int?
        while true {
            headEnd = findHeadEnd()
            if headEnd != nil { break }
            switch fill() {
            case true?: continue
            case false?: throw TestClientError.closedBeforeHead
            case nil: throw TestClientError.timedOutBeforeHead
            }
        }
        let head = String(decoding: buffer[0..<headEnd!], as: UTF8.self)
        buffer.removeFirst(headEnd! + 4)
        let lines = head.components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, statusParts[0] == "HTTP/1.1", let status = Int(statusParts[1]) else {
            throw TestClientError.malformed(lines[0])
        }
        let fields = lines.dropFirst().map { line -> (name: String, value: String) in
            let colon = line.firstIndex(of: ":")!
            return (line[..<colon].lowercased(), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var response = TestResponse(status: status, fields: fields, body: [], ending: .complete)
        if bodyless || status == 204 || status == 304 { return response }
        if response.header("transfer-encoding") == "chunked" {
            try readChunked(into: &response)
        } else if let length = response.header("content-length").flatMap(Int.init) {
            response.ending = read(count: length, into: &response.body)
        } else {
            response.ending = read(count: .max, into: &response.body)
            if response.ending == .closedEarly { response.ending = .complete }
        }
        return response
    }

    /// Whether the server closes the connection within `timeout` seconds.
    func closesWithin(_ timeout: Double) -> Bool {
        // One deadline for the whole wait: a peer that trickles bytes would
        // renew a per-read timeout forever.
        let deadline = Date().addingTimeInterval(timeout)
        while !peerClosed {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return false }
            setTimeout(max(0.001, left))
            guard fill() != nil else { return false }
        }
        return true
    }

    private func findHeadEnd() -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4)
        where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index
        }
        return nil
    }

    private func read(count: Int, into body: inout [UInt8]) -> TestResponse.Ending {
        while buffer.count < count {
            switch fill() {
            case true?: continue
            case false?:
                body += buffer
                buffer = []
                return .closedEarly
            case nil:
                body += buffer
                buffer = []
                return .timedOut
            }
        }
        body += buffer[0..<count]
        buffer.removeFirst(count)
        return .complete
    }

    private func readLine() throws -> String {
        while true {
            if let index = buffer.firstIndex(of: 10), index > 0, buffer[index - 1] == 13 {
                let line = String(decoding: buffer[0..<index - 1], as: UTF8.self)
                buffer.removeFirst(index + 1)
                return line
            }
            guard fill() == true else { throw TestClientError.malformed("chunked body ended early") }
        }
    }

    private func readChunked(into response: inout TestResponse) throws {
        while true {
            guard let size = Int(try readLine(), radix: 16) else { throw TestClientError.malformed("chunk size") }
            if size == 0 {
                _ = try readLine()
                return
            }
            var chunk: [UInt8] = []
            guard read(count: size, into: &chunk) == .complete else { throw TestClientError.malformed("short chunk") }
            response.body += chunk
            guard try readLine().isEmpty else { throw TestClientError.malformed("chunk end") }
        }
    }
}

/// One request on a new connection with `Connection: close`. Returns once
/// the server closed the connection, so its statistics include the response.
func fetch(
    _ server: RangeServer, _ path: String, method: String = "GET", headers: [String: String] = [:], timeout: Double = 5
) throws -> TestResponse {
    let connection = try TestConnection(port: server.port, timeout: timeout)
    connection.sendRequest(method, path, headers: headers, close: true)
    let response = try connection.readResponse(bodyless: method == "HEAD")
    _ = connection.closesWithin(timeout)
    return response
}

/// A started server with the given resources; stopped by the test's teardown.
func startServer(
    _ resources: [String: Resource] = [:], configuration: RangeServer.Configuration = .init(),
    on testCase: XCTestCase
) throws -> RangeServer {
    let server = RangeServer(configuration: configuration)
    for (path, resource) in resources { server.setResource(resource, at: path) }
    try server.start()
    testCase.addTeardownBlock { server.stop() }
    return server
}

/// Opens `count` connections, sends each a GET of `path` at once and reads
/// on every connection in a thread of its own for `seconds`. Returns the
/// bytes each connection received in that time (heads included, a few
/// hundred bytes), for rate and fairness checks.
func receiveConcurrently(
    from server: RangeServer, _ path: String, connections count: Int, for seconds: Double
) throws -> [Int] {
    final class Tally: @unchecked Sendable {
        let lock = NSLock()
        var bytes: [Int]
        init(_ count: Int) { bytes = Array(repeating: 0, count: count) }
    }
    let connections = try (0..<count).map { _ in try TestConnection(port: server.port, timeout: 0.05) }
    let tally = Tally(count)
    let group = DispatchGroup()
    let deadline = Date().addingTimeInterval(seconds)
    for connection in connections { connection.sendRequest("GET", path) }
    for (index, connection) in connections.enumerated() {
        let fd = connection.fd
        group.enter()
        Thread {
            var buffer = [UInt8](repeating: 0, count: 256 << 10)
            var total = 0
            while Date() < deadline {
                let received = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if received > 0 {
                    total += received
                } else if received == 0 || errno != EAGAIN && errno != EINTR {
                    break
                }
            }
            tally.lock.withLock { tally.bytes[index] = total }
            group.leave()
        }.start()
    }
    group.wait()
    withExtendedLifetime(connections) {}
    return tally.lock.withLock { tally.bytes }
}
