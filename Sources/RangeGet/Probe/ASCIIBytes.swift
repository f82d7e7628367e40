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
}
