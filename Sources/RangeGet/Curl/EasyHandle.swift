// EasyHandle owns one libcurl easy handle, its error buffer and header list.
// It is confined to one thread at a time; libcurl handles are not thread-safe.
import CCurl
import CCurlShim

/// The C signature of libcurl's write and header callbacks.
typealias CurlDataCallback =
    @convention(c) (
        UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?
    ) -> Int

/// A thin owner of a `CURL *`: typed setters, typed getters, cleanup in deinit.
final class EasyHandle {
    let raw: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// The receive buffers for clear-text and TLS transfers, and the one set now.
    var receiveBufferSizes = (plain: 0, tls: 0)
    var receiveBufferSize = 0

    init() throws(CurlError) {
        _ = CurlGlobal.initialized
        guard let raw = curl_easy_init() else { throw CurlError(CURLE_FAILED_INIT) }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        try check(rg_easy_setopt_pointer(raw, CURLOPT_ERRORBUFFER, errorBuffer))
    }

    deinit {
        curl_easy_cleanup(raw)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Sets an option libcurl reads as `long`.
    func set(_ option: CURLoption, _ value: Int) throws(CurlError) {
        try check(rg_easy_setopt_long(raw, option, value))
    }

    /// Sets a boolean option (libcurl's `0L`/`1L`).
    func set(_ option: CURLoption, _ value: Bool) throws(CurlError) {
        try set(option, value ? 1 : 0)
    }

    /// Sets a string option; libcurl copies the string.
    func set(_ option: CURLoption, _ value: String?) throws(CurlError) {
        try check(
            value.map { rg_easy_setopt_string(raw, option, $0) }
                ?? rg_easy_setopt_string(raw, option, nil))
    }

    /// Asks for `range` of the resource (`CURLOPT_RANGE`: `first-last`, or
    /// `first-` for a range open at the end); nil for all of it.
    func setRange(_ range: ByteRange?) throws(CurlError) {
        try set(CURLOPT_RANGE, range.map { String($0.rangeHeaderValue.dropFirst("bytes=".count)) })
    }

    /// Ends the transfer (`CURLE_OPERATION_TIMEDOUT`) once no byte has
    /// arrived for `seconds`, rounded up to whole seconds as libcurl counts
    /// them, waiting for the answer included: for a probe, which has no
    /// engine watching it.
    func stallsAfter(_ seconds: Double) throws(CurlError) {
        try set(CURLOPT_LOW_SPEED_LIMIT, 1)
        try set(CURLOPT_LOW_SPEED_TIME, max(1, Int(seconds.rounded(.up))))
    }

    /// Sets an opaque pointer option (`CURLOPT_WRITEDATA`, `CURLOPT_PRIVATE`, ...).
    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws(CurlError) {
        try check(rg_easy_setopt_pointer(raw, option, value))
    }

    /// Sets a write or header callback.
    func set(_ option: CURLoption, callback: CurlDataCallback) throws(CurlError) {
        try check(rg_easy_setopt_data_callback(raw, option, callback))
    }

    /// Makes a transfer on this handle end (`CURLE_ABORTED_BY_CALLBACK`)
    /// within about a second of `stop`'s request: libcurl asks its progress
    /// callback at least once a second, even while nothing arrives.
    func abort(on stop: StopSignal) throws(CurlError) {
        try set(CURLOPT_NOPROGRESS, false)
        try set(CURLOPT_XFERINFODATA, pointer: Unmanaged.passUnretained(stop).toOpaque())
        try check(rg_easy_setopt_xferinfo_callback(raw, abortWhenStopped))
    }

    /// False while libcurl must not follow redirects itself (`setHeaders`).
    private(set) var followsRedirects = true

    /// Replaces the request's extra header lines (`Name: value`). With a
    /// line that may carry a credential (off `HeaderPolicy.harmless`),
    /// libcurl does not follow redirects: it would forward the line to any
    /// host (`performFollowingRedirects` follows them instead).
    func setHeaders(_ lines: [String]) throws(CurlError) {
        let follows = lines.allSatisfy(HeaderPolicy.mayCrossOrigins)
        try set(CURLOPT_FOLLOWLOCATION, follows)
        followsRedirects = follows
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            guard let next = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw CurlError(CURLE_OUT_OF_MEMORY)
            }
            list = next
        }
        try check(rg_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, list))
        curl_slist_free_all(headerList)
        headerList = list
    }

    /// The last response's HTTP status, 0 when none arrived.
    var responseCode: Int {
        var code = 0
        _ = rg_easy_getinfo_long(raw, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    /// The URL the last transfer ended at, after redirects.
    var effectiveURL: String? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard rg_easy_getinfo_string(raw, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK,
            let pointer
        else { return nil }
        return String(cString: pointer)
    }

    /// Where the last response (a redirect) points, resolved against its URL; nil when nowhere.
    var redirectURL: String? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard rg_easy_getinfo_string(raw, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK,
            let pointer
        else { return nil }
        return String(cString: pointer)
    }

    /// The HTTP version of the last response, e.g. "1.1" or "2"; nil when none came.
    var httpVersion: String? {
        var version = 0
        _ = rg_easy_getinfo_long(raw, CURLINFO_HTTP_VERSION, &version)
        switch version {
        case Int(CURL_HTTP_VERSION_1_0): return "1.0"
        case Int(CURL_HTTP_VERSION_1_1): return "1.1"
        case Int(CURL_HTTP_VERSION_2_0): return "2"
        case Int(CURL_HTTP_VERSION_3): return "3"
        default: return nil
        }
    }

    /// TCP connections libcurl opened for the last transfer (0 when it reused one).
    var connectionsOpened: Int {
        var count = 0
        _ = rg_easy_getinfo_long(raw, CURLINFO_NUM_CONNECTS, &count)
        return count
    }

    /// The local port of the last transfer's TCP connection; nil when it had none.
    var localPort: Int? {
        var port = 0
        guard rg_easy_getinfo_long(raw, CURLINFO_LOCAL_PORT, &port) == CURLE_OK, port > 0 else { return nil }
        return port
    }

    /// Seconds from the start of the last transfer until its TCP connection was made.
    var connectSeconds: Double {
        var seconds = 0.0
        _ = rg_easy_getinfo_double(raw, CURLINFO_CONNECT_TIME, &seconds)
        return seconds
    }

    /// Seconds from the start of the last transfer until its TLS handshake was done.
    var tlsSeconds: Double {
        var seconds = 0.0
        _ = rg_easy_getinfo_double(raw, CURLINFO_APPCONNECT_TIME, &seconds)
        return seconds
    }

    /// Seconds from the start of the last transfer to its first byte.
    var timeToFirstByte: Double {
        var seconds = 0.0
        _ = rg_easy_getinfo_double(raw, CURLINFO_STARTTRANSFER_TIME, &seconds)
        return seconds
    }

    /// Runs the configured transfer to completion on the calling thread.
    func perform() throws(CurlError) {
        errorBuffer[0] = 0
        try check(curl_easy_perform(raw))
    }

    /// Clears the error buffer before a transfer starts on a multi handle.
    func clearError() {
        errorBuffer[0] = 0
    }

    /// The typed error for `code`, with this handle's error-buffer text.
    func error(_ code: CURLcode) -> CurlError {
        CurlError(code, buffer: errorBuffer)
    }

    private func check(_ code: CURLcode) throws(CurlError) {
        guard code == CURLE_OK else { throw error(code) }
    }
}

/// The progress callback of `EasyHandle.abort(on:)`: non-zero (abort) once the stop was requested.
private let abortWhenStopped: rg_xferinfo_callback = { user, _, _, _, _ in
    guard let user else { return 0 }
    return Unmanaged<StopSignal>.fromOpaque(user).takeUnretainedValue().isRequested ? 1 : 0
}
