// RangeFetch: one small ranged GET kept in memory, outside the engine: the
// bench's samples of every mirror, and the spot check of a resume whose
// server gives no validator. Its bytes count only when the answer is one
// ResponseCheck.partialContent takes for exactly the range asked for.
import CCurl
import CCurlShim

/// A small ranged response: its head and at most the range's length of body.
struct RangeFetch {
    /// The response head.
    let head: ResponseHead
    /// The body, cut off at the range's length.
    let body: [UInt8]
    /// Seconds from the request to the first byte.
    let timeToFirstByte: Double
    /// "1.1", "2", ...
    let httpVersion: String?

    /// GETs `range` of `url` with `options`' headers, TLS settings and
    /// timeouts. The headers were given for `origin` (the URL the user
    /// named): another origin (where a redirect of it led) gets only those
    /// that cannot carry a credential, as the redirect itself would.
    init(url: String, range: ByteRange, options: TransferOptions, headersGivenFor origin: String) throws(CurlError) {
        var options = options
        options.headerLines = HeaderPolicy.headers(options.headerLines, givenFor: origin, sentTo: url)
        let easy = try EasyHandle()
        try easy.configure(url: url, options: options)
        try easy.setHeaders(options.headerLines)
        try easy.setRange(range)
        try easy.set(CURLOPT_TIMEOUT_MS, Int((options.connectTimeout + options.stallTimeout * 2) * 1000))
        let headers = HeaderCollector()
        try headers.install(on: easy)
        let capture = Capture(limit: Int(range.count))
        try easy.set(CURLOPT_WRITEDATA, pointer: Unmanaged.passUnretained(capture).toOpaque())
        try easy.set(CURLOPT_WRITEFUNCTION, callback: captureBody)
        try withExtendedLifetime((headers, capture)) { () throws(CurlError) in
            // Redirects are followed here, so that only harmless headers reach another origin.
            try easy.performFollowingRedirects(url, options: options) {
                headers.reset()
                capture.body = []
            }
        }
        head = headers.head
        body = capture.body
        timeToFirstByte = easy.timeToFirstByte
        httpVersion = easy.httpVersion
    }

    /// The body when the response is a usable answer to exactly `range` of
    /// the file `expected` describes (`ResponseCheck.partialContent`) and
    /// carries all of it; otherwise why not (a body shorter than its
    /// Content-Range is an unexpected Content-Range).
    func bytes(of range: ByteRange, expected: Expectation) -> Result<[UInt8], Rejection> {
        ResponseCheck.partialContent(head, answering: .exactly(range), expected: expected).flatMap { _ in
            body.count == Int(range.count) ? .success(body) : .failure(.contentRange(head["content-range"]))
        }
    }
}

/// At most `limit` bytes of a small response's body, kept in memory.
private final class Capture {
    var body: [UInt8] = []
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }
}

private let captureBody: CurlDataCallback = { data, size, count, user in
    guard let data, let user else { return 0 }
    let capture = Unmanaged<Capture>.fromOpaque(user).takeUnretainedValue()
    guard capture.body.count + size * count <= capture.limit else { return 0 }
    capture.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}
