// Connection: one connection of an engine and the transfer it runs (on a
// slot of its loop's connection limit).
// It owns a reused easy handle (so keep-alive connections are reused), the
// piece of the file it is fetching, and the write path: libcurl's buffer goes
// straight to pwrite at the right offset, after one check of the response.
import CCurl
import CCurlShim
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class Connection {
    let id: Int
    let easy: EasyHandle
    /// Where bytes go (the file, or a stream's window); nil only while an
    /// opening request waits for the probe's verdict.
    private var sink: (any ByteSink)?
    /// Where each write is recorded as soon as it is made (nil: no journal).
    private var journal: WriteJournal?
    private let baseHeaders: [String]
    private let rateLimit: RateLimit?
    /// True while the transfer waits for the rate limit's tokens, or for
    /// room in the sink (`waitsForRoom`: a stream's reader is behind).
    private(set) var isPaused = false
    private var waitsForRoom = false
    /// True while this connection carries the opening request: a transfer
    /// with no piece yet, held paused at its first body byte (or, for a whole
    /// small file, kept whole in `heldBody`).
    private(set) var isOpening = false
    /// The opening request's range, and the largest whole file whose body it
    /// keeps in memory instead of pausing (0: none).
    private var openingRange = ByteRange(0, 0)
    private var holdLimit: Int64 = 0
    /// Whether the opening's head was judged (`holdsBody`), and the body
    /// of a whole file it keeps, with the length its head gave.
    private var holdJudged = false
    private(set) var heldBody: [UInt8]?
    private var heldLength = 0
    /// The check of the opening's final head, as `holdsBody` made it (the
    /// opening's probe reads it rather than checking the head again).
    private(set) var openingCheck: Result<PartialContent, Rejection>?

    /// The work in flight; nil when idle.
    private(set) var piece: Piece?
    /// The mirror of the transfer in flight (or the last one).
    private(set) var mirror: Mirror?
    /// Shared with another connection fetching the same tail.
    private(set) var race: Race?
    /// The range the request asked for; nil for a plain GET from byte 0.
    private(set) var requested: ByteRange?
    /// Next byte of the response.
    private(set) var position: Int64 = 0
    /// Where to stop: the piece's end, lowered when another connection steals the rest.
    private(set) var end: Int64 = 0
    /// Bytes received by the current transfer.
    private(set) var transferBytes: Int64 = 0
    /// Bytes received over the connection's life.
    private(set) var totalBytes: Int64 = 0
    /// True once the connection carried a transfer.
    private(set) var wasUsed = false
    /// The rate of the last transfer that ran long enough to measure.
    private(set) var lastRate: Double?

    private var expected = Expectation(size: nil, etag: nil, lastModified: nil)
    private var lastProgress: Double = 0
    private var progressMark: Int64 = 0
    private var startedAt: Double = 0
    private var firstByteAt: Double?
    private var recent = RateMeter(window: 1)
    private let responseHeaders = HeaderCollector()
    private var accepted = false
    /// False for an adopted opening request: its time to first byte says nothing about a new request's.
    private var measuresSetup = true
    private var rejection: Rejection?
    private var writeFailure: IOError?
    private var reachedEnd = false
    /// The loop client whose transfers this connection runs: the engine, or
    /// the opening request waiting for its head; nil between the two.
    weak var client: LoopClient?
    /// How a transfer ended while no client owned the connection (an opening
    /// request cut before its engine took it over); the engine settles it.
    private(set) var unownedEnd: CURLcode?

    init(id: Int, sink: (any ByteSink)?, options: TransferOptions) throws(CurlError) {
        self.id = id
        self.sink = sink
        baseHeaders = options.headerLines
        rateLimit = options.rateLimit
        easy = try EasyHandle()
        try easy.configure(url: "http://127.0.0.1/", options: options)
        let me = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_PRIVATE, pointer: me)
        try easy.set(CURLOPT_WRITEDATA, pointer: me)
        try easy.set(CURLOPT_WRITEFUNCTION, callback: connectionWrite)
        try responseHeaders.install(on: easy)
    }

    /// Gives the connection the sink its bytes go to and the journal its
    /// writes are recorded in (slot `id`).
    func attach(_ sink: any ByteSink, journal: WriteJournal?) {
        self.sink = sink
        self.journal = journal
    }

    /// The response head of the transfer in flight (or the last one).
    var responseHead: ResponseHead { responseHeaders.head }

    /// Prepares the opening request for `range` of `url` with the user's
    /// headers. Its head is the probe; its body waits (paused) until `adopt`
    /// names the piece it belongs to, unless the head is a 206 with a whole
    /// file of at most `holdLimit` bytes: that body is kept in `heldBody`.
    func open(_ url: String, range: ByteRange, holdLimit: Int64, now: Double) throws(CurlError) {
        isOpening = true
        openingRange = range
        self.holdLimit = holdLimit
        (holdJudged, heldBody, heldLength, openingCheck) = (false, nil, 0, nil)
        responseHeaders.reset()
        startedAt = now
        lastProgress = now
        try easy.setTarget(url)
        try easy.setRange(range)
        try easy.setHeaders(baseHeaders)
        easy.clearError()
    }

    /// Makes the opening request, not sent yet, ask for `range` instead.
    func widenOpening(to range: ByteRange) throws(CurlError) {
        precondition(isOpening && range.start == openingRange.start)
        openingRange = range
        try easy.setRange(range)
    }

    /// Makes the opening transfer, which the server answers with `served`
    /// (nil: a 200 with the whole file), fetch `piece` (from byte 0) for
    /// `mirror`, and lets its body flow.
    func adopt(_ piece: Piece, from mirror: Mirror, served: ByteRange?, now: Double) {
        precondition(isOpening && sink != nil && piece.range.start == 0 && piece.range.end <= served?.end ?? .max)
        isOpening = false
        begin(piece, from: mirror, requested: served, race: nil, now: now)
        // Its request went out before the probe's local work (other mirrors'
        // probes, the lock, fallocate): no measure of a request's setup time.
        measuresSetup = false
        // The body held back since the head arrived flows again (libcurl may
        // call the write callback from inside this call).
        curl_easy_pause(easy.raw, CURLPAUSE_CONT)
    }

    /// True when the opening request keeps its body in memory: its head, once
    /// in, is a usable 206 (the checks of `ResponseCheck.partialContent`)
    /// with the whole file, of at most the hold limit. Judged once, on the
    /// loop's thread: at the first body byte or when the head is seen in.
    func holdsBody() -> Bool {
        if holdJudged || holdLimit == 0 || !responseHeaders.head.isFinal { return heldBody != nil }
        holdJudged = true
        let check = ResponseCheck.partialContent(responseHeaders.head, answering: .prefix(of: openingRange),
                                                 expected: .unknown)
        openingCheck = check
        guard case let .success(answer) = check, answer.served == ByteRange(0, answer.total),
              answer.total <= holdLimit else { return false }
        heldLength = Int(answer.total)
        heldBody = []
        heldBody?.reserveCapacity(heldLength)
        return true
    }

    /// Decides, if it is not decided yet, that the body is not kept (the
    /// opening's waiter has resumed without it). Loop thread.
    func settleHold() {
        holdJudged = true
    }

    /// Frees the body an opening kept, once it is written (the connection
    /// may wait idle for the next opening: `TransferLoop.recycle`).
    func releaseHeldBody() {
        heldBody = nil
    }

    /// True when the held body has every byte its head announced.
    var holdsWholeBody: Bool { heldBody?.count == heldLength }

    /// Notes that the transfer ended with `result` while no client owned it.
    func endedUnowned(_ result: CURLcode) {
        unownedEnd = result
    }

    /// Takes the result noted by `endedUnowned`, if any.
    func takeUnownedEnd() -> CURLcode? {
        defer { unownedEnd = nil }
        return unownedEnd
    }

    /// The connection that owns `easy`, from its `CURLOPT_PRIVATE` pointer
    /// (no search through the connections).
    static func owning(_ easy: UnsafeMutableRawPointer) -> Connection? {
        var owner: UnsafeMutableRawPointer?
        guard rg_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &owner) == CURLE_OK, let owner else { return nil }
        return Unmanaged<Connection>.fromOpaque(owner).takeUnretainedValue()
    }

    /// True while a transfer is running.
    var isBusy: Bool { piece != nil }

    /// Bytes of the current piece not yet received.
    var remaining: ByteRange? {
        guard piece != nil, position < end else { return nil }
        return ByteRange(position, end)
    }

    /// The bytes of the current piece written so far.
    var writtenSoFar: ByteRange? {
        // In a race, bytes this side skipped were written by the other side first.
        piece.map { ByteRange($0.range.start, position) }
    }

    /// Prepares the handle to fetch `piece` from `mirror` (ranged unless `plain`).
    func start(_ piece: Piece, from mirror: Mirror, plain: Bool, race: Race? = nil, now: Double) throws(CurlError) {
        begin(piece, from: mirror, requested: plain ? nil : piece.range, race: race, now: now)
        responseHeaders.reset()
        var headers = mirror.remote.headers(from: baseHeaders)
        try easy.setTarget(mirror.remote.effectiveURL)
        try easy.setRange(requested)
        if requested != nil, let ifRange = mirror.remote.ifRange { headers.append("If-Range: \(ifRange)") }
        try easy.setHeaders(headers)
        easy.clearError()
    }

    /// The bookkeeping of a transfer that starts fetching `piece`.
    private func begin(_ piece: Piece, from mirror: Mirror, requested: ByteRange?, race: Race?, now: Double) {
        self.piece = piece
        self.mirror = mirror
        self.race = race
        expected = mirror.expectation
        self.requested = requested
        position = piece.range.start
        end = piece.range.end
        journal?.begin(slot: id, at: position)
        transferBytes = 0
        progressMark = position
        lastProgress = now
        startedAt = now
        firstByteAt = nil
        recent = RateMeter(window: 1)
        recent.add(bytes: 0, at: now)
        accepted = false
        measuresSetup = true
        rejection = nil
        writeFailure = nil
        reachedEnd = false
        isPaused = false
        waitsForRoom = false
        wasUsed = true
        mirror.activeConnections += 1
    }

    /// Lowers where this transfer stops; the bytes from `newEnd` on were handed to another connection.
    func stop(at newEnd: Int64) {
        precondition(newEnd >= position && newEnd <= end)
        end = newEnd
        piece?.range.end = newEnd
    }

    /// Resumes a paused transfer once the rate limit has tokens again, or
    /// the sink room.
    func resumeIfAllowed() {
        guard isPaused else { return }
        if waitsForRoom {
            guard sink?.hasRoom(at: position) == true else { return }
        } else {
            guard rateLimit?.hasTokens == true else { return }
        }
        isPaused = false
        waitsForRoom = false
        curl_easy_pause(easy.raw, CURLPAUSE_CONT)
    }

    /// Joins a race for the rest of the current piece.
    func join(_ race: Race) {
        self.race = race
    }

    /// Notes progress (for stall detection and rates): seconds since the last
    /// byte, and the time to first byte when this sample saw the first byte.
    func sample(now: Double) -> (idle: Double, timeToFirstByte: Double?) {
        var timeToFirstByte: Double?
        if position != progressMark {
            progressMark = position
            lastProgress = now
            if firstByteAt == nil {
                // libcurl's own clock, read as the head arrived: `now` is
                // the end of a loop turn, which is long when every
                // connection's first burst came in it (8 of 2 MiB, nginx's
                // default pacing, made a loopback server look 10 ms away).
                // When first byte and end share a turn, `now` would also
                // make the transfer's rate (lastRate) its bytes / 0.01 s.
                let measured = measuresSetup ? easy.timeToFirstByte : 0
                firstByteAt = measured > 0 ? min(now, startedAt + measured) : now
                if measuresSetup { timeToFirstByte = measured > 0 ? measured : now - startedAt }
            }
        }
        if now - recent.newest >= 0.05 { recent.add(bytes: transferBytes, at: now) }
        return (now - lastProgress, timeToFirstByte)
    }

    /// Bytes per second of the current transfer over the last second, nil
    /// until data flowed for a tenth of a second (0 when it went silent).
    func rate(now: Double) -> Double? {
        guard let firstByteAt, now - firstByteAt >= 0.1, recent.span >= 0.1 else { return nil }
        return recent.rate
    }

    /// True once the current transfer's first byte arrived.
    var hasDelivered: Bool { firstByteAt != nil }

    /// Seconds since the transfer's last byte (or its request, before one).
    func silence(now: Double) -> Double {
        now - lastProgress
    }

    /// Decides how the transfer ended and returns the connection to idle.
    func finish(result: CURLcode, now: Double) -> FinishedTransfer {
        if transferBytes > 0 {
            lastRate = Double(transferBytes) / max(0.01, now - (firstByteAt ?? startedAt))
        }
        if let writeFailure { return release(.localFailure(writeFailure), now: now) }
        if reachedEnd || (result == CURLE_OK && position == end) { return release(.complete, now: now) }
        if let rejection {
            return release(.incomplete(reason: rejection.description, cause: RetryCause(rejection), rejection: rejection),
                           now: now)
        }
        if result == CURLE_OK {
            if end == Int64.max { return release(.complete, now: now) }
            if !accepted, let check = ResponseCheck.check(responseHeaders.head, requested: requested, expected: expected) {
                return release(.incomplete(reason: check.description, cause: RetryCause(check), rejection: check), now: now)
            }
            return release(.incomplete(reason: "short body: got \(transferBytes) bytes", cause: .cut, rejection: nil),
                           now: now)
        }
        let error = easy.error(result)
        return release(.incomplete(reason: error.message, cause: RetryCause(error, delivered: hasDelivered), rejection: nil),
                       curlError: error, now: now)
    }

    /// Abandons the transfer (stall, lost race, shutdown); the caller removes
    /// the handle. `cause`: a stall, or by default rangeget's own cut.
    /// `distrustingFrom`: its bytes from there on do not count.
    func abandon(reason: String, cause: RetryCause = .cut, error: CurlError? = nil, distrustingFrom offset: Int64? = nil,
                 now: Double) -> FinishedTransfer {
        if let offset { disown(from: offset) }
        return release(.incomplete(reason: reason, cause: cause, rejection: nil), curlError: error, now: now)
    }

    /// Takes back the bytes of the transfer in flight from `offset` on: they
    /// do not count. Its journal slot gives them up first, in one store, so
    /// a kill at any moment finds them listed nowhere, and the range the
    /// transfer ends with (logged) stops at `offset`.
    private func disown(from offset: Int64) {
        guard let piece, offset < position else { return }
        position = max(piece.range.start, offset)
        journal?.advance(slot: id, to: position)
    }

    private func release(_ end: TransferEnd, curlError: CurlError? = nil, now: Double) -> FinishedTransfer {
        guard let piece, let mirror else { preconditionFailure("no transfer to finish") }
        let finished = FinishedTransfer(piece: piece, end: end, written: writtenSoFar!, mirror: mirror, race: race,
                                        curlError: curlError)
        journal?.end(slot: id, wrote: finished.written)
        totalBytes += transferBytes
        mirror.bytes += transferBytes
        mirror.tcpConnections += easy.connectionsOpened
        if let version = easy.httpVersion { mirror.httpVersion = version }
        mirror.busySeconds += now - startedAt
        mirror.activeConnections -= 1
        self.piece = nil
        self.race = nil
        // An idle connection waits for no reader (else the loop polled every 10 ms for it).
        isPaused = false
        waitsForRoom = false
        return finished
    }

    // MARK: - libcurl callbacks (engine thread, inside curl_multi_perform)

    fileprivate func receiveBody(_ data: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        if isOpening {
            if holdsBody() {
                // Checked again by the probe, and written only once whole. More
                // than the head announced contradicts it: the request ends.
                guard heldLength - heldBody!.count >= count else { return 0 }
                heldBody!.append(contentsOf: UnsafeRawBufferPointer(start: data, count: count))
                return count
            }
            // The probe's verdict is pending: hold the body of a 206 (or of a
            // 200, the whole file as one stream), refuse anything else.
            let status = responseHeaders.head.status
            return status == 206 || status == 200 ? Int(CURL_WRITEFUNC_PAUSE) : 0
        }
        // Refused once, refused for good. libcurl 7.88 does not end a
        // transfer whose buffered bytes the callback refused as it resumed
        // (`adopt`, `resumeIfAllowed`: curl_easy_pause's error is the
        // transfer's only word of it): it reads on and calls again, and the
        // bytes taken back (`disown`) must not be written over.
        guard let sink, rejection == nil, writeFailure == nil, !reachedEnd else { return 0 }
        if !accepted {
            if let problem = ResponseCheck.check(responseHeaders.head, requested: requested, expected: expected) {
                rejection = problem
                return 0
            }
            accepted = true
        }
        if let rateLimit, !rateLimit.take(count) {
            isPaused = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        let room = end - position
        let length = Int64(count) <= room ? count : Int(room)
        if length > 0 {
            // In a race, bytes below the frontier are already written by the other side.
            let skip = race.map { Int(min(Int64(length), max(0, $0.frontier - position))) } ?? 0
            if skip < length {
                do {
                    guard try sink.accept(data + skip, count: length - skip, at: position + Int64(skip)) else {
                        // The sink is full (a stream whose reader is behind): libcurl offers the same bytes again.
                        isPaused = true
                        waitsForRoom = true
                        return Int(CURL_WRITEFUNC_PAUSE)
                    }
                } catch {
                    writeFailure = error
                    return 0
                }
            }
            position += Int64(length)
            journal?.advance(slot: id, to: position)
            transferBytes += Int64(length)
            if let race, position > race.frontier { race.frontier = position }
        }
        if position == end, end < (requested?.end ?? expected.size ?? Int64.max) {
            reachedEnd = true
            return 0
        }
        if length < count {
            if let requested, let piece {
                // A 206 whose body runs past its own Content-Range contradicts
                // itself: none of its bytes count, and the piece is fetched
                // again. The file did not change for it.
                rejection = .overlong(requested)
                disown(from: piece.range.start)
            } else {
                rejection = .changed("the server sent more than \(expected.size ?? 0) bytes")
            }
            return 0
        }
        return count
    }
}

private let connectionWrite: CurlDataCallback = { data, size, count, user in
    guard let data, let user else { return 0 }
    return Unmanaged<Connection>.fromOpaque(user).takeUnretainedValue().receiveBody(data, count: size * count)
}
