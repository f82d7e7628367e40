// Fuzz target: a 503 whose Retry-After is arbitrary bytes (delta-seconds of
// any length, dates of any year, more lines after it). The wait is nil or
// 0 to 300 s, and the rejection that carries it can be described (the
// description trapped on 2^63 seconds, converting a Double to Int).

@_cdecl("LLVMFuzzerTestOneInput")
public func retryAfterFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let collector = HeaderCollector()
    collector.consume("HTTP/1.1 503 Service Unavailable\r\n")
    for line in ("Retry-After: " + text).split(separator: "\n", omittingEmptySubsequences: false) {
        collector.consume(String(line) + "\n")
    }
    collector.consume("\r\n")
    let head = collector.head
    if let wait = head.retryAfter {
        require(wait >= 0 && wait <= ResponseHead.longestRetryAfter, "wait \(wait) from \(text.debugDescription)")
    }
    let rejection = ResponseCheck.check(head, requested: ByteRange(0, 1), expected: Expectation(size: 1, etag: nil, lastModified: nil))
    let description = rejection?.description ?? ""
    if head.status == 503 {
        require(description.hasPrefix("HTTP 503"), "\(description.debugDescription) from \(text.debugDescription)")
    }
    return 0
}
