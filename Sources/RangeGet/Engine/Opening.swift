// Opening: the zero-round-trip start. The first request of a download is
// `GET Range: bytes=0-(K-1)` (K = the minimum split) on the multi handle the
// engine will drive, sent before anything is known. When its head is a
// usable 206 that head is the probe (size from Content-Range, validators,
// file name), and the transfer, held paused at its first body byte until the
// output file is open, becomes the first connection's first piece. A file of
// at most K bytes thus comes in one request instead of a HEAD and a GET. For
// a download from one URL, a 200 with the whole file (a server that ignores
// ranges) becomes the single plain stream just the same.
// Why K and not `bytes=0-`: every planned piece is at least K long (or the
// whole file), so the response never runs past its piece and no byte is
// fetched twice; an open range would push a socket buffer's worth (MBs on a
// fast link) beyond it. Anything else (416, an error status, a coded 206, no
// head in time) ends the request, and the classic probe (Prober) decides.
import CCurl

final class Opening {
    /// The multi handle the engine goes on with.
    let multi: MultiHandle
    /// The connection carrying the request; it becomes the engine's first.
    let connection: Connection
    private(set) var isRunning = false
    /// True once the head was usable: the engine may adopt the transfer.
    private(set) var isUsable = false
    /// The bytes a usable 206 sends; nil for a 200 with the whole file.
    private(set) var served: ByteRange?
    private let length: Int64

    /// Sends the request for the first `length` bytes of `url`.
    init(url: String, length: Int64, options: TransferOptions) throws(CurlError) {
        multi = try MultiHandle(multiplex: options.multiplex)
        connection = try Connection(id: 0, file: nil, options: options)
        try connection.open(url, range: ByteRange(0, length), now: MonotonicClock.now())
        self.length = length
        try multi.add(connection.easy)
        isRunning = true
    }

    deinit {
        end()
    }

    /// Drives the request until its head is in (or `timeout` seconds pass);
    /// the file it describes when the head is a 206 whose body can be
    /// written as it comes, or, when `wholeFile`, a 200 (ranges unsupported:
    /// the whole file as one plain stream). Otherwise the request is ended
    /// and nil returned.
    func probe(url: String, timeout: Double, wholeFile: Bool) -> RemoteFile? {
        let deadline = MonotonicClock.now() + timeout
        // A transfer that already ended (cut, refused) cannot be handed on.
        var ended = false
        while !Self.isFinal(connection.responseHead) {
            let left = deadline - MonotonicClock.now()
            guard left > 0, (try? multi.perform()) != nil else { break }
            if multi.nextFinished() != nil {
                ended = true
                break
            }
            if Self.isFinal(connection.responseHead) { break }
            guard (try? multi.poll(timeoutMilliseconds: max(1, min(100, Int(left * 1000))))) != nil else { break }
        }
        let head = connection.responseHead
        // A size past `RemoteFile.largestSize` is left to the classic probe, which refuses it.
        if wholeFile, !ended, Self.isFinal(head), head.status == 200, (head.contentLength ?? 0) <= RemoteFile.largestSize {
            isUsable = true
            return RemoteFile(url: url, effectiveURL: connection.easy.effectiveURL, head: head,
                              size: head.contentEncoding == nil ? head.contentLength : nil, acceptsRanges: false)
        }
        guard !ended, Self.isFinal(head), head.status == 206, head.contentEncoding == nil,
              head["content-type"]?.lowercased().contains("multipart/") != true,
              let value = head["content-range"], let contentRange = ContentRange(value),
              let served = contentRange.range, served.start == 0, served.end <= length,
              let total = contentRange.total, total <= RemoteFile.largestSize
        else {
            end()
            return nil
        }
        let remote = RemoteFile(url: url, effectiveURL: connection.easy.effectiveURL, head: head, size: total,
                                acceptsRanges: true)
        isUsable = true
        self.served = served
        return remote
    }

    /// True for a complete head that is not an interim answer (1xx) or a
    /// redirect libcurl is about to follow (3xx).
    private static func isFinal(_ head: ResponseHead) -> Bool {
        head.isComplete && !(100..<200).contains(head.status) && !(300..<400).contains(head.status)
    }

    /// TCP connections the request opened.
    var connectionsOpened: Int { connection.easy.connectionsOpened }

    /// Ends the request (its connection's handle leaves the multi handle).
    func end() {
        guard isRunning else { return }
        isRunning = false
        multi.remove(connection.easy)
    }

    /// Hands the running request to its new owner, the engine.
    func handOver() -> (MultiHandle, Connection) {
        precondition(isRunning)
        isRunning = false
        return (multi, connection)
    }
}
