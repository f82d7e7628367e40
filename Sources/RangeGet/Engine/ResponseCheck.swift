// ResponseCheck: the one decision made before the first byte of a response is
// written: is this exactly what was asked for, from the same file? (Invariant
// 1: no unvalidated byte.) `partialContent` judges every answer to a ranged
// request rangeget makes (the engine's pieces, the opening request, the
// probe's first byte, spot checks and bench samples); each caller's own
// policy on top of it (a 200 taken as a plain stream, a 416 read for its
// total) stays at its call site. Pure, so every case is a table-driven unit test.

/// What a response must match: the file's size and validators.
struct Expectation: Sendable, Equatable {
    /// The complete length, nil when unknown (single stream without length).
    var size: Int64?
    /// The entity tag seen by the probe, strong or weak.
    var etag: String?
    /// `Last-Modified` seen by the probe.
    var lastModified: String?

    init(size: Int64?, etag: String?, lastModified: String?) {
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
    }

    init(_ remote: RemoteFile) {
        self.init(size: remote.size, etag: remote.etag, lastModified: remote.lastModified)
    }

    /// Nothing known yet: the requests that probe the file.
    static let unknown = Expectation(size: nil, etag: nil, lastModified: nil)
}

/// Which bytes a ranged request takes as its answer.
enum RangeRequest: Sendable, Equatable {
    /// Exactly these bytes.
    case exactly(ByteRange)
    /// Bytes from the range's start that end anywhere within it: the opening
    /// request, which a file shorter than the request answers with all it has.
    case prefix(of: ByteRange)

    /// True when a response carrying `served` answers the request.
    func isAnswered(by served: ByteRange) -> Bool {
        switch self {
        case let .exactly(range): return served == range
        case let .prefix(range): return served.start == range.start && served.end <= range.end
        }
    }
}

/// A usable 206: the bytes its body carries and the file's complete length.
struct PartialContent: Sendable, Equatable {
    /// The range of the file in the body, from its Content-Range.
    var served: ByteRange
    /// The file's complete length, from its Content-Range.
    var total: Int64
}

/// Why a response's body must not be written.
enum Rejection: Error, Equatable, Sendable, CustomStringConvertible {
    /// An error status, with `Retry-After` seconds when given (bounded by
    /// `ResponseHead.longestRetryAfter`).
    case status(Int, retryAfter: Double?)
    /// A 200 with the whole (unchanged) file to a ranged request.
    case rangeIgnored
    /// The remote file is not the one being downloaded any more.
    case changed(String)
    /// A 206 whose `Content-Range` is missing or not the range asked for.
    case contentRange(String?)
    /// A 206 or 416 naming another complete length than the probe found:
    /// one such answer is a server bug to retry past; the same length again
    /// and again means the file (or a lying HEAD) changed the size.
    case otherTotal(Int64)
    /// A ranged answer with a content coding: its offsets are not file offsets.
    case encoded(String)
    /// `multipart/byteranges` to a single-range request.
    case multipart
    /// A 206 for this range whose body ran past its Content-Range.
    case overlong(ByteRange)
    /// A Content-Range whose complete length is past `RemoteFile.largestSize`.
    case implausibleTotal(Int64)

    var description: String {
        switch self {
        case let .status(code, retryAfter):
            return "HTTP \(code)" + (retryAfter.map { " (retry after \(Self.duration($0)))" } ?? "")
        case .rangeIgnored: return "the server ignored the Range header and answered 200 with the whole file"
        case let .changed(reason): return "the remote file changed: \(reason)"
        case let .contentRange(value): return "unexpected Content-Range \(value ?? "(none)")"
        case let .otherTotal(total): return "Content-Range names \(total) bytes in all, not the size the probe found"
        case let .encoded(coding): return "ranged response with Content-Encoding \(coding)"
        case .multipart: return "multipart/byteranges answer to a single range"
        case let .overlong(range):
            return "the answer for bytes \(range.start)-\(range.end - 1) ran past its Content-Range (none of it kept)"
        case let .implausibleTotal(total): return "the server claims a size of \(total) bytes, more than any disk holds"
        }
    }

