// Prober: learns a remote file's size, validators and range support before
// any byte is written. HEAD first; when HEAD is refused, hangs, gives no
// length or says `Accept-Ranges: none`, `GET Range: bytes=0-0` decides, with
// the total from Content-Range (ResponseCheck.partialContent judges it); a 200
// or a coded 206 to that, or a ranged GET that never answers a server whose
// HEAD did answer, means one plain stream. A server that answers neither
// within the stall timeout did not answer: that is the failure, not a guess.
// A failure says whether another attempt may succeed (`ProbeFailure`):
// `Download.probeMirrors` retries on that.
import CCurl
import Synchronization

struct Prober {
    let options: TransferOptions
    /// TCP connections the probes opened, from every thread probing with this prober.
    let connectionsOpened: ConnectionCount
    /// Ends the probes under way within about a second of its request (a
    /// pause or cancel while a server keeps a probe waiting); nil: they run
    /// to their timeouts.
    private(set) var stop: StopSignal?
    /// The session loop whose multi handle carries the probes; nil, or a
    /// loop without a thread of its own: each probe runs on a thread of its own.
    let loop: TransferLoop?

    init(
        options: TransferOptions, loop: TransferLoop? = nil,
        counting connectionsOpened: ConnectionCount = ConnectionCount()
    ) {
        self.options = options
        self.loop = loop
        self.connectionsOpened = connectionsOpened
    }

    /// This prober (counting into the same figures), its probes ended by `stop`.
    func stopping(on stop: StopSignal) -> Prober {
        var prober = self
        prober.stop = stop
        return prober
    }

    /// This prober (counting into the same figures), sending `target` only
    /// the headers given for `origin` that may go there, as along a
    /// redirect (`HeaderPolicy`): for a URL that stands in for another.
    func sending(to target: String, headersGivenFor origin: String) -> Prober {
        var transfer = options
        transfer.headerLines = HeaderPolicy.headers(options.headerLines, givenFor: origin, sentTo: target)
        var prober = Prober(options: transfer, loop: loop, counting: connectionsOpened)
        prober.stop = stop
        return prober
    }

    /// Probes `url`, following redirects; `skipHead` goes straight to the
    /// ranged GET (after a HEAD was caught lying about the size).
    func probe(_ url: String, skipHead: Bool = false) async throws(DownloadError) -> RemoteFile {
        do {
            return try await attempt(url, skipHead: skipHead)
        } catch {
            throw error.error
        }
    }

    /// One probe of `url`; a failure says whether another attempt may succeed.
    /// `rangedUnanswered`: a ranged GET from byte 0 (the opening request)
    /// got no answer in its time already; it is not sent again.
    func attempt(_ url: String, skipHead: Bool = false, rangedUnanswered: Bool = false) async throws(ProbeFailure)
        -> RemoteFile
    {
        let remote = try await find(url, skipHead: skipHead, rangedUnanswered: rangedUnanswered)
        if let size = remote.size, size > RemoteFile.largestSize {
            throw ProbeFailure(.server(url: url, message: Rejection.implausibleTotal(size).description))
        }
        return remote
    }

    private func find(_ url: String, skipHead: Bool, rangedUnanswered: Bool) async throws(ProbeFailure) -> RemoteFile {
        var headed: RemoteFile?
        // True when HEAD got no answer at all in its time.
        var headUnanswered = false
        if !skipHead {
            do {
                headed = try await head(url)
            } catch let error as CurlError {
                headUnanswered = error.code == Int(CURLE_OPERATION_TIMEDOUT.rawValue)
            } catch {}
        }
        if headUnanswered, rangedUnanswered { throw .unanswered(url, within: options.stallTimeout) }
        // An absurd length from HEAD is no length: the ranged GET decides.
        if let headed, headed.acceptsRanges, let size = headed.size, size > 0, size <= RemoteFile.largestSize {
            return headed
        }
        do {
            return try await rangedGet(url, headUnanswered: headUnanswered)
        } catch let failure where headed != nil && failure.isNetwork {
            // HEAD answered but a ranged GET does not: one plain stream.
            var plain = headed!
            plain.acceptsRanges = false
            return plain
        }
    }

