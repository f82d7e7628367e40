// The write path: libcurl's write callback (engine thread, inside
// curl_multi_perform) checks the response once, then pwrites its buffer at
// the right offset and advances the connection's cursor in place. No
// allocation, and no copy of the connection's state, per call.
import CCurl

/// A piece being fetched, as `Connection.State.transferring` keeps it: what
/// was asked, and how the transfer is timed (updated in place: a class, as
/// every payload of the state). Where its bytes are is the connection's
/// `cursor`.
final class PieceTransfer {
    let mirror: Mirror
    /// The range the request asked for; nil for a plain GET from byte 0.
    let requested: ByteRange?
    let expected: Expectation
    /// False for an adopted opening request: its time to first byte says
    /// nothing about a new request's.
    let measuresSetup: Bool
    let startedAt: Double
    var firstByteAt: Double?
    /// When the position was last seen to move, and where it was then.
    var lastProgress: Double
    var progressMark: Int64
    /// The longest silence since the first byte (a bursty server's pause).
    var longestSilence = 0.0
    var recent = RateMeter(window: 1)

    init(mirror: Mirror, requested: ByteRange?, measuresSetup: Bool, start: Int64, now: Double) {
        self.mirror = mirror
        self.requested = requested
        expected = mirror.expectation
        self.measuresSetup = measuresSetup
        startedAt = now
        lastProgress = now
        progressMark = start
        recent.add(bytes: 0, at: now)
    }
}

extension Connection {
    /// What the write callback reads and advances on every call, for the
    /// transfer in flight: a stored property of the connection, updated in
    /// place. Reached through `State` instead, the transfer was copied out of
    /// the enum and retained and released on every call: 778 instructions a
    /// call against 608 with loose fields, 610 with this (callgrind, a
    /// 64 MiB download). Meaningful only while the connection is
    /// `transferring`; `begin` sets it anew, `release` clears it.
    struct Cursor {
        /// The work; `piece.range.end` is where to stop, lowered when
        /// another connection steals the rest.
        var piece = Piece(range: ByteRange(0, 0))
        /// Next byte of the response, and the bytes received.
        var position: Int64 = 0
        var bytes: Int64 = 0
        /// Shared with another connection fetching the same tail.
        var race: Race?
        var intake = Intake.checkHead
        var pause: Pause?

        /// Where to stop.
        var end: Int64 { piece.range.end }

        /// The bytes of the piece written so far (in a race, bytes this side
        /// skipped were written by the other side first).
        var written: ByteRange { ByteRange(piece.range.start, position) }
    }

    /// What the write callback does with the bytes that come.
    enum Intake {
        /// Checks the head (`ResponseCheck.check`), at the first body byte.
        case checkHead
        /// Writes them: the head passed.
        case write
        /// Refuses them and every later one, for good. (Boxed, once per
        /// transfer at most: the enum is then one pointer wide, and the
        /// check on every call a comparison, not the decoding of a payload.)
        indirect case refuse(Refusal)
    }

    /// Why the write callback refuses every byte from now on.
    enum Refusal {
        /// The response is not the one asked for, or contradicts itself.
        case rejected(Rejection)
        /// Writing to disk failed.
        case writeFailed(IOError)
        /// The piece is whole (its end was stolen) before the response is.
        case reachedEnd
    }

    /// Why the transfer is paused: for the rate limit's tokens, or for room
    /// in the sink (a stream's reader is behind).
    enum Pause { case forTokens, forRoom }

    fileprivate func receiveBody(_ data: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        guard isBusy else { return receiveOpeningBody(data, count: count) }
        // Refused once, refused for good. libcurl 7.88 does not end a
        // transfer whose buffered bytes the callback refused as it resumed
        // (`adopt`, `resumeIfAllowed`: curl_easy_pause's error is the
        // transfer's only word of it): it reads on and calls again, and the
        // bytes taken back (`disown`) must not be written over.
        guard let sink else { return 0 }
        switch cursor.intake {
        case .write: break
        case .refuse: return 0
        case .checkHead:
            guard case let .transferring(transfer) = state else { return 0 }
            if let problem = ResponseCheck.check(
                responseHead, requested: transfer.requested, expected: transfer.expected)
            {
                cursor.intake = .refuse(.rejected(problem))
                return 0
            }
            cursor.intake = .write
        }
        if let rateLimit, !rateLimit.take(count) {
            cursor.pause = .forTokens
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        let end = cursor.end
        var position = cursor.position
        let room = end - position
        let length = Int64(count) <= room ? count : Int(room)
        if length > 0 {
            // In a race, bytes below the frontier are already written by the other side.
            let skip = cursor.race.map { Int(min(Int64(length), max(0, $0.frontier - position))) } ?? 0
            if skip < length {
                do {
                    guard try sink.accept(data + skip, count: length - skip, at: position + Int64(skip)) else {
                        // The sink is full (a stream whose reader is behind): libcurl offers the same bytes again.
                        cursor.pause = .forRoom
                        return Int(CURL_WRITEFUNC_PAUSE)
                    }
                    pieceStream?.add(data + skip, count: length - skip, at: position + Int64(skip))
                } catch {
                    cursor.intake = .refuse(.writeFailed(error))
                    return 0
                }
            }
            position += Int64(length)
            cursor.position = position
            journal?.advance(slot: id, to: position)
            cursor.bytes += Int64(length)
            if let race = cursor.race, position > race.frontier { race.frontier = position }
        }
        // (Fewer bytes taken than came only at the piece's end.)
        if position == end { return receivedEnd(past: length < count) ? 0 : count }
        return count
    }

    /// The piece's last byte came, and more than it has when `past`: true
    /// when the transfer ends here (refused).
    private func receivedEnd(past: Bool) -> Bool {
        guard case let .transferring(transfer) = state else { return true }
        if cursor.end < (transfer.requested?.end ?? transfer.expected.size ?? Int64.max) {
            cursor.intake = .refuse(.reachedEnd)
            return true
        }
        guard past else { return false }
        if let requested = transfer.requested {
            // A 206 whose body runs past its own Content-Range contradicts
            // itself: none of its bytes count, and the piece is fetched
            // again. The file did not change for it.
            cursor.intake = .refuse(.rejected(.overlong(requested)))
            disown(from: cursor.piece.range.start)
        } else {
            cursor.intake = .refuse(
                .rejected(.changed("the server sent more than \(transfer.expected.size ?? 0) bytes")))
        }
        return true
    }

    /// The body of the opening request, before the engine adopts it.
    private func receiveOpeningBody(_ data: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        switch state {
        case .opening, .keepingBody:
            // Checked again by the probe, and written only once whole. More
            // than the head announced contradicts it: the request ends.
            if holdsBody(), case let .keepingBody(held) = state { return held.keep(data, count: count) ? count : 0 }
            // The probe's verdict is pending: hold the body of a 206 (or of a
            // 200, the whole file as one stream), refuse anything else.
            let status = responseHead.status
            return status == 206 || status == 200 ? Int(CURL_WRITEFUNC_PAUSE) : 0
        case .idle, .endedUnowned, .transferring:
            return 0
        }
    }
}

let connectionWrite: CurlDataCallback = { data, size, count, user in
    guard let data, let user else { return 0 }
    return Unmanaged<Connection>.fromOpaque(user).takeUnretainedValue().receiveBody(data, count: size * count)
}
