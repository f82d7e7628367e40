// Range and If-Range (RFC 9110 14.2, 13.1.5): parsing and the decision of
// what part of a representation a GET gets.
import FoundationEssentials

/// One range-spec of a `Range: bytes=...` header.
enum RangeSpec: Equatable {
    /// `first-last`; `last` may lie beyond the end (it is clamped).
    case closed(first: Int64, last: Int64)
    /// `first-`.
    case from(first: Int64)
    /// `-length`: the last `length` bytes.
    case suffix(length: Int64)

    /// The first byte this spec asks for, when it names one (not a suffix).
    var first: Int64? {
        switch self {
        case .closed(let first, _), .from(let first): first
        case .suffix: nil
        }
    }

    /// The bytes selected from a representation of `size` bytes, or nil when
    /// unsatisfiable (the first byte is beyond the end, an empty suffix, or
    /// an empty representation).
    func resolved(size: Int64) -> Range<Int64>? {
        guard size > 0 else { return nil }
        switch self {
        case .closed(let first, let last):
            return first < size ? first..<(min(last, size - 1) + 1) : nil
        case .from(let first):
            return first < size ? first..<size : nil
        case .suffix(let length):
            return length > 0 ? (size - min(length, size))..<size : nil
        }
    }

    /// The specs of a Range header value, or nil when it is malformed or in
    /// another unit (the header is then ignored).
    static func parseHeader(_ value: String) -> [RangeSpec]? {
        let trimmed = value.trimmingSpaces()
        guard let equals = trimmed.firstIndex(of: "="),
            trimmed[..<equals].trimmingSpaces().lowercased() == "bytes"
        else { return nil }
        var specs: [RangeSpec] = []
        for element in trimmed[trimmed.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false)
        {
            let text = element.trimmingSpaces()
            if text.isEmpty { continue } // the list syntax allows empty elements
            guard let dash = text.firstIndex(of: "-") else { return nil }
            let firstText = text[..<dash]
            let lastText = text[text.index(after: dash)...]
            switch (parseDigits(firstText), parseDigits(lastText)) {
            case (let first?, let last?):
                guard first <= last else { return nil }
                specs.append(.closed(first: first, last: last))
            case (let first?, nil) where lastText.isEmpty:
                specs.append(.from(first: first))
            case (nil, let length?) where firstText.isEmpty:
                specs.append(.suffix(length: length))
            default:
                return nil
            }
        }
        return specs.isEmpty ? nil : specs
    }

    /// Decimal digits only, saturating at `Int64.max` (a huge `last` is valid).
    private static func parseDigits(_ text: Substring) -> Int64? {
        guard !text.isEmpty else { return nil }
        var value: Int64 = 0
        for character in text.utf8 {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(character) else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int64(character - UInt8(ascii: "0")))
            value = overflow1 || overflow2 ? .max : sum
        }
        return value
    }
}

/// What a GET gets of a representation, after Range and If-Range.
enum RangeDecision: Equatable {
    /// 200 with everything.
    case full
    /// 206 with one range.
    case partial(Range<Int64>)
    /// Several ranges were asked for: the satisfiable ones, in order (the
    /// server answers 200 with everything unless a fault asks for multipart).
    case multiple([Range<Int64>])
    /// 416 with `Content-Range: bytes */size`.
    case unsatisfiable

    /// Decides for a request with the given `method`, `Range` and `If-Range`
    /// values against a representation of `size` bytes with these validators.
    static func decide(
        method: String, range: String?, ifRange: String?, size: Int64, etag: String?, lastModified: Date?
    ) -> RangeDecision {
        // Range is defined for GET only; other methods ignore it (RFC 9110 14.2).
        guard method == "GET", let range, let specs = RangeSpec.parseHeader(range) else { return .full }
        if let ifRange, !ifRangeMatches(ifRange, etag: etag, lastModified: lastModified) { return .full }
        if specs.count > 1 { return .multiple(specs.compactMap { $0.resolved(size: size) }) }
        return specs[0].resolved(size: size).map(RangeDecision.partial) ?? .unsatisfiable
    }

    /// If-Range holds when it is a strong ETag equal to the current strong
    /// ETag, or an HTTP date equal to Last-Modified. A weak ETag on either
    /// side never matches (RFC 9110 13.1.5).
    static func ifRangeMatches(_ value: String, etag: String?, lastModified: Date?) -> Bool {
        let value = value.trimmingSpaces()
        if value.hasPrefix("W/") { return false }
        if value.hasPrefix("\"") {
            guard let etag, !etag.hasPrefix("W/") else { return false }
            return value == etag
        }
        guard let date = HTTPDate.parse(value), let lastModified else { return false }
        return date.timeIntervalSince1970 == lastModified.timeIntervalSince1970.rounded(.down)
    }
}
