// Faults the server can inject, when they apply, and their compact text form.

/// A misbehaviour the server can show in a response.
public enum Fault: Sendable, Hashable {
    /// 200 with the full body to a ranged request.
    case ignoreRange
    /// 206 whose Content-Range start (and body) are shifted by n bytes.
    case wrongContentRangeShift(Int64)
    /// 206 whose Content-Range names another total.
    case wrongContentRangeTotal(Int64)
    /// 206 whose Content-Range has last < first (the body is right).
    case invertedContentRange
    /// Headers and n body bytes, then the connection closes (short body).
    case cutAfter(Int64)
    /// The connection closes at a random point of the body, the same point
    /// for the same seed and request number.
    case cutAtRandom(seed: UInt64)
    /// n body bytes, then nothing more until the client closes or the
    /// server stops.
    case stallAfter(Int64)
    /// This status with a small HTML body and an optional Retry-After (seconds).
    case status(Int, retryAfter: Int?)
    /// HEAD is answered with this status; GET is unaffected.
    case headStatus(Int)
    /// HEAD is never answered.
    case headHang
    /// The request (any method) is never answered: no head, no byte.
    case hang
    /// The head is sent this many milliseconds late, on top of the server's
    /// latency (a slow backend behind some requests); the rest is as usual.
    case delay(milliseconds: Int)
    /// HEAD is answered without Content-Length.
    case headNoLength
    /// No Accept-Ranges header; ranges are still honoured.
    case noAcceptRanges
    /// `Accept-Ranges: none`, and ranges are ignored (200 with everything).
    case acceptRangesNone
    /// `Content-Encoding: gzip` is added; the body is unchanged.
    case gzipEncoding
    /// A single range is answered as multipart/byteranges (so are several).
    case multipart
    /// `Transfer-Encoding: chunked` without Content-Length; Range is ignored.
    case chunkedNoLength
    /// Before answering, the resource is replaced by other content of the
    /// same size (new ETag, later Last-Modified), for this and later requests.
    case changeContent
    /// Before answering, the resource is replaced by one of this size.
    case changeSize(Int64)
    /// The ETag is sent weak: `W/"..."`.
    case weakETag
    /// A redirect to `Location` (as given: relative or absolute).
    case redirect(to: String, status: Int = 302)
    /// This status with a small HTML body and `Retry-After: value`, the value
    /// as given: a number past any integer type, an HTTP date of any year.
    case retryAfter(status: Int, value: String)
    /// A 200 with the whole body (ranges ignored) whose `Content-Length`
    /// claims `digits` (any number, past Int64 too); the connection closes
    /// after the real body, so the claim is never met.
    case claimLength(String)
    /// A 206 with the right Content-Range and n bytes of `!` after the range
    /// (counted by Content-Length): a body that runs past its Content-Range.
    case overlong(Int64)
    /// The response's field `name` gets `value` (it is added if absent), for
    /// hostile text such as control characters; the connection closes after
    /// the response, since the field may be one that frames the body.
    case header(name: String, value: String)

    /// Whether the fault changes a response to `method`: HEAD-only faults
    /// leave GET alone, and body and range faults leave HEAD alone.
    func applies(to method: String) -> Bool {
        switch self {
        case .headStatus, .headHang, .headNoLength:
            return method == "HEAD"
        case .ignoreRange, .wrongContentRangeShift, .wrongContentRangeTotal, .invertedContentRange,
            .cutAfter, .cutAtRandom, .stallAfter, .multipart, .overlong:
            return method == "GET"
        case .status, .noAcceptRanges, .acceptRangesNone, .gzipEncoding, .chunkedNoLength,
            .changeContent, .changeSize, .weakETag, .redirect, .retryAfter, .claimLength, .header, .hang, .delay:
            return true
        }
    }
}

