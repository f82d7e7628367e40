// Deciding a response: status, headers, body pieces and how it ends, from
// the request, the resource and the fault. Pure, so it is tested directly;
// the connection only carries the plan out.
import FoundationEssentials

/// A part of a response body: literal bytes or a range of the resource.
enum BodyPiece: Equatable {
    case bytes([UInt8])
    case content(Range<Int64>)

    var count: Int64 {
        switch self {
        case .bytes(let bytes): Int64(bytes.count)
        case .content(let range): Int64(range.count)
        }
    }
}

extension [BodyPiece] {
    /// The total length of the pieces.
    var byteCount: Int64 { reduce(0) { $0 + $1.count } }
}

/// A response to send, decided before any byte goes out.
struct ResponsePlan: Equatable {
    /// A header field, name as sent.
    struct Field: Equatable {
        var name: String
        var value: String
    }

    /// How the response ends, and what happens to the connection.
    enum Ending: Equatable {
        /// The whole body is sent; the connection stays open.
        case complete
        /// The whole body is sent, then the connection closes.
        case close
        /// This many body bytes are sent, then the connection closes.
        case cut(after: Int64)
        /// This many body bytes are sent, then nothing until the client
        /// closes or the server stops.
        case stall(after: Int64)
        /// Nothing at all is sent until the client closes or the server stops.
        case hang
    }

    /// What the plan depends on besides the resource and the fault.
    struct Context {
        var method: String
        var rangeHeader: String?
        var ifRangeHeader: String?
        /// HTTP/1.0 rather than 1.1.
        var isHTTP10 = false
        /// Whether the client lets the connection stay open.
        var keepAlive = true
        /// The request's number among the requests to its path, 1-based.
        var requestNumber = 1
        /// The Date header value.
        var date: String
    }

    var status: Int
    var fields: [Field]
    var body: [BodyPiece]
    var ending: Ending

    /// The number of body bytes a complete response carries.
    var bodyLength: Int64 { body.byteCount }

    /// Whether the body carries bytes of the resource (not only literals).
    var sendsContent: Bool {
        body.contains { piece in
            if case .content = piece { return true }
            return false
        }
    }

