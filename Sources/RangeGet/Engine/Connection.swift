// Connection: one connection of an engine and the transfer it runs (on a
// slot of its loop's connection limit).
// It owns a reused easy handle (so keep-alive connections are reused) and,
// as libcurl's multi.c keeps one state per handle, one `State`: idle, the
// opening request (Connection+Opening.swift), or a piece of the file being
// fetched, whose bytes the write path (Connection+Write.swift) sends straight
// to pwrite at the right offset, after one check of the response.
import CCurl
import CCurlShim

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class Connection {
    /// The phases of a connection. Only the methods under "Transitions"
    /// below change it; each phase's data is an object updated in place.
    /// What the write callback advances on every call is `cursor`, outside.
    enum State {
        /// No transfer: a new connection, one whose transfer was settled, or
        /// one whose opening kept a whole file that is written now.
        case idle
        /// Carrying the opening request: a transfer with no piece yet, held
        /// paused at its first body byte until the engine adopts it.
        case opening(OpeningRequest)
        /// An opening request keeping the body of a whole small file in memory.
        case keepingBody(HeldBody)
        /// An opening request whose transfer ended with this result while no
        /// client owned it (cut before its engine took it over): the engine
        /// settles it as it adopts the connection.
        case endedUnowned(CURLcode)
        /// Fetching a piece.
        case transferring(PieceTransfer)
    }

    let id: Int
    let easy: EasyHandle
    /// Where the connection is in its life.
    private(set) var state = State.idle
    /// Where the bytes of the transfer in flight are: the write callback's
    /// side of `transferring`, which `begin` sets anew (Connection+Write.swift).
    /// Written there and by the methods on the transfer in flight below.
    var cursor = Cursor()
    /// Where bytes go (the file, or a stream's window); nil only while an
    /// opening request waits for the probe's verdict.
    private(set) var sink: (any ByteSink)?
    /// Where each write is recorded as soon as it is made (nil: no journal).
    private(set) var journal: WriteJournal?
    /// Hashes the pieces this connection writes whole, as it writes them
    /// (nil: the download has no piece hashes).
    private(set) var pieceStream: PieceCheck.Stream?
    private let baseHeaders: [String]
    let rateLimit: RateLimit?
    /// Bytes received over the connection's life.
    private(set) var totalBytes: Int64 = 0
    /// True once the connection carried a transfer.
    private(set) var wasUsed = false
    /// The rate of the last transfer that ran long enough to measure.
    private(set) var lastRate: Double?
    private let responseHeaders = HeaderCollector()
    /// The loop client whose transfers this connection runs: the engine, or
    /// the opening request waiting for its head; nil between the two.
    weak var client: LoopClient?

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

    /// Gives the connection the sink its bytes go to, the journal its
    /// writes are recorded in (slot `id`) and the check of their pieces.
    func attach(_ sink: any ByteSink, journal: WriteJournal?, pieces: PieceCheck?) {
        self.sink = sink
        self.journal = journal
        pieceStream = pieces.map { PieceCheck.Stream(check: $0) }
    }

    /// The response head of the transfer in flight (or the last one).
    var responseHead: ResponseHead { responseHeaders.head }

    /// The connection that owns `easy`, from its `CURLOPT_PRIVATE` pointer
    /// (no search through the connections).
    static func owning(_ easy: UnsafeMutableRawPointer) -> Connection? {
        var owner: UnsafeMutableRawPointer?
        guard rg_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &owner) == CURLE_OK, let owner else { return nil }
        return Unmanaged<Connection>.fromOpaque(owner).takeUnretainedValue()
    }

    // MARK: - Transitions: every change of `state`

    /// idle → opening: prepares the opening request for `range` of `url`
    /// with the user's headers. Its head is the probe; its body waits
    /// (paused) until `adopt` names the piece it belongs to, unless the head
    /// is a 206 with a whole file of at most `holdLimit` bytes: that body is
    /// kept (`holdsBody`).
    func open(_ url: String, range: ByteRange, holdLimit: Int64) throws(CurlError) {
        state = .opening(OpeningRequest(range: range, holdLimit: holdLimit))
        responseHeaders.reset()
        try easy.setTarget(url)
        try easy.setRange(range)
        try easy.setHeaders(baseHeaders)
        easy.clearError()
    }

    /// opening → opening: makes the request, not sent yet, ask for `range` instead.
    func widenOpening(to range: ByteRange) throws(CurlError) {
        guard case let .opening(request) = state, range.start == request.range.start else {
            preconditionFailure("only an opening request not sent yet is widened")
        }
        request.range = range
        try easy.setRange(range)
    }

    /// opening → keepingBody: the head is a usable 206 with the whole file
    /// (`answer`), small enough to keep in memory.
    func keepBody(of answer: PartialContent) {
        state = .keepingBody(HeldBody(answer: answer))
    }

    /// opening → opening: the body is not kept, decided once: with `check`,
    /// the head's, or nil when settled before the head was judged.
    func declineHold(check: Result<PartialContent, Rejection>?) {
        guard case let .opening(request) = state, case .undecided = request.hold else { return }
        request.hold = .declined(check: check)
    }

    /// keepingBody → idle: frees the body an opening kept, once it is
    /// written (the connection may wait idle for the next opening:
    /// `TransferLoop.recycle`).
    func releaseHeldBody() {
        state = .idle
    }

    /// opening or keepingBody → endedUnowned: the transfer ended with
    /// `result` while no client owned it. Only an opening request runs
    /// without a client (an engine takes its transfers out of the multi
    /// handle before it lets its connections go).
    func endedUnowned(_ result: CURLcode) {
        assert(!isBusy, "a piece's transfer ended with no engine to settle it")
        guard !isBusy else { return }
        state = .endedUnowned(result)
    }

    /// opening or endedUnowned → transferring: makes the opening transfer,
    /// which the server answers with `served` (nil: a 200 with the whole
    /// file), fetch `piece` (from byte 0) for `mirror`, and lets its body
    /// flow. Returns how the transfer ended if it did before (`endedUnowned`):
    /// the engine settles that at once.
    func adopt(_ piece: Piece, from mirror: Mirror, served: ByteRange?, now: Double) -> CURLcode? {
        precondition(sink != nil && piece.range.start == 0 && piece.range.end <= served?.end ?? .max)
        let endedBefore: CURLcode?
        switch state {
        case .opening: endedBefore = nil
        case let .endedUnowned(result): endedBefore = result
        default: preconditionFailure("only an opening request is adopted")
        }
        // Its request went out before the probe's local work (other mirrors'
        // probes, the lock, fallocate): no measure of a request's setup time.
        begin(piece, from: mirror, requested: served, race: nil, measuresSetup: false, now: now)
        // The body held back since the head arrived flows again (libcurl may
        // call the write callback from inside this call).
        curl_easy_pause(easy.raw, CURLPAUSE_CONT)
        return endedBefore
    }

    /// True when its request went out with no more transfers running than
    /// the server had accepted at once (`Engine.learnedLimit`).
    var sentWithinLimit = false

    /// idle → transferring: prepares the handle to fetch `piece` from
    /// `mirror` (ranged unless `plain`).
    func start(_ piece: Piece, from mirror: Mirror, plain: Bool, race: Race? = nil, now: Double) throws(CurlError) {
        let requested = plain ? nil : piece.range
        begin(piece, from: mirror, requested: requested, race: race, measuresSetup: true, now: now)
        responseHeaders.reset()
        var headers = mirror.remote.headers(from: baseHeaders)
        try easy.setTarget(mirror.remote.effectiveURL)
        try easy.setRange(requested)
        if requested != nil, let ifRange = mirror.remote.ifRange { headers.append("If-Range: \(ifRange)") }
        try easy.setHeaders(headers)
        easy.clearError()
    }

    /// The bookkeeping of a transfer that starts fetching `piece`.
    private func begin(
        _ piece: Piece, from mirror: Mirror, requested: ByteRange?, race: Race?, measuresSetup: Bool,
        now: Double
    ) {
        state = .transferring(
            PieceTransfer(
                mirror: mirror, requested: requested, measuresSetup: measuresSetup,
                start: piece.range.start, now: now))
        cursor = Cursor(piece: piece, position: piece.range.start, race: race)
        journal?.begin(slot: id, at: piece.range.start)
        pieceStream?.interrupt()
        wasUsed = true
        mirror.activeConnections += 1
    }

    /// transferring → idle: what the transfer did, for the engine to settle.
    /// `cutByUs`: rangeget ended it (a steal's boundary, a cancel).
    private func release(
        _ end: TransferEnd, curlError: CurlError? = nil, cutByUs: Bool = false, now: Double
    ) -> FinishedTransfer {
        guard let transfer else { preconditionFailure("no transfer to finish") }
        let mirror = transfer.mirror
        let finished = FinishedTransfer(
            piece: cursor.piece, end: end, written: cursor.written, mirror: mirror,
            race: cursor.race, curlError: curlError,
            cutShort: cutByUs && transfer.requested.map { cursor.position < $0.end } ?? false,
            timing: timing(of: end))
        journal?.end(slot: id, wrote: finished.written)
        pieceStream?.interrupt()
        totalBytes += cursor.bytes
        mirror.bytes += cursor.bytes
        mirror.tcpConnections += easy.connectionsOpened
        if let version = easy.httpVersion { mirror.httpVersion = version }
        mirror.busySeconds += now - transfer.startedAt
        mirror.activeConnections -= 1
        // An idle connection waits for no reader (else the loop polled every
        // 10 ms for it), nor races, nor keeps its pieces' references.
        state = .idle
        cursor = Cursor()
        return finished
    }

    /// How the transfer ending as `end` went, from libcurl's clock.
    private func timing(of end: TransferEnd) -> TransferTiming {
        let opened = easy.connectionsOpened > 0
        let firstByte = easy.timeToFirstByte
        var endedEarly: String?
        switch end {
        case .complete: endedEarly = nil
        case let .incomplete(reason, _, _): endedEarly = reason
        case let .localFailure(error): endedEarly = error.description
        }
        return TransferTiming(
            localPort: easy.localPort, newConnection: opened, connect: opened ? easy.connectSeconds : 0,
            tls: opened ? easy.tlsSeconds : 0, firstByte: firstByte > 0 ? firstByte : nil, bytes: cursor.bytes,
            status: easy.responseCode, httpVersion: easy.httpVersion, endedEarly: endedEarly)
    }

    // MARK: - The transfer in flight

    /// The transfer in flight; nil in any other phase.
    private var transfer: PieceTransfer? {
        if case let .transferring(transfer) = state { return transfer }
        return nil
    }

    /// True while a transfer is running.
    var isBusy: Bool {
        if case .transferring = state { return true }
        return false
    }

    /// True while the transfer waits for the rate limit's tokens, or for
    /// room in the sink (a stream's reader is behind).
    var isPaused: Bool { isBusy && cursor.pause != nil }

    /// The mirror of the transfer in flight.
    var mirror: Mirror? { transfer?.mirror }

    /// True while the transfer fetches a piece again after it failed its
    /// check (`Piece.recheck`): it is never cut nor raced.
    var isRechecking: Bool { isBusy && cursor.piece.recheck }

    /// Shared with another connection fetching the same tail.
    var race: Race? { isBusy ? cursor.race : nil }

    /// Bytes received by the current transfer.
    var transferBytes: Int64 { isBusy ? cursor.bytes : 0 }

    /// Bytes of the current piece not yet received.
    var remaining: ByteRange? {
        guard isBusy, cursor.position < cursor.end else { return nil }
        return ByteRange(cursor.position, cursor.end)
    }

    /// The bytes of the current piece written so far.
    var writtenSoFar: ByteRange? { isBusy ? cursor.written : nil }

    /// Lowers where this transfer stops; the bytes from `newEnd` on were handed to another connection.
    func stop(at newEnd: Int64) {
        precondition(isBusy && newEnd >= cursor.position && newEnd <= cursor.end, "a transfer stopped outside its rest")
        cursor.piece.range.end = newEnd
    }

    /// Resumes a paused transfer once the rate limit has tokens again, or
    /// the sink room.
    func resumeIfAllowed() {
        guard isBusy, let pause = cursor.pause else { return }
        switch pause {
        case .forRoom: guard sink?.hasRoom(at: cursor.position) == true else { return }
        case .forTokens: guard rateLimit?.hasTokens == true else { return }
        }
        cursor.pause = nil
        curl_easy_pause(easy.raw, CURLPAUSE_CONT)
    }

    /// Joins a race for the rest of the current piece.
    func join(_ race: Race) {
        precondition(isBusy, "no transfer to race")
        cursor.race = race
    }

    /// Notes progress (for stall detection and rates): seconds since the last
    /// byte, and the time to first byte when this sample saw the first byte.
    func sample(now: Double) -> (idle: Double, timeToFirstByte: Double?) {
        guard let transfer else { return (0, nil) }
        var timeToFirstByte: Double?
        if transfer.firstByteAt != nil {
            transfer.longestSilence = max(transfer.longestSilence, now - transfer.lastProgress)
        }
        if cursor.position != transfer.progressMark {
            transfer.progressMark = cursor.position
            transfer.lastProgress = now
            if transfer.firstByteAt == nil {
                // libcurl's own clock, read as the head arrived: `now` is
                // the end of a loop turn, which is long when every
                // connection's first burst came in it (8 of 2 MiB, nginx's
                // default pacing, made a loopback server look 10 ms away).
                // When first byte and end share a turn, `now` would also
                // make the transfer's rate (lastRate) its bytes / 0.01 s.
                let measured = transfer.measuresSetup ? easy.timeToFirstByte : 0
                transfer.firstByteAt = measured > 0 ? min(now, transfer.startedAt + measured) : now
                if transfer.measuresSetup { timeToFirstByte = measured > 0 ? measured : now - transfer.startedAt }
            }
        }
        if now - transfer.recent.newest >= 0.05 { transfer.recent.add(bytes: cursor.bytes, at: now) }
        return (now - transfer.lastProgress, timeToFirstByte)
    }

    /// Bytes per second of the current transfer over the last second, nil
    /// until data flowed for a tenth of a second (0 when it went silent).
    func rate(now: Double) -> Double? {
        guard let transfer, let firstByteAt = transfer.firstByteAt, now - firstByteAt >= 0.1,
            transfer.recent.span >= 0.1
        else { return nil }
        return transfer.recent.rate
    }

    /// Bytes per second of the current transfer since its first byte, over
    /// all its bursts: a bursty server's pace shows, where the last second
    /// may hold one burst or none. `exact` once the transfer has run twice
    /// its longest silence; before, an upper bound (the first burst, which
    /// nginx sends at once, counts whole, and the next may be a second
    /// away). Nil before a tenth of a second of data.
    func averageRate(now: Double) -> (rate: Double, exact: Bool)? {
        guard let transfer, let firstByteAt = transfer.firstByteAt, now - firstByteAt >= 0.1 else { return nil }
        let elapsed = now - firstByteAt
        let silence = max(transfer.longestSilence, now - transfer.lastProgress)
        return (Double(cursor.bytes) / elapsed, elapsed >= 2 * silence)
    }

    /// True once the current transfer's first byte arrived.
    var hasDelivered: Bool { transfer?.firstByteAt != nil }

    /// Seconds since the transfer's last byte (or its request, before one).
    func silence(now: Double) -> Double {
        transfer.map { now - $0.lastProgress } ?? 0
    }

    /// Decides how the transfer ended and returns the connection to idle.
    func finish(result: CURLcode, now: Double) -> FinishedTransfer {
        guard let transfer else { preconditionFailure("no transfer to finish") }
        if cursor.bytes > 0 {
            lastRate = Double(cursor.bytes) / max(0.01, now - (transfer.firstByteAt ?? transfer.startedAt))
        }
        if case let .refuse(.writeFailed(failure)) = cursor.intake { return release(.localFailure(failure), now: now) }
        if case .refuse(.reachedEnd) = cursor.intake { return release(.complete, cutByUs: true, now: now) }
        if result == CURLE_OK && cursor.position == cursor.end { return release(.complete, now: now) }
        if case let .refuse(.rejected(rejection)) = cursor.intake {
            return release(
                .incomplete(reason: rejection.description, cause: RetryCause(rejection), rejection: rejection),
                now: now)
        }
        if result == CURLE_OK {
            if cursor.end == Int64.max { return release(.complete, now: now) }
            if case .checkHead = cursor.intake,
                let check = ResponseCheck.check(
                    responseHead, requested: transfer.requested, expected: transfer.expected)
            {
                return release(
                    .incomplete(reason: check.description, cause: RetryCause(check), rejection: check), now: now)
            }
            return release(
                .incomplete(reason: "short body: got \(cursor.bytes) bytes", cause: .cut, rejection: nil),
                now: now)
        }
        let error = easy.error(result)
        return release(
            .incomplete(reason: error.message, cause: RetryCause(error, delivered: hasDelivered), rejection: nil),
            curlError: error, now: now)
    }

    /// Abandons the transfer (stall, lost race, shutdown); the caller removes
    /// the handle. `cause`: a stall, or by default rangeget's own cut.
    /// `distrustingFrom`: its bytes from there on do not count.
    func abandon(
        reason: String, cause: RetryCause = .cut, error: CurlError? = nil, distrustingFrom offset: Int64? = nil,
        now: Double
    ) -> FinishedTransfer {
        if let offset { disown(from: offset) }
        return release(
            .incomplete(reason: reason, cause: cause, rejection: nil), curlError: error, cutByUs: true, now: now)
    }

    /// Takes back the bytes of the transfer in flight from `offset` on: they
    /// do not count. Its journal slot gives them up first, in one store, so
    /// a kill at any moment finds them listed nowhere, and the range the
    /// transfer ends with (logged) stops at `offset`.
    func disown(from offset: Int64) {
        guard isBusy, offset < cursor.position else { return }
        let taken = ByteRange(max(cursor.piece.range.start, offset), cursor.position)
        cursor.position = taken.start
        journal?.advance(slot: id, to: cursor.position)
        pieceStream?.disown(taken)
    }
}
