// TransferOptions: the request settings shared by the probe and every ranged
// GET (headers, TLS, timeouts, redirects), applied to an easy handle in one place.
import CCurl
import CCurlShim
internal import Digests

/// How every request of a download is made.
public struct TransferOptions: Sendable {
    /// Extra request headers, as name/value pairs:
    /// `[("Authorization", "Bearer TOKEN")]`. Never stored in a manifest,
    /// and sent after a redirect to another origin only when they cannot
    /// carry a credential (`Accept`, `User-Agent`, ...). A name must be an
    /// HTTP token and a value must hold no line break or control character
    /// (a download with one fails with `.usage` before any request), and
    /// `Range` and `If-Range` are the engine's own.
    public var headers: [(name: String, value: String)] {
        get {
            headerLines.map { line in
                let name = line.prefix { $0 != ":" }
                return (String(name), String(line.dropFirst(name.count + 1).drop { $0 == " " || $0 == "\t" }))
            }
        }
        set { headerLines = newValue.map { "\($0.name): \($0.value)" } }
    }
    /// The header lines as sent, `Name: value` (the command line's `-H`, checked as it parses them).
    package var headerLines: [String] = []
    /// The `User-Agent` header.
    public var userAgent = "rangeget/\(RangeGetVersion.current)"
    /// Seconds to wait for a TCP/TLS connection: finite, from 0.001 (the
    /// millisecond libcurl counts in) to 1e6 (`timeoutRange`).
    public var connectTimeout: Double = 15
    /// Seconds without a byte before a transfer counts as stalled: finite,
    /// from 0.001 to 1e6 (`timeoutRange`).
    public var stallTimeout: Double = 5
    /// Skip TLS certificate verification (`--insecure`).
    public var insecure = false
    /// A CA bundle file to verify servers with (`--cacert`).
    public var caCertificates: String?
    /// A proxy URL (`--proxy`), nil for libcurl's default (environment).
    public var proxy: String?
    /// The most redirects one request follows.
    public var maxRedirects = 10
    /// Read credentials from `~/.netrc` when the URL has none (`--netrc`).
    public var useNetrc = false
    /// A cap shared by every transfer that holds the same value (`--max-speed`).
    package var rateLimit: RateLimit?
    /// libcurl's receive buffer per clear-text transfer (`CURLOPT_BUFFERSIZE`):
    /// one `recv` fills it, so a large one means fewer system calls.
    public var receiveBufferSize = 512 * 1024
    /// The same for a TLS transfer, where each read yields one TLS record
    /// (16 KiB) whatever the buffer: a smaller one keeps eight connections'
    /// buffers in the CPU's cache (docs/DESIGN.md, "HTTP versions", has the figures).
    public var tlsReceiveBufferSize = 128 * 1024
    /// The HTTP version offered over TLS. HTTP/1.1 by default: every range
    /// has a TCP connection of its own either way, and HTTP/1.1 costs less
    /// CPU per byte than HTTP/2's framing (docs/DESIGN.md: "HTTP versions").
    public var httpVersion = HTTPVersion.http1_1
    /// Let transfers to one host share a TCP connection as HTTP/2 streams
    /// (implies HTTP/2). Off by default, because streams on one connection
    /// share its congestion window: eight ranges multiplexed are one flow
    /// (invariant 7: N connections are N TCP connections).
    public var multiplex = false

    /// The timeouts a download accepts, in seconds. Their sums are handed to
    /// libcurl as `Int` milliseconds, which an infinite, NaN or huge value
    /// (1e16) traps in converting; below a millisecond libcurl would read 0
    /// as no timeout at all. A million seconds (11 days) is past any wait
    /// worth making.
    static let timeoutRange = 0.001...1e6

