// The write path: libcurl's write callback (engine thread, inside
// curl_multi_perform) checks the response once, then pwrites its buffer at
// the right offset, advancing the piece transfer in place. No allocation,
// and no copy of the connection's state, per call.
import CCurl

/// A piece being fetched: what was asked, how far the response got, and how
/// the transfer goes. A class, so the write callback advances it in place:
/// a struct inside `Connection.State` would be copied out and back on every
/// call (with its references, several retains each), where a class costs
/// one reference.
final class PieceTransfer {
    /// Why the transfer is paused: for the rate limit's tokens, or for room
    /// in the sink (a stream's reader is behind).
    enum Pause { case forTokens, forRoom }

    /// Why the write callback refuses every byte from now on.
    enum Refusal {
        /// The response is not the one asked for, or contradicts itself.
        case rejected(Rejection)
        /// Writing to disk failed.
        case writeFailed(IOError)
        /// The piece is whole (its end was stolen) before the response is.
        case reachedEnd
    }

    /// The work; `piece.range.end` is where to stop, lowered when another
    /// connection steals the rest.
    var piece: Piece
    let mirror: Mirror
    /// Shared with another connection fetching the same tail.
    var race: Race?
    /// The range the request asked for; nil for a plain GET from byte 0.
    let requested: ByteRange?
    let expected: Expectation
    /// Next byte of the response, and the bytes received.
    var position: Int64
    var bytes: Int64 = 0
    /// True once the head passed its check (at the first body byte).
    var accepted = false
    var refusal: Refusal?
    var pause: Pause?
    /// False for an adopted opening request: its time to first byte says
    /// nothing about a new request's.
    let measuresSetup: Bool
    let startedAt: Double
    var firstByteAt: Double?
    /// When `position` was last seen to move, and where it was then.
    var lastProgress: Double
    var progressMark: Int64
    var recent = RateMeter(window: 1)

    init(piece: Piece, mirror: Mirror, race: Race?, requested: ByteRange?, measuresSetup: Bool, now: Double) {
        self.piece = piece
        self.mirror = mirror
        self.race = race
        self.requested = requested
        expected = mirror.expectation
        position = piece.range.start
        self.measuresSetup = measuresSetup
        startedAt = now
        lastProgress = now
        progressMark = position
        recent.add(bytes: 0, at: now)
    }

    /// Where to stop.
    var end: Int64 { piece.range.end }

    /// The bytes of the piece written so far (in a race, bytes this side
    /// skipped were written by the other side first).
    var written: ByteRange { ByteRange(piece.range.start, position) }
}

extension Connection {
    fileprivate func receiveBody(_ data: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        guard case let .transferring(transfer) = state else { return receiveOpeningBody(data, count: count) }
        // Refused once, refused for good. libcurl 7.88 does not end a
        // transfer whose buffered bytes the callback refused as it resumed
        // (`adopt`, `resumeIfAllowed`: curl_easy_pause's error is the
        // transfer's only word of it): it reads on and calls again, and the
        // bytes taken back (`disown`) must not be written over.
        guard let sink, transfer.refusal == nil else { return 0 }
        if !transfer.accepted {
            if let problem = ResponseCheck.check(responseHead, requested: transfer.requested, expected: transfer.expected) {
                transfer.refusal = .rejected(problem)
                return 0
            }
            transfer.accepted = true
        }
        if let rateLimit, !rateLimit.take(count) {
            transfer.pause = .forTokens
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        let end = transfer.end
        var position = transfer.position
        let room = end - position
        let length = Int64(count) <= room ? count : Int(room)
        if length > 0 {
            // In a race, bytes below the frontier are already written by the other side.
            let skip = transfer.race.map { Int(min(Int64(length), max(0, $0.frontier - position))) } ?? 0
            if skip < length {
                do {
                    guard try sink.accept(data + skip, count: length - skip, at: position + Int64(skip)) else {
                        // The sink is full (a stream whose reader is behind): libcurl offers the same bytes again.
                        transfer.pause = .forRoom
                        return Int(CURL_WRITEFUNC_PAUSE)
                    }
                } catch {
                    transfer.refusal = .writeFailed(error)
                    return 0
                }
            }
            position += Int64(length)
            transfer.position = position
            journal?.advance(slot: id, to: position)
            transfer.bytes += Int64(length)
            if let race = transfer.race, position > race.frontier { race.frontier = position }
        }
        if position == end, end < (transfer.requested?.end ?? transfer.expected.size ?? Int64.max) {
            transfer.refusal = .reachedEnd
            return 0
        }
        if length < count {
            if let requested = transfer.requested {
                // A 206 whose body runs past its own Content-Range contradicts
                // itself: none of its bytes count, and the piece is fetched
                // again. The file did not change for it.
                transfer.refusal = .rejected(.overlong(requested))
                disown(from: transfer.piece.range.start)
            } else {
                transfer.refusal = .rejected(.changed("the server sent more than \(transfer.expected.size ?? 0) bytes"))
            }
            return 0
        }
        return count
    }

    /// The body of the opening request, before the engine adopts it.
    private func receiveOpeningBody(_ data: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        switch state {
        case .opening, .keepingBody:
            // Checked again by the probe, and written only once whole. More
            // than the head announced contradicts it: the request ends.
            if holdsBody() { return keep(data, count: count) ? count : 0 }
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