    /// `seconds` as a person reads a wait: "42 s", "5 min", "3 h", "over 31 years".
    static func duration(_ seconds: Double) -> String {
        if seconds >= ResponseHead.longestRetryAfter { return "over 31 years" }
        if seconds >= 7200 { return "\(Int(seconds / 3600)) h" }
        if seconds >= 120 { return "\(Int(seconds / 60)) min" }
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    /// Why a `Retry-After` is not waited out: "asks to wait 3 h (HTTP 503
    /// with Retry-After), longer than the longest wait, 60 s".
    static func overlongWait(_ retryAfter: Double, status: Int, longest: Double) -> String {
        "asks to wait \(duration(retryAfter)) (HTTP \(status) with Retry-After), longer than the longest wait, "
            + duration(longest)
    }

    /// True when another attempt at the same request may succeed.
    var isTransient: Bool {
        switch self {
        case let .status(code, _): return code == 408 || code == 429 || code >= 500
        case .contentRange, .otherTotal, .multipart, .overlong: return true
        case .rangeIgnored, .changed, .encoded, .implausibleTotal: return false
        }
    }
}

enum ResponseCheck {
    /// Nil when the body of the response described by `head` may be written for
    /// `requested` (nil: a plain GET from byte 0); otherwise why not.
    static func check(_ head: ResponseHead, requested: ByteRange?, expected: Expectation) -> Rejection? {
        guard let requested else { return plainCheck(head, expected: expected) }
        if case let .failure(rejection) = partialContent(head, answering: .exactly(requested), expected: expected) {
            return rejection
        }
        return nil
    }

    /// Whether `head` is a usable answer to the ranged request `request` for
    /// the file `expected` describes: a 206 of one part (not multipart), with
    /// a Content-Range that parses, serves what was asked, names a known
    /// complete length (the expected size, when known) of at most
    /// `RemoteFile.largestSize`, no content coding, and the expected
    /// validators. Any other status is rejected as the engine reads it: a
    /// 200 as `.rangeIgnored`, a 416 for its total, an error with its
    /// Retry-After.
    static func partialContent(
        _ head: ResponseHead, answering request: RangeRequest, expected: Expectation
    ) -> Result<PartialContent, Rejection> {
        if let changed = validatorChange(head, expected: expected) { return .failure(.changed(changed)) }
        switch head.status {
        case 206:
            if let type = head["content-type"], isMultipart(type) { return .failure(.multipart) }
            guard let contentRange = head.contentRange else { return .failure(.contentRange(head["content-range"])) }
            if let total = contentRange.total, let size = expected.size, total != size {
                return .failure(.otherTotal(total))
            }
            guard let served = contentRange.range, request.isAnswered(by: served), let total = contentRange.total else {
                return .failure(.contentRange(head["content-range"]))
            }
            if total > RemoteFile.largestSize { return .failure(.implausibleTotal(total)) }
            if let coding = head.contentEncoding { return .failure(.encoded(coding)) }
            return .success(PartialContent(served: served, total: total))
        case 200:
            if let size = expected.size, let length = head.contentLength, length != size, head.contentEncoding == nil {
                return .failure(.changed("its size is now \(length) bytes, not \(size)"))
            }
            return .failure(.rangeIgnored)
        case 416:
            if let total = head.contentRange?.total, let size = expected.size, total != size {
                return .failure(.otherTotal(total))
            }
            return .failure(.status(416, retryAfter: nil))
        default:
            return .failure(.status(head.status, retryAfter: head.retryAfter))
        }
    }

    /// True when a Content-Type names a multipart type (`multipart/byteranges`
    /// or any other), in any case. Read as bytes: every 206 passes here.
    static func isMultipart(_ contentType: String) -> Bool {
        let wanted = Array("multipart/".utf8)
        let type = Array(contentType.utf8)
        guard type.count >= wanted.count else { return false }
        return (0...(type.count - wanted.count)).contains { start in
            wanted.indices.allSatisfy { type[start + $0].asciiLowercased == wanted[$0] }
        }
    }

    /// The check of a plain GET from byte 0: a 200 of the expected length and validators.
    private static func plainCheck(_ head: ResponseHead, expected: Expectation) -> Rejection? {
        if let changed = validatorChange(head, expected: expected) { return .changed(changed) }
        guard head.status == 200 else { return .status(head.status, retryAfter: head.retryAfter) }
        if let size = expected.size, let length = head.contentLength, length != size, head.contentEncoding == nil {
            return .changed("its length is now \(length) bytes, not \(size)")
        }
        return nil
    }

    /// A description of how the response's validators differ from the expected ones.
    private static func validatorChange(_ head: ResponseHead, expected: Expectation) -> String? {
        guard (200..<300).contains(head.status) else { return nil }
        if let was = expected.etag, let now = head.etag, was != now {
            return "its ETag is now \(now), not \(was)"
        }
        if let was = expected.lastModified, let now = head.lastModified, was != now {
            return "its Last-Modified is now \(now), not \(was)"
        }
        return nil
    }
}