    /// What makes these settings unusable, nil when nothing does.
    var problem: String? {
        for (name, value) in [("connectTimeout", connectTimeout), ("stallTimeout", stallTimeout)]
        where !Self.timeoutRange.contains(value) {
            return
                "\(name) must be from \(Self.timeoutRange.lowerBound) to \(Self.timeoutRange.upperBound) seconds, not \(value)"
        }
        for (name, value) in headers {
            guard Self.isToken(Substring(name)) else { return "the header name '\(name)' is not an HTTP token" }
            if ["range", "if-range"].contains(name.lowercased()) { return "the header \(name) is the engine's own" }
            if Self.hasControlCharacter(value) {
                return "the value of the header \(name) holds a line break or a control character"
            }
        }
        return nil
    }

    /// True for an HTTP token (RFC 9110 5.6.2), what a header name is made
    /// of; the command line's `-H` checks its names with it too.
    package static func isToken(_ text: Substring) -> Bool {
        !text.isEmpty && text.allSatisfy(tokenCharacters.contains)
    }

    private static let tokenCharacters = Set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~")

    /// True when `text` holds a control character other than the tab (a CR
    /// or LF would start a header, or a request, of its own).
    package static func hasControlCharacter(_ text: String) -> Bool {
        text.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }
    }

    /// The defaults.
    public init() {}
}

extension EasyHandle {
    /// Applies the shared settings for a request to `url`.
    func configure(url: String, options: TransferOptions) throws(CurlError) {
        try setTarget(url)
        try set(CURLOPT_NOSIGNAL, true)
        try set(CURLOPT_FOLLOWLOCATION, true)
        try set(CURLOPT_MAXREDIRS, options.maxRedirects)
        try set(CURLOPT_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_CONNECTTIMEOUT_MS, Int(options.connectTimeout * 1000))
        try set(CURLOPT_USERAGENT, options.userAgent)
        receiveBufferSizes = (options.receiveBufferSize, options.tlsReceiveBufferSize)
        try setReceiveBuffer(for: url)
        try set(CURLOPT_TCP_KEEPALIVE, true)
        try set(CURLOPT_HTTP_VERSION, options.multiplex ? HTTPVersion.http2.curlValue : options.httpVersion.curlValue)
        // Multiplexed transfers wait for the first connection's ALPN answer
        // instead of each opening its own connection meanwhile.
        try set(CURLOPT_PIPEWAIT, options.multiplex)
        if options.insecure {
            try set(CURLOPT_SSL_VERIFYPEER, false)
            try set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        if let caCertificates = options.caCertificates { try set(CURLOPT_CAINFO, caCertificates) }
        if let proxy = options.proxy { try set(CURLOPT_PROXY, proxy) }
        if options.useNetrc { try set(CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue)) }
    }

    /// Runs the request to `url` (already its target, with `options.headers`)
    /// on this thread, following redirects up to `options.maxRedirects`.
    /// libcurl follows them itself unless a header that may carry a
    /// credential is set (`setHeaders`); then each hop is taken here, with
    /// the headers `HeaderPolicy` lets its origin have, and never from https
    /// down to http. `beforeEach` runs before every request (to reset what
    /// the callbacks collect).
    func performFollowingRedirects(_ url: String, options: TransferOptions, beforeEach: () -> Void) throws(CurlError) {
        var hops = RedirectHops(from: url)
        repeat {
            beforeEach()
            try perform()
        } while try followRedirect(&hops, options: options)
    }

    /// `performFollowingRedirects`, each request run by `perform(on:stop:)`
    /// (in a session's multi handle) without holding the task's thread.
    func performFollowingRedirects(
        _ url: String, options: TransferOptions, on loop: TransferLoop?, stop: StopSignal?,
        beforeEach: () -> Void
    ) async throws(CurlError) {
        var hops = RedirectHops(from: url)
        repeat {
            beforeEach()
            try await perform(on: loop, stop: stop)
        } while try followRedirect(&hops, options: options)
    }

    /// The hops taken so far from a request's first URL.
    private struct RedirectHops {
        let first: String
        var secure: Bool
        var count = 0

