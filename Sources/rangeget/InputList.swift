// `-i FILE`: lists of files in aria2's input-file style. One file per line
// (LF, CRLF or CR); several whitespace-separated URLs on a line are mirrors
// of one file; `#` starts a comment; `out=NAME` (on the line, or on an
// indented line below it) names the output. A list may come from anyone, so
// an out= name is reduced to a base name inside the target directory, as a
// name a server chose would be: `out=../x` and `out=/etc/x` both save `x`.
import FoundationEssentials
import RangeGet

/// One file of an input list.
struct ListEntry: Equatable {
    var urls: [String]
    /// The out= name, reduced to a safe base name.
    var output: String?
    /// The line the entry starts on (1-based), for messages.
    var line: Int
    /// Says so when `output` is not the out= name as the list gave it.
    var outputNotice: String?
}

enum InputList {
    /// Parses the text of an input file; throws a usage error naming the line of the first problem.
    static func parse(_ text: String) throws(UsageError) -> [ListEntry] {
        var entries: [ListEntry] = []
        // An ASCII line is read as bytes (by Characters, 20,000 lines took
        // 0.1 s); any other by Characters, where a '#' or a space joined to
        // a mark after it (`#️⃣`, a keycap emoji) is not a delimiter.
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        for (index, rawLine) in text.textLines.enumerated() {
            let number = index + 1
            let bytes = rawLine.utf8
            let tokens: [String]
            let continues: Bool
            let ascii = rawLine.utf8AllSatisfy { $0 < 0x80 }
            if ascii {
                let content = bytes[..<(bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.endIndex)]
                tokens = content.split(whereSeparator: isBlank).map { String(decoding: $0, as: UTF8.self) }
                continues = bytes.first.map(isBlank) ?? false
            } else {
                tokens = rawLine.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
                continues = rawLine.first == " " || rawLine.first == "\t"
            }
            guard !tokens.isEmpty else { continue }
            var urls: [String] = []
            var output: String?
            var notice: String?
            for token in tokens {
                if token.hasPrefix("out=") {
                    (output, notice) = try outputName(String(token.dropFirst(4)), line: number)
                } else if isOption(token, ascii: ascii) {
                    throw UsageError("input line \(number): unknown option '\(token)' (only out=NAME is known)")
                } else {
                    try check(url: token, line: number)
                    urls.append(token)
                }
            }
            if urls.isEmpty {
                guard continues, !entries.isEmpty else {
                    throw UsageError("input line \(number): options without a URL line above them")
                }
                if let output {
                    entries[entries.count - 1].output = output
                    entries[entries.count - 1].outputNotice = notice
                }
            } else {
                entries.append(ListEntry(urls: urls, output: output, line: number, outputNotice: notice))
            }
        }
        return entries
    }

    /// True for a token that is an option (`name=value`), not a URL (whose
    /// query may hold `=`). An ASCII token is searched as bytes (as
    /// Characters, the search was a third of the time a 20,000-line list
    /// took to read).
    private static func isOption(_ token: String, ascii: Bool) -> Bool {
        guard ascii else { return token.contains("=") && !token.contains("://") }
        return token.withUTF8Bytes { bytes in
            bytes.contains(UInt8(ascii: "=")) && !bytes.indices.contains { bytes[$0...].starts(with: "://".utf8) }
        }
    }

    /// The safe base name for `out=name` on line `line`, and a notice when it
    /// is not `name` itself; throws when nothing usable is left (`out=..`).
    private static func outputName(_ name: String, line: Int) throws(UsageError) -> (String, String?) {
        guard !name.isEmpty else { throw UsageError("input line \(line): out= needs a name") }
        guard let safe = FileName.sanitize(name) else {
            throw UsageError("input line \(line): out=\(name) is not a usable file name")
        }
        let notice = safe == name ? nil : "input line \(line): out=\(name) is not a plain file name; saving it as \(safe)"
        return (safe, notice)
    }

    /// Refuses what the library would (`RemoteURL`): anything but an absolute
    /// http or https URL with a host; names the list's line when given.
    static func check(url: String, line: Int? = nil) throws(UsageError) {
        if let problem = RemoteURL.problem(url) {
            throw UsageError((line.map { "input line \($0): " } ?? "") + problem)
        }
    }
}

extension String {
    /// The lines of a text file as people save them: split at LF, CRLF or a
    /// lone CR, after a leading byte-order mark. (`"\r\n"` is one Character,
    /// so splitting on `"\n"` alone sees a CRLF file as a single line.)
    /// Split on the bytes: a line break is ASCII, and no other character's
    /// bytes contain one.
    var textLines: [Substring] {
        let text = hasPrefix("\u{FEFF}") ? dropFirst() : self[...]
        let bytes = text.utf8
        var lines: [Substring] = []
        var start = bytes.startIndex
        var index = start
        while index != bytes.endIndex {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") else {
                index = bytes.index(after: index)
                continue
            }
            lines.append(text[start..<index])
            index = bytes.index(after: index)
            if byte == UInt8(ascii: "\r"), index != bytes.endIndex, bytes[index] == UInt8(ascii: "\n") {
                index = bytes.index(after: index)
            }
            start = index
        }
        lines.append(text[start...])
        return lines
    }
}
