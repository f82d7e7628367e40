// Connection: one slot of the connection budget and the transfer it runs.
// It owns a reused easy handle (so keep-alive connections are reused), the
// piece of the file it is fetching, and the write path: libcurl's buffer goes
// straight to pwrite at the right offset, after one check of the response.
import CCurl
import Glibc

/// A piece of work: bytes to fetch, and how often fetching them failed.
struct Piece: Sendable {
    var range: ByteRange
    /// Consecutive attempts that ended without a byte written.
    var failures = 0
    /// Monotonic time before which the piece must not be retried (backoff).
    var notBefore: Double = 0
}

/// How a transfer ended, decided when libcurl reports it done.
enum TransferEnd {
    /// Every byte of the piece was written.
    case complete
    /// The transfer stopped early; the rest of the piece goes back to the queue.
    case incomplete(reason: String, rejection: Rejection?)
    /// Writing to disk failed: the download cannot go on.
    case localFailure(IOError)
}

final class Connection {
    let id: Int
    let easy: EasyHandle
    private let file: OutputFile
    private let expected: Expectation
    private let baseHeaders: [String]

    /// The work in flight; nil when idle.
    private(set) var piece: Piece?
    /// The range the request asked for; nil for a plain GET from byte 0.
    private(set) var requested: ByteRange?
    /// Next byte to write.
    private(set) var position: Int64 = 0
    /// Where to stop: the piece's end, lowered when another connection steals the rest.
    private(set) var end: Int64 = 0
    /// Bytes written by the current transfer.
    private(set) var transferBytes: Int64 = 0
    /// Bytes written over the connection's life.
    private(set) var totalBytes: Int64 = 0
    /// Monotonic time of the last byte (or of the start).
    private(set) var lastProgress: Double = 0
    private var progressMark: Int64 = 0
    private var startedAt: Double = 0
    /// When the loop first saw a byte of the current transfer.
    private(set) var firstByteAt: Double?

    private var head = ResponseHead()
    private var accepted = false
    private var rejection: Rejection?
    private var writeFailure: IOError?
    private var reachedEnd = false

    init(id: Int, file: OutputFile, expected: Expectation, url: String, options: TransferOptions) throws(CurlError) {
        self.id = id
        self.file = file
        self.expected = expected
        baseHeaders = options.headers
        easy = try EasyHandle()
        try easy.configure(url: url, options: options)
        let me = Unmanaged.passUnretained(self).toOpaque()
        try easy.set(CURLOPT_PRIVATE, pointer: me)
        try easy.set(CURLOPT_WRITEDATA, pointer: me)
        try easy.set(CURLOPT_HEADERDATA, pointer: me)
        try easy.set(CURLOPT_WRITEFUNCTION, callback: connectionWrite)
        try easy.set(CURLOPT_HEADERFUNCTION, callback: connectionHeader)
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
        piece.map { ByteRange($0.range.start, position) }
    }

    /// Prepares the handle to fetch `piece` (ranged unless `plain`).
    func start(_ piece: Piece, plain: Bool, ifRange: String?, now: Double) throws(CurlError) {
        self.piece = piece
        requested = plain ? nil : piece.range
        position = piece.range.start
        end = piece.range.end
        transferBytes = 0
        progressMark = position
        lastProgress = now
        startedAt = now
        firstByteAt = nil
        head = ResponseHead()
        accepted = false
        rejection = nil
        writeFailure = nil
        reachedEnd = false
        var headers = baseHeaders
        if let requested {
            try easy.set(CURLOPT_RANGE, String(requested.rangeHeaderValue.dropFirst("bytes=".count)))
            if let ifRange { headers.append("If-Range: \(ifRange)") }
        } else {
            try easy.set(CURLOPT_RANGE, nil)
        }
        try easy.setHeaders(headers)
        easy.clearError()
    }

    /// Lowers where this transfer stops; the bytes from `newEnd` on were handed to another connection.
    func stop(at newEnd: Int64) {
        precondition(newEnd >= position && newEnd <= end)
        end = newEnd
        piece?.range.end = newEnd
    }