    /// HEAD; nil-free only when the server answered 2xx. Its answer must
    /// start within the stall timeout of the connection, as any transfer's.
    private func head(_ url: String) async throws -> RemoteFile {
        let easy = try EasyHandle()
        try easy.configure(url: url, options: options)
        try easy.setHeaders(options.headerLines)
        try easy.set(CURLOPT_NOBODY, true)
        // A HEAD that hangs must not hold up the download: the GET probe follows.
        try easy.set(CURLOPT_TIMEOUT_MS, Int((options.connectTimeout + options.stallTimeout) * 1000))
        try easy.stallsAfter(options.stallTimeout)
        let exchange = try ProbeExchange(on: easy, stop: stop)
        defer { connectionsOpened.add(easy.connectionsOpened) }
        try await exchange.perform(url, options: options, on: loop)
        let head = exchange.headers.head
        guard (200..<300).contains(head.status) else {
            throw DownloadError.server(url: url, message: "HEAD answered \(head.status)", status: head.status)
        }
        return RemoteFile(
            url: url, effectiveURL: easy.effectiveURL, head: head, size: head.contentLength,
            acceptsRanges: head["accept-ranges"]?.lowercased() != "none")
    }

    /// `GET Range: bytes=0-0`, reading only the response head.
    /// `headUnanswered`: HEAD got no answer in its time either.
    private func rangedGet(_ url: String, headUnanswered: Bool) async throws(ProbeFailure) -> RemoteFile {
        let easy: EasyHandle
        let exchange: ProbeExchange
        var failure: CurlError?
        do {
            easy = try EasyHandle()
            try easy.configure(url: url, options: options)
            try easy.setHeaders(options.headerLines)
            try easy.setRange(ByteRange(0, 1))
            try easy.stallsAfter(options.stallTimeout)
            exchange = try ProbeExchange(on: easy, stop: stop)
            do {
                try await exchange.perform(url, options: options, on: loop)
            } catch {
                failure = error
            }
            connectionsOpened.add(easy.connectionsOpened)
        } catch {
            throw ProbeFailure(network: url, error)
        }
        let head = exchange.headers.head
        // The exchange stops the body on purpose once the head is in; a body
        // that stalls after a complete head does not matter either: the head
        // is all a probe needs.
        let redirected = (300..<400).contains(head.status) || failure?.code == Int(CURLE_TOO_MANY_REDIRECTS.rawValue)
        if let failure, !exchange.stoppedBody, !head.isComplete || redirected {
            if failure.code == Int(CURLE_OPERATION_TIMEDOUT.rawValue), head.status == 0 {
                // Neither HEAD nor this GET was answered: the server did not
                // answer, and waiting for it again would double a wait already
                // twice the stall timeout (not retried).
                if headUnanswered { throw .unanswered(url, within: options.stallTimeout) }
                // A ranged GET that never answers a server whose HEAD did (or
                // was refused): a plain stream is the last thing left to try.
                return RemoteFile(
                    url: url, effectiveURL: url, size: nil, etag: nil, lastModified: nil,
                    acceptsRanges: false, contentDisposition: nil)
            }
            throw ProbeFailure(network: url, failure)
        }
        var remote = RemoteFile(url: url, effectiveURL: easy.effectiveURL, head: head, size: nil, acceptsRanges: false)
        switch ResponseCheck.partialContent(head, answering: .exactly(ByteRange(0, 1)), expected: .unknown) {
        case let .success(answer):
            remote.size = answer.total
            remote.acceptsRanges = true
        case let .failure(.implausibleTotal(total)):
            // Refused by `attempt`, as a HEAD's claim of such a length is.
            remote.size = total
        case .failure(.encoded):
            // Offsets and total are the coded form's, not the file's: one plain
            // stream, whose length its own answer tells (as for a coded 200).
            break
        case .failure(.rangeIgnored):
            remote.size = head.contentEncoding == nil ? head.contentLength : nil
        case .failure(.status(416, _)):
            // Nothing at byte 0: an empty file, whose total the 416 names.
            guard let total = head.contentRange?.total else {
                throw ProbeFailure(.server(url: url, message: "416 without a usable Content-Range"))
            }
            remote.size = total
            remote.acceptsRanges = true
        case let .failure(rejection):
            // An error status, or a malformed answer: one server's bad answer
            // may be followed by a good one (`Rejection.isTransient`).
            throw ProbeFailure(server: url, rejection)
        }
        return remote
    }
}

