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
// fast link) beyond it. The exception is a file of a list from a distant
// server (`distantFirstByte`) whose other files will take every free slot:
// no second connection could join it, so its opening asks for all of it and
// saves the second request's wait. Anything else (416, an error status, a
// coded 206, no head in time) ends the request, and the classic probe
// (Prober) decides.
import CCurl

final class Opening: LoopClient {
    /// The loop the engine goes on with.
    let loop: TransferLoop
    /// The connection carrying the request; it becomes the engine's first.
    let connection: Connection
    /// What another thread may use to end the wait (a pause or cancel): the
    /// request ends as one whose head did not come, and the waiter resumes.
    let stop: StopSignal
    /// True while the request's handle is in the loop's multi handle.
    private(set) var isRunning = false
    /// True once the head was usable: the engine may adopt the transfer.
    private(set) var isUsable = false
    /// The bytes a usable 206 sends; nil for a 200 with the whole file.
    private(set) var served: ByteRange?
    /// The bytes asked for from byte 0, and (`init`'s `whole`) how many to
    /// ask for instead when the question says so as the request is sent.
    private var length: Int64
    private let whole: (length: Int64, when: @Sendable (_ freeSlots: Int) -> Bool)?
    /// While waiting for the head: how long to wait once sent, when to give
    /// up, and whether the transfer ended.
    private var timeout = 0.0
    private var deadline = Double.infinity
    private var ended = false
    /// True while the request holds a slot of the loop's connection limit
    /// (from its sending until the engine takes it over, or it ends).
    private var holdsSlot = false
    /// True once the head showed a body to keep in memory (judged on the
    /// loop's thread before the request's waiter resumes), and once the
    /// transfer ended with all of it.
    private var holding = false
    private var completed = false
    /// When the request was sent, and then the seconds its held transfer took.
    private var sentAt = 0.0
    private(set) var heldSeconds = 0.0
    /// The head, and the TCP connections the request opened, as they were
    /// when its waiter resumed: taken on the loop's thread, which may still
    /// run the transfer (paused, or until `cancel` reaches it).
    private var head = ResponseHead(status: 0, fields: [:], isComplete: false)
    private var openingCheck: Result<PartialContent, Rejection>?
    private var effectiveURL: String?
    private(set) var connectionsOpened = 0
    /// Body bytes held at the last look, to push the deadline while they come.
    private var heldSeen = 0
    /// True once the head's delay went into the loop's first-byte delays,
    /// under the server the request went to (`TransferLoop.server(of:)`).
    private var headTimed = false
    private let server: String

    /// The wait for a first byte from which an opening asks for the whole
    /// file when `init`'s `whole` says no other connection could join it:
    /// the second request it saves costs that wait. Below it (a server on
    /// the same network, a few milliseconds) a request costs next to
    /// nothing, and one that paces each response (nginx's limit_rate sends
    /// a response's first chunk at once) is faster asked twice: 100 files
    /// of 2 MiB from nginx at 20 MiB/s per connection took 0.702 s in one
    /// request each against 0.610 in two (medians of 5, loopback). With
    /// 100 ms before every response, 32 of them took 0.988 s asked whole
    /// from the first, 1.04 with this rule (a server's first openings go
    /// out before its wait is known) and 1.11 in two requests each.
    static let distantFirstByte = 0.01

    /// The largest whole file an opening request keeps in memory instead of
    /// pausing: a few of them at once cost little memory (`--jobs` at most).
    static let holdLimit: Int64 = 128 << 10

    /// Prepares the request for the first `length` bytes of `url` on `loop`,
    /// keeping a whole small file in memory when `holding` (a download to a
    /// file without a rate limit, whose bytes would bypass it); `probe` sends
    /// it, for `whole.length` bytes instead when `whole.when` answers true
    /// on the loop's thread, given the slots left free once it has its own
    /// (`DownloadOptions.filesTakeFreeSlots`).
    init(
        url: String, length: Int64, options: TransferOptions, holding: Bool, loop: TransferLoop,
        stop: StopSignal? = nil,
        whole: (length: Int64, when: @Sendable (_ freeSlots: Int) -> Bool)? = nil
    ) throws(CurlError) {
        self.loop = loop
        self.stop = stop ?? StopSignal(loop: loop)
        if let spare = loop.spareConnection() {
            connection = spare
        } else {
            connection = try Connection(id: 0, sink: nil, options: options)
        }
        let holdLimit = holding && options.rateLimit == nil ? Self.holdLimit : 0
        try connection.open(url, range: ByteRange(0, length), holdLimit: holdLimit)
        self.length = length
        self.whole = whole
        server = TransferLoop.server(of: url)
    }

    deinit {
        cancel()
    }

    /// Sends the request and waits until its head is in (a body kept in
    /// memory: until its end), or `timeout` seconds pass without it; the file it describes when the head is a 206 whose
    /// body can be written as it comes, or, when `wholeFile`, a 200 (ranges
    /// unsupported: the whole file as one plain stream). Otherwise the
    /// request is ended and nil returned.
    func probe(url: String, timeout: Double, wholeFile: Bool) async -> RemoteFile? {
        self.timeout = timeout
        await loop.serve(self)
        // A held body cut short by the deadline cannot be handed on either.
        guard !ended, head.isFinal, completed || !holding else {
            cancel()
            return nil
        }
        let remote: RemoteFile
        // Checked once already where the body was judged (on the loop's thread, of this same head).
        let check =
            openingCheck
            ?? ResponseCheck.partialContent(
                head, answering: .prefix(of: ByteRange(0, length)),
                expected: .unknown)
        switch check {
        case let .success(answer):
            remote = RemoteFile(
                url: url, effectiveURL: effectiveURL, head: head, size: answer.total,
                acceptsRanges: true)
            served = answer.served
            if completed, connection.heldBody?.count != Int(answer.served.count) {
                return nil
            }
        // Ranges unsupported, and one URL: the whole file as one plain stream. A
        // size past `RemoteFile.largestSize` is left to the classic probe, which refuses it.
        case .failure(.rangeIgnored) where wholeFile && (head.contentLength ?? 0) <= RemoteFile.largestSize:
            remote = RemoteFile(
                url: url, effectiveURL: effectiveURL, head: head,
                size: head.contentEncoding == nil ? head.contentLength : nil, acceptsRanges: false)
        case .failure:
            cancel()
            return nil
        }
        isUsable = true
        return remote
    }

