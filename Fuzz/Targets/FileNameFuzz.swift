// Fuzz target: file names from server input. Whatever the bytes, the name
// rangeget saves under is a safe base name (RELIABILITY.md 16).

private func requireSafe(_ name: String, _ input: String) {
    // Bytes, not Characters: a combining or prepended mark hides `/` and `.` from String.contains.
    let bytes = Array(name.utf8)
    require(!bytes.isEmpty, "empty name from \(input.debugDescription)")
    require(!bytes.contains(UInt8(ascii: "/")) && !bytes.contains(UInt8(ascii: "\\")),
            "separator in \(name.debugDescription) from \(input.debugDescription)")
    require(bytes.first != UInt8(ascii: "."), "leading dot in \(name.debugDescription) from \(input.debugDescription)")
    require(!name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value) },
            "control character in \(name.debugDescription) from \(input.debugDescription)")
    require(name.utf8.count <= 255, "name too long from \(input.debugDescription)")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fileNameFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let text = String(decoding: bytes, as: UTF8.self)
    if let name = FileName.sanitize(text) {
        requireSafe(name, text)
        require(FileName.sanitize(name) == name, "sanitize is not idempotent on \(text.debugDescription)")
    }
    // The first line is a Content-Disposition value, the rest a URL path.
    let parts = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
    let disposition = parts.first.map(String.init)
    let path = parts.count > 1 ? String(parts[1]) : text
    let encoded = path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "x"
    requireSafe(FileName.choose(url: "http://h/" + encoded, contentDisposition: disposition), text)
    requireSafe(FileName.choose(url: "http://h/" + path, contentDisposition: nil), text)
    return 0
}
