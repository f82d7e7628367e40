// Prober: learns a remote file's size, validators and range support before
// any byte is written. HEAD first; when HEAD is refused, hangs, gives no
// length or says `Accept-Ranges: none`, `GET Range: bytes=0-0` decides, with
// the total from Content-Range; a 200 to that, or a ranged GET that never
// answers, means one plain stream.
import CCurl
import Synchronization

struct Prober {
    let options: TransferOptions
    /// TCP connections the probes opened, from every thread probing with this prober.
    let connectionsOpened = ConnectionCount()

    /// Probes `url`, following redirects; `skipHead` goes straight to the
    /// ranged GET (after a HEAD was caught lying about the size).
    func probe(_ url: String, skipHead: Bool = false) throws(DownloadError) -> RemoteFile {
        let remote = try find(url, skipHead: skipHead)
        if let size = remote.size, size > RemoteFile.largestSize {
            throw .server(url: url, message: "the server claims a size of \(size) bytes, more than any disk holds")
        }
        return remote
    }

    private func find(_ url: String, skipHead: Bool) throws(DownloadError) -> RemoteFile {
        let headed = skipHead ? nil : try? head(url)
        // An absurd length from HEAD is no length: the ranged GET decides.
        if let headed, headed.acceptsRanges, let size = headed.size, size > 0, size <= RemoteFile.largestSize {
            return headed
        }
        do {
            return try rangedGet(url)
        } catch .network where headed != nil {
            // HEAD answered but a ranged GET does not: one plain stream.
            var plain = headed!
            plain.acceptsRanges = false
            return plain
        }
    }

    /// HEAD; nil-free only when the server answered 2xx.
    private func head(_ url: String) throws -> RemoteFile {
        let easy = try EasyHandle()
        try easy.configure(url: url, options: options)
        try easy.setHeaders(options.headers)
        try easy.set(CURLOPT_NOBODY, true)
        // A HEAD that hangs must not hold up the download: the GET probe follows.
        try easy.set(CURLOPT_TIMEOUT_MS, Int((options.connectTimeout + options.stallTimeout) * 1000))
        var collector = HeadCollector()
        defer { connectionsOpened.add(easy.connectionsOpened) }
        try withCollector(&collector, on: easy) { collector in
            try easy.performFollowingRedirects(url, options: options) { collector.pointee = HeadCollector() }
        }
        let head = collector.head
        guard (200..<300).contains(head.status) else {
            throw DownloadError.server(url: url, message: "HEAD answered \(head.status)", status: head.status)
        }
        return RemoteFile(url: url, effectiveURL: easy.effectiveURL, head: head, size: head.contentLength,
                          acceptsRanges: head["accept-ranges"]?.lowercased() != "none")
    }

    /// `GET Range: bytes=0-0`, reading only the response head.
    private func rangedGet(_ url: String) throws(DownloadError) -> RemoteFile {
        var collector = HeadCollector()
        let easy: EasyHandle
        var failure: CurlError?
        do {
            easy = try EasyHandle()
            try easy.configure(url: url, options: options)
            try easy.setHeaders(options.headers)
            try easy.set(CURLOPT_RANGE, "0-0")
            try easy.set(CURLOPT_LOW_SPEED_LIMIT, 1)
            try easy.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(options.stallTimeout.rounded(.up))))
            do {
                try withCollector(&collector, on: easy) { collector in
                    try easy.performFollowingRedirects(url, options: options) { collector.pointee = HeadCollector() }
                }
            } catch let error as CurlError {
                failure = error
            }
            connectionsOpened.add(easy.connectionsOpened)
        } catch {
            throw .network(url: url, message: "\(error)", failure: (error as? CurlError)?.failure ?? .other)
        }
        let head = collector.head
        // The collector stops the body on purpose once the head is in; a body
        // that stalls after a complete head does not matter either: the head
        // is all a probe needs.
        let redirected = (300..<400).contains(head.status) || failure?.code == Int(CURLE_TOO_MANY_REDIRECTS.rawValue)
        if let failure, !collector.stoppedBody, !head.isComplete || redirected {
            // A ranged GET that never answers while the server is reachable:
            // a plain stream is the last thing left to try.
            if failure.code == Int(CURLE_OPERATION_TIMEDOUT.rawValue), head.status == 0 {
                return RemoteFile(url: url, effectiveURL: url, size: nil, etag: nil, lastModified: nil,
                                  acceptsRanges: false, contentDisposition: nil)
            }
            throw .network(url: url, message: failure.message, failure: failure.failure)
        }
        var remote = RemoteFile(url: url, effectiveURL: easy.effectiveURL, head: head, size: nil, acceptsRanges: false)
        switch head.status {
        case 206:
            guard let value = head["content-range"], let contentRange = ContentRange(value),
                  contentRange.range == ByteRange(0, 1), let total = contentRange.total else {
                throw .server(url: url, message: "unexpected Content-Range \(head["content-range"] ?? "(none)") in the probe")
            }
            remote.size = total
            remote.acceptsRanges = head.contentEncoding == nil
        case 416:
            guard let value = head["content-range"], let total = ContentRange(value)?.total else {
                throw .server(url: url, message: "416 without a usable Content-Range")
            }
            remote.size = total
            remote.acceptsRanges = true
        case 200:
            remote.size = head.contentEncoding == nil ? head.contentLength : nil
        default:
            throw .server(url: url, message: "HTTP \(head.status)", status: head.status)
        }
        return remote
    }

    private func withCollector(
        _ collector: inout HeadCollector, on easy: EasyHandle, _ body: (UnsafeMutablePointer<HeadCollector>) throws -> Void
    ) throws {
        try withUnsafeMutablePointer(to: &collector) { pointer in
            try easy.set(CURLOPT_HEADERDATA, pointer: pointer)
            try easy.set(CURLOPT_WRITEDATA, pointer: pointer)
            try easy.set(CURLOPT_HEADERFUNCTION, callback: collectHeader)
            try easy.set(CURLOPT_WRITEFUNCTION, callback: discardBody)
            defer {
                _ = try? easy.set(CURLOPT_HEADERDATA, pointer: nil)
                _ = try? easy.set(CURLOPT_WRITEDATA, pointer: nil)
            }
            try body(pointer)
        }
    }
}

/// A count of TCP connections opened, safe to add to from any thread.
final class ConnectionCount: Sendable {
    private let count = Atomic<Int>(0)

    func add(_ opened: Int) {
        count.add(opened, ordering: .relaxed)
    }

    var total: Int { count.load(ordering: .relaxed) }
}

/// Collects a probe's response head and refuses bodies beyond one byte.
private struct HeadCollector {
    var head = ResponseHead()
    var stoppedBody = false
}

private let collectHeader: CurlDataCallback = { data, size, count, user in
    guard let data, let user else { return 0 }
    let collector = user.assumingMemoryBound(to: HeadCollector.self)
    collector.pointee.head.consume(String(decoding: UnsafeRawBufferPointer(start: data, count: size * count), as: UTF8.self))
    return size * count
}

private let discardBody: CurlDataCallback = { _, size, count, user in
    guard let user else { return 0 }
    let collector = user.assumingMemoryBound(to: HeadCollector.self)
    if collector.pointee.head.status == 206 && size * count <= 1 { return size * count }
    collector.pointee.stoppedBody = true
    return 0
}