/// A probe that failed: the error to report, and whether another attempt
/// may succeed (a refused or broken connection, an error status such as 503,
/// a malformed answer), with the wait the server asked for.
struct ProbeFailure: Error {
    let error: DownloadError
    let isTransient: Bool
    /// `Retry-After` in seconds, when the server sent one.
    let retryAfter: Double?

    /// A failure no other attempt would mend.
    init(_ error: DownloadError) {
        self.error = error
        isTransient = false
        retryAfter = nil
    }

    /// A libcurl failure, transient as `CurlError.classification` says,
    /// except a name that does not resolve: before the first byte that is
    /// most often a typo, not a resolver's bad moment (the engine's retries
    /// see to those mid-download).
    init(network url: String, _ failure: CurlError) {
        error = .network(url: url, message: failure.message, failure: failure.failure)
        isTransient = failure.isTransient && failure.failure != .dnsResolution
        retryAfter = nil
    }

    /// An answer the probe cannot use, transient as `Rejection.isTransient` says.
    init(server url: String, _ rejection: Rejection) {
        if case let .status(code, retryAfter) = rejection {
            error = .server(url: url, message: "HTTP \(code)", status: code)
            self.retryAfter = retryAfter
        } else {
            error = .server(url: url, message: "\(rejection) in the probe")
            retryAfter = nil
        }
        isTransient = rejection.isTransient
    }

    /// A server that answered neither HEAD nor a ranged GET within `stallTimeout` each.
    static func unanswered(_ url: String, within stallTimeout: Double) -> ProbeFailure {
        ProbeFailure(
            .network(
                url: url,
                message: "the server did not answer (no response to HEAD or a ranged GET in "
                    + "\(Rejection.duration(stallTimeout)) each)", failure: .timeout))
    }

    var isNetwork: Bool { error.transportFailure != nil }
}

/// A count of TCP connections opened, safe to add to from any thread.
final class ConnectionCount: Sendable {
    private let count = Atomic<Int>(0)

    func add(_ opened: Int) {
        count.add(opened, ordering: .relaxed)
    }

    var total: Int { count.load(ordering: .relaxed) }
}

/// One probe request on its easy handle: the response head, and a body
/// refused beyond the one byte a `bytes=0-0` answer carries.
private final class ProbeExchange {
    let headers = HeaderCollector()
    /// True once the body was cut off on purpose.
    var stoppedBody = false
    private let easy: EasyHandle
    /// Kept alive while libcurl holds it (unretained) as the progress callback's data.
    private let stop: StopSignal?

    init(on easy: EasyHandle, stop: StopSignal?) throws(CurlError) {
        self.easy = easy
        self.stop = stop
        if let stop { try easy.abort(on: stop) }
        try headers.install(on: easy)
        try easy.set(CURLOPT_WRITEDATA, pointer: Unmanaged.passUnretained(self).toOpaque())
        try easy.set(CURLOPT_WRITEFUNCTION, callback: discardBody)
    }

    /// Runs the request to `url`, following redirects as `options` allow,
    /// on `loop` (`EasyHandle.perform(on:stop:)`).
    func perform(_ url: String, options: TransferOptions, on loop: TransferLoop?) async throws(CurlError) {
        try await easy.performFollowingRedirects(url, options: options, on: loop, stop: stop) {
            headers.reset()
            stoppedBody = false
        }
        withExtendedLifetime(self) {}
    }
}

private let discardBody: CurlDataCallback = { _, size, count, user in
    guard let user else { return 0 }
    let exchange = Unmanaged<ProbeExchange>.fromOpaque(user).takeUnretainedValue()
    if exchange.headers.head.status == 206 && size * count <= 1 { return size * count }
    exchange.stoppedBody = true
    return 0
}