    /// The value of the first field called `name` (case-insensitive).
    func field(_ name: String) -> String? {
        fields.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The status line and header fields, ready to send.
    var serializedHead: [UInt8] {
        var head = "HTTP/1.1 \(status) \(Self.reasonPhrase(status))\r\n"
        for field in fields { head += "\(field.name): \(field.value)\r\n" }
        head += "\r\n"
        return Array(head.utf8)
    }

    // MARK: Planning

    private static let multipartBoundary = "RangeServer-3d6b2a1f"
    private static let chunkSize: Int64 = 256 << 10

    /// The response to a GET or HEAD for `resource` (nil: nothing there),
    /// with `fault` (already known to apply to this method) injected.
    static func plan(_ context: Context, resource: Resource?, fault: Fault?) -> ResponsePlan {
        switch fault {
        case .status(let code, let retryAfter)?:
            var plan = page(code, context)
            if let retryAfter { plan.fields.insert(Field(name: "Retry-After", value: String(retryAfter)), at: 1) }
            return plan
        case .retryAfter(let code, let value)?:
            var plan = page(code, context)
            plan.fields.insert(Field(name: "Retry-After", value: value), at: 1)
            return plan
        case .redirect(let location, let code)?:
            var plan = page(code, context)
            plan.fields.insert(Field(name: "Location", value: location), at: 1)
            return plan
        case .headStatus(let code)?:
            var plan = page(code, context)
            if code == 405 { plan.fields.insert(Field(name: "Allow", value: "GET"), at: 1) }
            return plan
        case .headHang?, .hang?:
            return ResponsePlan(status: 0, fields: [], body: [], ending: .hang)
        default:
            break
        }
        guard let resource, resource.isAvailable else { return page(404, context) }

        let size = resource.size
        let etag = fault == .weakETag ? resource.etag.map { $0.hasPrefix("W/") ? $0 : "W/" + $0 } : resource.etag
        var rangesIgnored = fault == .ignoreRange || fault == .acceptRangesNone || fault == .chunkedNoLength
        if case .claimLength? = fault { rangesIgnored = true }
        let decision =
            rangesIgnored
            ? .full
            : RangeDecision.decide(
                method: context.method, range: context.rangeHeader, ifRange: context.ifRangeHeader,
                size: size, etag: etag, lastModified: resource.lastModified)

        var status = 200
        var contentType = resource.contentType
        var contentRange: String?
        var body: [BodyPiece]
        switch decision {
        case .unsatisfiable:
            status = 416
            contentRange = "bytes */\(size)"
            body = []
        case .partial(let range) where fault == .multipart:
            status = 206
            contentType = "multipart/byteranges; boundary=\(multipartBoundary)"
            body = multipartBody([range], size: size, contentType: resource.contentType)
        case .multiple(let ranges) where fault == .multipart && !ranges.isEmpty:
            status = 206
            contentType = "multipart/byteranges; boundary=\(multipartBoundary)"
            body = multipartBody(ranges, size: size, contentType: resource.contentType)
        case .partial(let range):
            status = 206
            (contentRange, body) = singleRange(range, size: size, fault: fault)
            if case .overlong(let extra)? = fault {
                body.append(.bytes(Array(repeating: UInt8(ascii: "!"), count: Int(extra))))
            }
        case .full, .multiple:
            body = fault == .chunkedNoLength ? chunkedBody(size) : (size > 0 ? [.content(0..<size)] : [])
        }

        var fields = [Field(name: "Date", value: context.date), Field(name: "Server", value: "RangeServer")]
        if status != 416 { fields.append(Field(name: "Content-Type", value: contentType)) }
        let omitLength = fault == .chunkedNoLength || (fault == .headNoLength && context.method == "HEAD")
        if case .claimLength(let digits)? = fault {
            fields.append(Field(name: "Content-Length", value: digits))
        } else if !omitLength {
            fields.append(Field(name: "Content-Length", value: String(body.byteCount)))
        }
        if let contentRange { fields.append(Field(name: "Content-Range", value: contentRange)) }
        switch fault {
        case .noAcceptRanges?: break
        case .acceptRangesNone?: fields.append(Field(name: "Accept-Ranges", value: "none"))
        default: fields.append(Field(name: "Accept-Ranges", value: "bytes"))
        }
        if let etag { fields.append(Field(name: "ETag", value: etag)) }
        if let lastModified = resource.lastModified {
            fields.append(Field(name: "Last-Modified", value: HTTPDate.format(lastModified)))
        }
        if let disposition = resource.contentDisposition {
            fields.append(Field(name: "Content-Disposition", value: disposition))
        }
        if fault == .gzipEncoding { fields.append(Field(name: "Content-Encoding", value: "gzip")) }
        if fault == .chunkedNoLength { fields.append(Field(name: "Transfer-Encoding", value: "chunked")) }
        fields += connectionFields(context)
        if case .header(let name, let value)? = fault {
            if let index = fields.firstIndex(where: { $0.name.lowercased() == name.lowercased() }) {
                fields[index].value = value
            } else {
                fields.append(Field(name: name, value: value))
            }
        }

        if context.method == "HEAD" { body = [] }
        let length = body.byteCount
        let ending: Ending
        switch fault {
        case .cutAfter(let n)?:
            ending = .cut(after: min(n, length))
        case .cutAtRandom(let seed)?:
            let draw = SplitMix64.value(seed: seed, index: UInt64(context.requestNumber))
            ending = .cut(after: length > 0 ? Int64(draw % UInt64(length)) : 0)
        case .stallAfter(let n)?:
            ending = .stall(after: min(n, length))
        case .claimLength?, .header?:
            // The body no longer matches what the head may say about its length.
            ending = .close
        default:
            ending = context.keepAlive ? .complete : .close
        }
        return ResponsePlan(status: status, fields: fields, body: body, ending: ending)
    }

    /// A small HTML page with `status`, e.g. for 404, 405 or an injected
    /// 503; none for 204 and 304, which cannot carry one.
    static func page(_ status: Int, _ context: Context) -> ResponsePlan {
        var fields = [Field(name: "Date", value: context.date), Field(name: "Server", value: "RangeServer")]
        var body: [BodyPiece] = []
        if status != 204 && status != 304 {
            let title = "\(status) \(reasonPhrase(status))"
            let html = Array("<html><head><title>\(title)</title></head><body><h1>\(title)</h1></body></html>\n".utf8)
            fields.append(Field(name: "Content-Type", value: "text/html; charset=utf-8"))
            fields.append(Field(name: "Content-Length", value: String(html.count)))
            if context.method != "HEAD" { body = [.bytes(html)] }
        }
        return ResponsePlan(
            status: status, fields: fields + connectionFields(context), body: body,
            ending: context.keepAlive ? .complete : .close)
    }

    /// `status` with an empty body (`Content-Length: 0`), e.g. the 403 to a
    /// URL whose token is missing or expired.
    static func empty(_ status: Int, _ context: Context) -> ResponsePlan {
        let fields = [
            Field(name: "Date", value: context.date), Field(name: "Server", value: "RangeServer"),
            Field(name: "Content-Length", value: "0")
        ]
        return ResponsePlan(
            status: status, fields: fields + connectionFields(context), body: [],
            ending: context.keepAlive ? .complete : .close)
    }

    /// The 503 to a request over the connection limit: `Retry-After: 1`, no
    /// body, and the connection closed, as nginx's `limit_conn` answers.
    static func overLimit(_ context: Context) -> ResponsePlan {
        var closing = context
        closing.keepAlive = false
        var plan = empty(503, closing)
        plan.fields.insert(Field(name: "Retry-After", value: "1"), at: 2)
        return plan
    }

    /// 200 with `text` as a `text/plain` body (none to HEAD), not to be cached.
    static func text(_ text: String, _ context: Context) -> ResponsePlan {
        let bytes = Array(text.utf8)
        let fields = [
            Field(name: "Date", value: context.date), Field(name: "Server", value: "RangeServer"),
            Field(name: "Content-Type", value: "text/plain; charset=utf-8"),
            Field(name: "Content-Length", value: String(bytes.count)), Field(name: "Cache-Control", value: "no-store")
        ]
        return ResponsePlan(
            status: 200, fields: fields + connectionFields(context),
            body: context.method == "HEAD" ? [] : [.bytes(bytes)], ending: context.keepAlive ? .complete : .close)
    }

    private static func connectionFields(_ context: Context) -> [Field] {
        if !context.keepAlive { return [Field(name: "Connection", value: "close")] }
        return context.isHTTP10 ? [Field(name: "Connection", value: "keep-alive")] : []
    }

    /// The Content-Range and body of a 206 for `range`, bent by `fault`.
    private static func singleRange(_ range: Range<Int64>, size: Int64, fault: Fault?) -> (String, [BodyPiece]) {
        var sent = range
        var total = size
        switch fault {
        case .wrongContentRangeShift(let shift)?:
            let lower = min(max(range.lowerBound + shift, 0), size - 1)
            sent = lower..<max(min(range.upperBound + shift, size), lower + 1)
        case .wrongContentRangeTotal(let other)?:
            total = other
        case .invertedContentRange?:
            return ("bytes \(range.upperBound)-\(range.lowerBound)/\(size)", [.content(range)])
        default:
            break
        }
        return ("bytes \(sent.lowerBound)-\(sent.upperBound - 1)/\(total)", [.content(sent)])
    }

    private static func multipartBody(_ ranges: [Range<Int64>], size: Int64, contentType: String) -> [BodyPiece] {
        var body: [BodyPiece] = []
        for range in ranges {
            let partHead =
                "--\(multipartBoundary)\r\nContent-Type: \(contentType)\r\n"
                + "Content-Range: bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)\r\n\r\n"
            body += [.bytes(Array(partHead.utf8)), .content(range), .bytes(Array("\r\n".utf8))]
        }
        body.append(.bytes(Array("--\(multipartBoundary)--\r\n".utf8)))
        return body
    }

    private static func chunkedBody(_ size: Int64) -> [BodyPiece] {
        var body: [BodyPiece] = []
        var offset: Int64 = 0
        while offset < size {
            let end = min(offset + chunkSize, size)
            body += [
                .bytes(Array("\(String(end - offset, radix: 16))\r\n".utf8)), .content(offset..<end), .bytes([13, 10])
            ]
            offset = end
        }
        body.append(.bytes(Array("0\r\n\r\n".utf8)))
        return body
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 410: "Gone"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}