    /// Notes progress (for stall detection and rates): seconds since the last
    /// byte, and the time to first byte when this sample saw the first byte.
    func sample(now: Double) -> (idle: Double, timeToFirstByte: Double?) {
        var timeToFirstByte: Double?
        if position != progressMark {
            progressMark = position
            lastProgress = now
            if firstByteAt == nil {
                firstByteAt = now
                timeToFirstByte = now - startedAt
            }
        }
        return (now - lastProgress, timeToFirstByte)
    }

    /// Bytes per second of the current transfer since its first byte, nil until measurable.
    func rate(now: Double) -> Double? {
        guard let firstByteAt, now - firstByteAt >= 0.05, transferBytes > 0 else { return nil }
        return Double(transferBytes) / (now - firstByteAt)
    }

    /// The rate of the last transfer that ran long enough to measure.
    private(set) var lastRate: Double?

    /// Decides how the transfer ended and returns the connection to idle.
    func finish(result: CURLcode, now: Double) -> (piece: Piece, end: TransferEnd, written: ByteRange) {
        guard let piece else { preconditionFailure("finish without a transfer") }
        if let measured = rate(now: now) { lastRate = measured }
        let written = ByteRange(piece.range.start, position)
        self.piece = nil
        totalBytes += transferBytes
        if let writeFailure { return (piece, .localFailure(writeFailure), written) }
        if reachedEnd || (result == CURLE_OK && position == end) {
            return (piece, .complete, written)
        }
        if let rejection {
            return (piece, .incomplete(reason: rejection.description, rejection: rejection), written)
        }
        if result == CURLE_OK {
            if end == Int64.max { return (piece, .complete, written) }
            if !accepted {
                let check = ResponseCheck.check(head, requested: requested, expected: expected)
                if let check { return (piece, .incomplete(reason: check.description, rejection: check), written) }
            }
            return (piece, .incomplete(reason: "short body: got \(transferBytes) bytes", rejection: nil), written)
        }
        return (piece, .incomplete(reason: easy.error(result).message, rejection: nil), written)
    }

    /// Abandons the transfer (stall, shutdown); the caller removes the handle.
    func abandon(reason: String) -> (piece: Piece, end: TransferEnd, written: ByteRange) {
        guard let piece else { preconditionFailure("abandon without a transfer") }
        self.piece = nil
        totalBytes += transferBytes
        return (piece, .incomplete(reason: reason, rejection: nil), ByteRange(piece.range.start, position))
    }

    // MARK: - libcurl callbacks (engine thread, inside curl_multi_perform)

    fileprivate func receiveHeader(_ line: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        let text = String(decoding: UnsafeRawBufferPointer(start: line, count: count), as: UTF8.self)
        head.consume(text)
        return count
    }

    fileprivate func receiveBody(_ data: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        if !accepted {
            if let problem = ResponseCheck.check(head, requested: requested, expected: expected) {
                rejection = problem
                return 0
            }
            accepted = true
        }
        let room = end - position
        let length = Int64(count) <= room ? count : Int(room)
        if length > 0 {
            do {
                try file.write(data, count: length, at: position)
            } catch {
                writeFailure = error
                return 0
            }
            position += Int64(length)
            transferBytes += Int64(length)
        }
        if position == end, end < (requested?.end ?? expected.size ?? Int64.max) {
            reachedEnd = true
            return 0
        }
        if length < count {
            rejection = .changed("the server sent more than \(expected.size ?? 0) bytes")
            return 0
        }
        return count
    }
}

private let connectionWrite: CurlDataCallback = { data, size, count, user in
    guard let data, let user else { return 0 }
    return Unmanaged<Connection>.fromOpaque(user).takeUnretainedValue().receiveBody(data, count: size * count)
}

private let connectionHeader: CurlDataCallback = { data, size, count, user in
    guard let data, let user else { return 0 }
    return Unmanaged<Connection>.fromOpaque(user).takeUnretainedValue().receiveHeader(data, count: size * count)
}
