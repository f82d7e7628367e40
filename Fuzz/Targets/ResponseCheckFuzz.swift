// Fuzz target: a response head as libcurl would hand it over, line by line,
// then the check made before the first byte of a body is written. A body may
// be accepted for a ranged request only if it is a 206 whose Content-Range is
// exactly the request and the known size, uncoded, not multipart, with the
// same validator (invariant 1: no unvalidated byte).

@_cdecl("LLVMFuzzerTestOneInput")
public func responseCheckFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    guard bytes.count >= 17 else { return 0 }
    // 8 bytes choose the size, 8 the requested range, 1 the expectation.
    let sizeSeed = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    let rangeSeed = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    let size = Int64(sizeSeed % (1 << 62)) + 2
    let first = Int64(rangeSeed % UInt64(size - 1))
    let last = first + Int64((rangeSeed >> 7) % UInt64(size - first))
    let requested = ByteRange(first, last + 1)
    let expected = Expectation(size: size, etag: bytes[16] & 1 == 0 ? "\"v1\"" : nil,
                               lastModified: bytes[16] & 2 == 0 ? "Mon, 01 Jan 2024 00:00:00 GMT" : nil)
    let text = String(decoding: bytes[17...], as: UTF8.self)
        .replacingOccurrences(of: "{RANGE}", with: "bytes \(first)-\(last)/\(size)")
    let collector = HeaderCollector()
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) { collector.consume(String(line) + "\n") }
    let head = collector.head
    if let length = head.contentLength { require(length >= 0, "negative length") }
    if let wait = head.retryAfter { require(wait >= 0, "negative Retry-After") }
    guard ResponseCheck.check(head, requested: requested, expected: expected) == nil else { return 0 }
    let context = "\(requested) of \(size): \(text.debugDescription)"
    require(head.status == 206, "accepted status \(head.status): \(context)")
    let contentRange = head["content-range"].flatMap(ContentRange.init)
    require(contentRange?.range == requested && contentRange?.total == size, "accepted Content-Range: \(context)")
    require(head.contentEncoding == nil, "accepted a coding: \(context)")
    require(head["content-type"]?.lowercased().contains("multipart/byteranges") != true, "accepted multipart: \(context)")
    if let want = expected.etag, let got = head.etag { require(got == want, "accepted another ETag: \(context)") }
    if let want = expected.lastModified, let got = head.lastModified {
        require(got == want, "accepted another Last-Modified: \(context)")
    }
    return 0
}