        init(from url: String) {
            first = url
            secure = EasyHandle.isHTTPS(url)
        }
    }

    /// After a response: false when it is the last (no redirect to follow
    /// here); true when the handle now points at the redirect's target.
    private func followRedirect(_ hops: inout RedirectHops, options: TransferOptions) throws(CurlError) -> Bool {
        guard !followsRedirects, (300..<400).contains(responseCode), let next = redirectURL else { return false }
        guard hops.count < options.maxRedirects else {
            throw CurlError(CURLE_TOO_MANY_REDIRECTS, message: "Maximum (\(options.maxRedirects)) redirects followed")
        }
        hops.count += 1
        let nextIsSecure = Self.isHTTPS(next)
        if hops.secure && !nextIsSecure {
            throw CurlError(CURLE_UNSUPPORTED_PROTOCOL, message: "refused a redirect from https to \(next)")
        }
        hops.secure = hops.secure || nextIsSecure
        let target = HeaderPolicy.carryingUserinfo(of: hops.first, to: next)
        try setTarget(target)
        try setHeaders(HeaderPolicy.headers(options.headerLines, givenFor: hops.first, sentTo: target))
        return true
    }

    /// Points the handle at `url`. Every request goes through here, because
    /// the redirects it may follow depend on it: an https URL never follows
    /// a redirect down to plain http.
    func setTarget(_ url: String) throws(CurlError) {
        try set(CURLOPT_URL, url)
        try set(CURLOPT_REDIR_PROTOCOLS_STR, Self.isHTTPS(url) ? "https" : "http,https")
        try setReceiveBuffer(for: url)
    }

    /// True when `url`'s scheme is https, in any case (compared as bytes:
    /// lowercasing a copy of the URL cost an allocation per request).
    static func isHTTPS(_ url: String) -> Bool {
        url.hasPrefixIgnoringASCIICase("https:")
    }

    /// The receive buffer that suits `url`'s scheme (set only when it changes:
    /// libcurl reallocates it).
    private func setReceiveBuffer(for url: String) throws(CurlError) {
        let size = Self.isHTTPS(url) ? receiveBufferSizes.tls : receiveBufferSizes.plain
        guard size > 0, size != receiveBufferSize else { return }
        try set(CURLOPT_BUFFERSIZE, size)
        receiveBufferSize = size
    }
}

/// An HTTP version rangeget can offer.
public enum HTTPVersion: String, Sendable, CaseIterable {
    /// HTTP/1.1 on every connection.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // (public, and pinned by the API check: the name stays)
    case http1_1 = "1.1"
    /// HTTP/2 where TLS negotiates it (ALPN), else HTTP/1.1; never h2c on clear text.
    case http2 = "2"

    var curlValue: Int {
        switch self {
        case .http1_1: return Int(CURL_HTTP_VERSION_1_1)
        case .http2: return Int(CURL_HTTP_VERSION_2TLS)
        }
    }
}

/// The version printed by `--version` and sent in `User-Agent`.
package enum RangeGetVersion {
    /// The release number.
    package static let current = "0.1.0"

    /// The commit the binary was built from (abbreviated), with
    /// "+modified" when the tree had changes; "unknown" when it was built
    /// without `make` (scripts/build-info writes it).
    package static var build: String {
        String(cString: rg_build_commit()) + (rg_build_dirty() != 0 ? "+modified" : "")
    }

    /// libcurl's version line: its own version and its TLS, compression and
    /// HTTP/2 libraries, as `curl -V` prints them.
    package static var libraries: String {
        _ = CurlGlobal.initialized
        return String(cString: curl_version())
    }

    /// The libcrypto that computes checksums, as it names itself at run
    /// time: usually the OpenSSL that `libraries` names, but with a libcurl
    /// on another TLS library (GnuTLS) only this says which one it is.
    package static var checksumLibrary: String { DigestAlgorithm.library }
}
