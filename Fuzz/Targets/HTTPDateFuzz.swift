// Fuzz target: HTTPDate.seconds (Retry-After dates) on arbitrary bytes. Never
// trap (a year of 99999999999 did, in `Int32(year - 1900)`); accept only an
// IMF-fixdate whose every field fits (an independent reading decides), and
// then give a finite time between the years 0000 and 9999.

private let monthNames: Set<Substring> = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

/// `count` ASCII digits, as a number.
private func digits(_ text: Substring, _ count: Int) -> Int? {
    guard text.utf8.count == count, text.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
    var value = 0
    for byte in text.utf8 { value = value * 10 + Int(byte - 48) }
    return value
}

/// RFC 9110 5.6.7 IMF-fixdate, fields as the parser means to take them
/// (the weekday is not checked; runs of spaces separate like one).
private func reference(_ text: String) -> Bool {
    let parts = text.split(separator: " ")
    guard parts.count == 6, parts[5] == "GMT", let day = digits(parts[1], 2), (1...31).contains(day),
          monthNames.contains(parts[2]), digits(parts[3], 4) != nil else { return false }
    let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
    guard clock.count == 3, let hour = digits(clock[0], 2), let minute = digits(clock[1], 2),
          let second = digits(clock[2], 2) else { return false }
    return hour <= 23 && minute <= 59 && second <= 60
}

@_cdecl("LLVMFuzzerTestOneInput")
public func httpDateFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    let seconds = HTTPDate.seconds(text)
    require((seconds != nil) == reference(text), "accepted=\(seconds != nil) for \(text.debugDescription)")
    if let seconds {
        // 0000-01-01 to 9999-12-31 23:59:60, plus the day timegm carries a 31st of a short month into.
        require(seconds.isFinite && seconds >= -62_167_219_200 && seconds <= 253_402_300_860 + 86_400,
                "\(seconds) from \(text.debugDescription)")
    }
    return 0
}
