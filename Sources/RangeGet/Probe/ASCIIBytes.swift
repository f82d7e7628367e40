// The byte tests the hot readers of text share: a response head is read as
// bytes (HeaderCollector, ContentRange), not as Characters, because every
// response of every transfer passes through it; names and event text
// (FileName, OutgoingText) skip their Unicode work when they are printable ASCII.

extension UInt8 {
    /// SP, HTAB, CR, LF, VT or FF.
    var isASCIIWhitespace: Bool { self == 0x20 || (0x09...0x0D).contains(self) }

    /// A character a terminal shows as itself: 0x20 (space) to 0x7E (`~`).
    var isPrintableASCII: Bool { (0x20...0x7E).contains(self) }

    /// 0 to 9.
    var isASCIIDigit: Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) }

    /// A to Z, a to z, 0 to 9.
    var isASCIIAlphanumeric: Bool { isASCIIDigit || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self | 0x20) }

    /// 0 to 9, a to f, A to F.
    var isASCIIHexDigit: Bool { isASCIIDigit || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self | 0x20) }

    /// A to Z as a to z; any other byte as it is.
    var asciiLowercased: UInt8 { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self) ? self | 0x20 : self }
}

extension Collection<UInt8> {
    /// The bytes without ASCII white space at either end.
    func trimmingASCIIWhitespace() -> SubSequence {
        guard let first = firstIndex(where: { !$0.isASCIIWhitespace }) else { return self[endIndex...] }
        var last = first
        var index = first
        while index != endIndex {
            if !self[index].isASCIIWhitespace { last = index }
            formIndex(after: &index)
        }
        return self[first...last]
    }

    /// True when the bytes start with `prefix` (lowercase ASCII) in any ASCII case.
    func startsIgnoringASCIICase(_ prefix: String.UTF8View) -> Bool {
        starts(with: prefix) { $0.asciiLowercased == $1 }
    }
}

extension StringProtocol {
    /// Runs `body` over the string's UTF-8 bytes, in its own storage where
    /// it has one (the scans every event's URLs pass through cost a tenth of
    /// a walk through the `utf8` view), else in a copy.
    package func withUTF8Bytes<Result>(_ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        utf8.withContiguousStorageIfAvailable(body) ?? Array(utf8).withUnsafeBufferPointer(body)
    }

    /// True when every UTF-8 byte passes `test`.
    package func utf8AllSatisfy(_ test: (UInt8) -> Bool) -> Bool {
        withUTF8Bytes { $0.allSatisfy(test) }
    }

    /// True when the string starts with `prefix` (lowercase ASCII) in any ASCII case.
    func hasPrefixIgnoringASCIICase(_ prefix: String) -> Bool {
        withUTF8Bytes { $0.startsIgnoringASCIICase(prefix.utf8) }
    }

    /// True when the UTF-8 bytes hold `byte` (as `utf8AllSatisfy`).
    func utf8Contains(_ byte: UInt8) -> Bool {
        !utf8AllSatisfy { $0 != byte }
    }
}
