// Reading one HTTP/1.1 request head (RFC 9112) from received bytes.
import FoundationEssentials
import SystemSupport

/// A request head: request line and header fields.
struct HTTPRequest: Equatable {
    /// A header field; names are kept lowercased.
    struct Field: Equatable {
        var name: String
        var value: String
    }

    var method: String
    /// The request-target as sent.
    var target: String
    /// 0 or 1, for HTTP/1.0 and HTTP/1.1.
    var minorVersion: Int
    var fields: [Field]

    /// The value of header `name` (lowercase); repeated fields are joined
    /// with ", " as RFC 9110 5.3 allows.
    func header(_ name: String) -> String? {
        let values = fields.filter { $0.name == name }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Every header, names lowercased, repeated fields joined.
    var headerDictionary: [String: String] {
        fields.reduce(into: [:]) { result, field in
            result[field.name] = result[field.name].map { $0 + ", " + field.value } ?? field.value
        }
    }

    /// The percent-decoded path of an origin-form or absolute-form target,
    /// with its leading `/` and without query; nil for other forms or a bad
    /// percent-encoding.
    var path: String? {
        var rest = Substring(target)
        if let scheme = ["http://", "https://"].first(where: { target.lowercased().hasPrefix($0) }) {
            rest = rest.dropFirst(scheme.count)
            rest = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        }
        guard rest.hasPrefix("/") else { return nil }
        if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        return percentDecoded(rest)
    }

    /// Whether the client lets the connection stay open after this request.
    var keepAlive: Bool {
        let options = (header("connection") ?? "").lowercased().split(separator: ",").map {
            $0.trimmingSpaces()
        }
        return minorVersion >= 1 ? !options.contains("close") : options.contains("keep-alive")
    }

    /// The length of the request body, from Content-Length (0 without one).
    var contentLength: Int64 {
        header("content-length").flatMap { $0.split(separator: ",").first }.flatMap {
            Int64($0.trimmingSpaces())
        } ?? 0
    }

    /// What parsing found at the start of a buffer.
    enum ParseOutcome: Equatable {
        /// No complete head yet: read more.
        case incomplete
        /// A request whose head took `length` bytes (leading empty lines included).
        case request(HTTPRequest, length: Int)
        /// Not a valid request: answer with this status and close.
        case invalid(status: Int)
    }

    /// Parses the request head at the start of `bytes`, allowing heads of
    /// up to `maxHeadLength` bytes (more gives 431).
    static func parse(_ bytes: UnsafeRawBufferPointer, maxHeadLength: Int) -> ParseOutcome {
        let cr = UInt8(ascii: "\r")
        let lf = UInt8(ascii: "\n")
        // Empty lines before a request line are ignored (RFC 9112 2.2).
        var start = 0
        while start < bytes.count, bytes[start] == cr || bytes[start] == lf { start += 1 }
        var end: Int?
        var index = start
        while index < bytes.count, end == nil {
            if bytes[index] == lf {
                if index + 1 < bytes.count, bytes[index + 1] == lf {
                    end = index + 2
                } else if index + 2 < bytes.count, bytes[index + 1] == cr, bytes[index + 2] == lf {
                    end = index + 3
                }
            }
            index += 1
        }
        guard let end else {
            return bytes.count - start > maxHeadLength ? .invalid(status: 431) : .incomplete
        }
        guard end - start <= maxHeadLength else { return .invalid(status: 431) }
        // Lines are split on bytes: in a String, "\r\n" is one Character.
        let lines = UnsafeRawBufferPointer(rebasing: bytes[start..<end]).split(separator: lf).map { line in
            String(decoding: line.last == cr ? line.dropLast() : line, as: UTF8.self)
        }
        do throws(Rejection) {
            return .request(try parseHead(lines), length: end)
        } catch {
            return .invalid(status: error.status)
        }
    }

    /// Why a head was refused: the status to answer with.
    private struct Rejection: Error {
        var status: Int
        static let badRequest = Rejection(status: 400)
    }

    /// Parses the lines of a head, without line ends.
    private static func parseHead(_ lines: [String]) throws(Rejection) -> HTTPRequest {
        var lines = lines
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let requestLine = lines.first else { throw .badRequest }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, isToken(parts[0]), !parts[1].isEmpty,
            parts[1].allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\u{7F}" && $0 >= "!" }),
            parts[2].hasPrefix("HTTP/")
        else { throw .badRequest }
        let version = parts[2].dropFirst(5).split(separator: ".", omittingEmptySubsequences: false)
        guard version.count == 2, version.allSatisfy({ $0.count == 1 && $0.first!.isASCIIDigit }) else {
            throw .badRequest
        }
        if version[0] != "1" { throw Rejection(status: 505) }

        var fields: [Field] = []
        for line in lines.dropFirst() {
            // Folded lines (obs-fold) and whitespace before the colon are
            // rejected (RFC 9112 5.1, 5.2).
            guard let colon = line.firstIndex(of: ":"), isToken(line[..<colon]) else { throw .badRequest }
            let value = line[line.index(after: colon)...].trimmingSpaces()
            guard !value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) else {
                throw .badRequest
            }
            fields.append(Field(name: line[..<colon].lowercased(), value: value))
        }
        let request = HTTPRequest(
            method: String(parts[0]), target: String(parts[1]), minorVersion: Int(String(version[1]))!, fields: fields)

        if request.minorVersion >= 1, fields.filter({ $0.name == "host" }).count != 1 { throw .badRequest }
        // Request bodies other than a plain Content-Length cannot be skipped.
        if request.header("transfer-encoding") != nil { throw Rejection(status: 501) }
        if let length = request.header("content-length") {
            let values = Set(length.split(separator: ",").map { $0.trimmingSpaces() })
            guard values.count == 1, let value = values.first, !value.isEmpty, value.allSatisfy(\.isASCIIDigit),
                Int64(value) != nil
            else { throw .badRequest }
        }
        return request
    }

    /// RFC 9110 5.6.2 token characters.
    private static func isToken(_ text: Substring) -> Bool {
        !text.isEmpty
            && text.unicodeScalars.allSatisfy { scalar in
                scalar.isASCII
                    && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                        || "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar))
            }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