/// Which requests a fault rule applies to.
public enum Trigger: Sendable, Hashable {
    /// Every request.
    case always
    /// Only the n-th request (1-based) to the path, counting GET and HEAD.
    case nthRequest(Int)
    /// The n-th request to the path and every later one.
    case fromRequest(Int)
    /// A request whose single Range starts at this offset.
    case rangeStart(Int64)
    /// Each request with probability p, drawn from `seed` and the request's
    /// number on its path: the same sequence of requests gives the same faults.
    case probability(Double, seed: UInt64)
    /// Requests with this method, e.g. `HEAD`.
    case method(String)

    /// Whether a request matches: its method, its number among the requests
    /// to its path (1-based) and the start of its single Range, if any.
    func matches(method: String, requestNumber: Int, rangeStart: Int64?) -> Bool {
        switch self {
        case .always: true
        case .nthRequest(let n): requestNumber == n
        case .fromRequest(let n): requestNumber >= n
        case .rangeStart(let offset): rangeStart == offset
        case .probability(let p, let seed):
            SplitMix64.unitInterval(SplitMix64.value(seed: seed, index: UInt64(requestNumber))) < p
        case .method(let name): method.uppercased() == name.uppercased()
        }
    }
}

/// A fault and when to inject it. Of several rules, the first whose trigger
/// matches and whose fault applies to the request's method wins.
public struct FaultRule: Sendable, Hashable, CustomStringConvertible {
    /// What goes wrong.
    public var fault: Fault
    /// When it goes wrong.
    public var trigger: Trigger

    /// `fault` whenever `trigger` matches.
    public init(_ fault: Fault, when trigger: Trigger = .always) {
        self.fault = fault
        self.trigger = trigger
    }

    /// The rule in the compact text form ``init(parsing:)`` reads.
    public var description: String {
        trigger == .always ? fault.description : "\(fault)@\(trigger)"
    }
}

extension Fault: CustomStringConvertible {
    /// The fault in the compact text form, e.g. `cut:100` or `status:503:2`.
    public var description: String {
        switch self {
        case .ignoreRange: "ignore-range"
        case .wrongContentRangeShift(let n): "range-shift:\(n)"
        case .wrongContentRangeTotal(let n): "range-total:\(n)"
        case .invertedContentRange: "range-inverted"
        case .cutAfter(let n): "cut:\(n)"
        case .cutAtRandom(let seed): "cut-random:\(seed)"
        case .stallAfter(let n): "stall:\(n)"
        case .status(let code, nil): "status:\(code)"
        case .status(let code, let retryAfter?): "status:\(code):\(retryAfter)"
        case .headStatus(let code): "head-status:\(code)"
        case .headHang: "head-hang"
        case .hang: "hang"
        case .delay(let milliseconds): "delay:\(milliseconds)"
        case .headNoLength: "head-no-length"
        case .noAcceptRanges: "no-accept-ranges"
        case .acceptRangesNone: "accept-ranges-none"
        case .gzipEncoding: "gzip"
        case .multipart: "multipart"
        case .chunkedNoLength: "chunked"
        case .changeContent: "change-content"
        case .changeSize(let n): "change-size:\(n)"
        case .weakETag: "weak-etag"
        case .redirect(let location, 302): "redirect:\(location)"
        case .redirect(let location, let status): "redirect:\(location):\(status)"
        case .retryAfter(let status, let value): "retry-after:\(status):\(FaultRule.escaped(value))"
        case .claimLength(let digits): "claim-length:\(digits)"
        case .overlong(let n): "overlong:\(n)"
        case .header(let name, let value): "header:\(name):\(FaultRule.escaped(value))"
        }
    }
}

extension Trigger: CustomStringConvertible {
    /// The trigger in the compact text form, e.g. `request=3` or `p=0.3,seed=1`.
    public var description: String {
        switch self {
        case .always: "always"
        case .nthRequest(let n): "request=\(n)"
        case .fromRequest(let n): "from=\(n)"
        case .rangeStart(let offset): "range-start=\(offset)"
        case .probability(let p, let seed): "p=\(p),seed=\(seed)"
        case .method(let name): "method=\(name)"
        }
    }
}