    /// True when no response head at all had come when `probe` gave up on it
    /// (a server that accepts and says nothing, or one not reached).
    var gotNoAnswer: Bool { head.status == 0 }

    /// The whole file, when the request kept it in memory (`holdLimit`) and
    /// its transfer ended with every byte its usable head announced.
    var heldBody: [UInt8]? { isUsable && completed ? connection.heldBody : nil }

    /// True when the transfer ended with the whole file in memory: nothing to hand over.
    var isHeld: Bool { completed }

    /// Ends the request (its connection's handle leaves the multi handle, on the loop's thread).
    func cancel() {
        guard isRunning || holdsSlot else { return }
        let (running, slot) = (isRunning, holdsSlot)
        (isRunning, holdsSlot) = (false, false)
        let request = UncheckedBox((loop, connection))
        loop.execute {
            let (loop, connection) = request.value
            loop.assertOnLoopThread()
            if running { loop.remove(connection.easy) }
            if slot { loop.giveSlots(1) }
        }
    }

    /// Hands the running request, and its slot, to its new owner, the engine (on the loop's thread).
    func handOver() -> Connection {
        precondition(isUsable && !completed)
        isRunning = false
        holdsSlot = false
        return connection
    }

    // MARK: - LoopClient: waiting for a slot, then for the head

    func waitsForFirstConnection(now: Double) -> Bool { !holdsSlot && !ended && !completed }

    func begin(now: Double) {
        loop.assertOnLoopThread()
        _ = send(now: now)
    }

    /// Sends the request once the loop has a slot for it; false while it waits.
    private func send(now: Double) -> Bool {
        guard loop.takeSlot(first: true) else { return false }
        holdsSlot = true
        (sentAt, deadline) = (now, now + timeout)
        do {
            // (asked first: the question also tells the list this file's first request is out)
            if let whole, whole.when(loop.freeSlots ?? 0), whole.length > length,
                let delay = loop.firstByteDelay(from: server), delay >= Self.distantFirstByte
            {
                length = whole.length
                try connection.widenOpening(to: ByteRange(0, length))
            }
            try loop.add(connection.easy)
            isRunning = true
            connection.client = self
        } catch {
            ended = true
        }
        return true
    }

    func beforeTransfers(now: Double) -> Bool {
        loop.assertOnLoopThread()
        if stop.isRequested, !completed { ended = true }
        if !holdsSlot, !ended, !completed, !send(now: now) { return false }
        return waited(now: now)
    }

    func transferFinished(_ connection: Connection, result: CURLcode, now: Double) -> Bool {
        loop.assertOnLoopThread()
        isRunning = false
        if connection.responseHead.isFinal { timeHead(now: now) }
        if result == CURLE_OK, connection.holdsWholeBody {
            // The whole file is in memory: the slot is free for the next request now.
            completed = true
            heldSeconds = now - sentAt
            holdsSlot = false
            loop.giveSlots(1)
        } else {
            // A transfer that already ended (cut, refused) cannot be handed on.
            ended = true
        }
        return true
    }

    func afterTransfers(now: Double) -> Bool { waited(now: now) }

    func pollTimeout(now: Double) -> Double { holdsSlot ? max(0.001, min(0.1, deadline - now)) : 0.1 }

    func loopFailed(_ error: CurlError) {
        loop.assertOnLoopThread()
        ended = true
    }

    func end() {
        loop.assertOnLoopThread()
        connection.client = nil
        // A head that comes from now on finds the body's fate decided: paused, not kept.
        connection.settleHold()
        head = connection.responseHead
        openingCheck = connection.openingCheck
        effectiveURL = connection.easy.effectiveURL
        connectionsOpened = connection.easy.connectionsOpened
    }

    /// Counts the wait for the head in the loop's first-byte delays, once:
    /// libcurl's own clock, read as the head arrived (the loop's `now` is
    /// the end of a turn, late when other transfers' bursts came in it).
    private func timeHead(now: Double) {
        guard !headTimed else { return }
        headTimed = true
        let measured = connection.easy.timeToFirstByte
        loop.noteFirstByte(after: measured > 0 ? measured : now - sentAt, from: server)
    }

    private func waited(now: Double) -> Bool {
        if stop.isRequested, !completed { ended = true }
        if ended || completed { return true }
        let final = connection.responseHead.isFinal
        if final { timeHead(now: now) }
        if final, connection.holdsBody() {
            // A body kept in memory is waited for while its bytes come.
            holding = true
            let held = connection.heldBody?.count ?? 0
            if held > heldSeen { (heldSeen, deadline) = (held, now + timeout) }
            return now >= deadline
        }
        if final { return true }
        // No head in time: whatever comes later is not this request's to use.
        if now >= deadline { ended = true }
        return ended
    }
}

/// Carries a value the compiler cannot prove thread-safe to the loop's
/// thread, where alone it is used.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
