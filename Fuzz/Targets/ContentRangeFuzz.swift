// Fuzz target: ContentRange(_:) on arbitrary bytes. Never crash; accept only
// what the RFC 9110 grammar allows (an independent reference decides); what is
// accepted is consistent and survives a round trip.

private func reference(_ value: String) -> (range: ByteRange?, total: Int64?)? {
    var text = Array(value)
    while let first = text.first, first.isWhitespace { text.removeFirst() }
    while let last = text.last, last.isWhitespace { text.removeLast() }
    guard text.count >= 6, String(text[0..<5]).lowercased() == "bytes", text[5] == " " else { return nil }
    var rest = Array(text[6...])
    while let first = rest.first, first.isWhitespace { rest.removeFirst() }
    func number(_ characters: ArraySlice<Character>) -> Int64? {
        guard !characters.isEmpty, characters.count <= 19,
              characters.allSatisfy({ ("0"..."9").contains($0) && $0.unicodeScalars.count == 1 }) else { return nil }
        return Int64(String(characters))
    }
    guard let slash = rest.firstIndex(of: "/"), rest[(slash + 1)...].firstIndex(of: "/") == nil else { return nil }
    let left = rest[..<slash]
    let right = rest[(slash + 1)...]
    let total: Int64?
    if right.count == 1 && right.first == "*" {
        total = nil
    } else {
        guard let value = number(right) else { return nil }
        total = value
    }
    if left.count == 1 && left.first == "*" {
        guard let total else { return nil }
        return (nil, total)
    }
    guard let dash = left.firstIndex(of: "-"), left[(dash + 1)...].firstIndex(of: "-") == nil,
          let first = number(left[..<dash]), let last = number(left[(dash + 1)...]),
          first <= last, last < Int64.max else { return nil }
    if let total, last >= total { return nil }
    return (ByteRange(first, last + 1), total)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func contentRangeFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let value = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let parsed = ContentRange(value)
    let expected = reference(value)
    require((parsed == nil) == (expected == nil), "accepted=\(parsed != nil) for \(value.debugDescription)")
    guard let parsed else { return 0 }
    require(parsed.range == expected?.range && parsed.total == expected?.total, value.debugDescription)
    if let range = parsed.range {
        require(range.start < range.end, "empty range from \(value.debugDescription)")
        if let total = parsed.total { require(range.end <= total, "range past total: \(value.debugDescription)") }
        let again = ContentRange("bytes \(range.start)-\(range.end - 1)/\(parsed.total.map(String.init) ?? "*")")
        require(again == parsed, "round trip of \(value.debugDescription)")
    }
    return 0
}
