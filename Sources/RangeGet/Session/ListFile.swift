// `-i FILE`: lists of files in aria2's input-file style. One file per line
// (LF, CRLF or CR); several whitespace-separated URLs on a line are mirrors
// of one file; `#` starts a comment; `out=NAME` (on the line, or on an
// indented line below it) names the output. A list may come from anyone, so
// an out= name is reduced to a base name inside the target directory, as a
// name a server chose would be: `out=../x` and `out=/etc/x` both save `x`.
import FoundationEssentials

/// A list of files as people write it (aria2's input-file style), read into
/// the entries of a ``DownloadList`` and the lines that could not be read.
///
/// One file per line (LF, CRLF or CR). Several whitespace-separated URLs on
/// a line are mirrors of one file. `#` starts a comment; blank lines are
/// skipped. `out=NAME`, on the line or on an indented line below it, names
/// the output, reduced to a base name inside the list's directory (as a name
/// a server chose would be: `out=../x` and `out=/etc/x` both save `x`):
///
///     https://a.example/big.iso https://b.example/big.iso out=big.iso
///     https://example.org/tools.tar
///       out=tools-1.2.tar
///
/// A bad line costs only its own entry; the others stay.
public struct ListFile: Sendable, Equatable {
    /// The files of the good lines, in line order.
    public var entries: [DownloadList.Entry] = []
    /// Every line that could not be read, in line order.
    public var problems: [DownloadList.Problem] = []

    /// Reads the text of a list, every line of it.
    public init(parsing text: String) {
        self = ListFileReader.read(text)
    }

    /// An empty list.
    package init() {}
}

/// A line of a list that could not be read: why, in one line naming it.
package struct ListLineError: Error, CustomStringConvertible {
    package let message: String
    init(_ message: String) { self.message = message }
    package var description: String { message }
}

package enum ListFileReader {
    /// Reads the text of an input file, every line of it.
    static func read(_ text: String) -> ListFile {
        // Read over the text's own bytes: through Substrings and their UTF-8
        // views, 1000 lines took 13M instructions, a tenth of the fetching of
        // 1000 small files, before the first one started.
        var text = text
        text.makeContiguousUTF8()
        return text.utf8.withContiguousStorageIfAvailable(read(bytes:))!
    }

    /// Reads each line of `bytes` in turn into the entries, or the problems.
    private static func read(bytes: UnsafeBufferPointer<UInt8>) -> ListFile {
        var reading = ListFile()
        // True while the lines read belong to an entry left out: its
        // indented option lines go with it.
        var skipping = false
        for (index, line) in textLineRanges(bytes).enumerated() {
            let number = index + 1
            do {
                try read(
                    UnsafeBufferPointer(rebasing: bytes[line]), number: number, into: &reading.entries,
                    afterSkipped: &skipping)
            } catch {
                reading.problems.append(DownloadList.Problem(line: number, message: error.message))
                skipping = true
            }
        }
        return reading
    }

    /// Reads line `number` (its bytes, without the line break): a new entry,
    /// an `out=` for the entry above it, or nothing. `skipping`: the entry
    /// above was left out, so an option line is read for its problems only;
    /// a new entry ends it.
    private static func read(
        _ line: UnsafeBufferPointer<UInt8>, number: Int,
        into entries: inout [DownloadList.Entry], afterSkipped skipping: inout Bool
    ) throws(ListLineError) {
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        // An ASCII line is split as bytes; any other by Characters, where a
        // '#' or a space joined to a mark after it (`#️⃣`, a keycap emoji)
        // is not a delimiter.
        let ascii = line.allSatisfy { $0 < 0x80 }
        let tokens: [String]
        let continues: Bool
        if ascii {
            let content = line[..<(line.firstIndex(of: UInt8(ascii: "#")) ?? line.endIndex)]
            tokens = content.split(whereSeparator: isBlank).map { String(decoding: $0, as: UTF8.self) }
            continues = line.first.map(isBlank) ?? false
        } else {
            let text = String(decoding: line, as: UTF8.self)
            tokens = text.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            continues = text.first == " " || text.first == "\t"
        }
        guard !tokens.isEmpty else { return }
        if !continues { skipping = false }
        var urls: [String] = []
        var output: String?
        var notice: String?
        do throws(ListLineError) {
            for token in tokens {
                if token.hasPrefix("out=") {
                    (output, notice) = try outputName(String(token.dropFirst(4)), line: number)
                } else if isOption(token, ascii: ascii) {
                    throw ListLineError("input line \(number): unknown option '\(token)' (only out=NAME is known)")
                } else {
                    try check(url: token, line: number)
                    urls.append(token)
                }
            }
        } catch {
            // A bad option line leaves out the file it names: not under the name asked for.
            let optionsOnly = tokens.allSatisfy { $0.hasPrefix("out=") || isOption($0, ascii: ascii) }
            guard continues, optionsOnly, !skipping, let owner = entries.popLast() else { throw error }
            throw ListLineError(error.message + "; the file of input line \(owner.line) is left out")
        }
        guard urls.isEmpty else {
            entries.append(
                DownloadList.Entry(urls: urls, output: output, line: number, outputNotice: notice, urlsChecked: true))
            return
        }
        if skipping { return }
        // An indented line of options belongs to the entry above it.
        guard continues, !entries.isEmpty else {
            throw ListLineError("input line \(number): options without a URL line above them")
        }
        if let output {
            entries[entries.count - 1].output = output
            entries[entries.count - 1].outputNotice = notice
        }
    }

    /// True for a token that is an option (`name=value`), not a URL (whose
    /// query may hold `=`). An ASCII token is searched as bytes (as
    /// Characters, the search was a third of the time a 20,000-line list
    /// took to read).
    private static func isOption(_ token: String, ascii: Bool) -> Bool {
        guard ascii else { return token.contains("=") && !token.contains("://") }
        return token.withUTF8Bytes { bytes in
            let scheme = (UInt8(ascii: ":"), UInt8(ascii: "/"))
            let hasSchemeSeparator =
                bytes.count >= 3
                && (0...(bytes.count - 3)).contains { at in
                    bytes[at] == scheme.0 && bytes[at + 1] == scheme.1 && bytes[at + 2] == scheme.1
                }
            return bytes.contains(UInt8(ascii: "=")) && !hasSchemeSeparator
        }
    }

    /// The safe base name for `out=name` on line `line`, and a notice when it
    /// is not `name` itself; throws when nothing usable is left (`out=..`).
    package static func outputName(_ name: String, line: Int) throws(ListLineError) -> (String, String?) {
        guard !name.isEmpty else { throw ListLineError("input line \(line): out= needs a name") }
        guard let safe = FileName.sanitize(name) else {
            throw ListLineError("input line \(line): out=\(name) is not a usable file name")
        }
        let notice =
            safe == name ? nil : "input line \(line): out=\(name) is not a plain file name; saving it as \(safe)"
        return (safe, notice)
    }

    /// Refuses what the library would (`RemoteURL`): anything but an absolute
    /// http or https URL with a host; names the list's line.
    package static func check(url: String, line: Int) throws(ListLineError) {
        if let problem = RemoteURL.problem(url) {
            throw ListLineError("input line \(line): " + problem)
        }
    }
}

extension String {
    /// The lines of a text file as people save them (`textLineRanges`).
    package var textLines: [Substring] {
        var text = self
        text.makeContiguousUTF8()
        let ranges = text.utf8.withContiguousStorageIfAvailable(textLineRanges)!
        let start = text.utf8.startIndex
        return ranges.map {
            text[text.utf8.index(start, offsetBy: $0.lowerBound)..<text.utf8.index(start, offsetBy: $0.upperBound)]
        }
    }
}

/// Where the lines of a text file's bytes are, as people save them: split
/// at LF, CRLF or a lone CR, after a leading byte-order mark; the last line
/// is what follows the last break (empty after a final one). Split on the
/// bytes: a line break is ASCII, and no other character's bytes contain
/// one. (`"\r\n"` is one Character, so splitting Characters on `"\n"` alone
/// sees a CRLF file as a single line.)
package func textLineRanges(_ bytes: UnsafeBufferPointer<UInt8>) -> [Range<Int>] {
    let (lineFeed, carriageReturn) = (UInt8(ascii: "\n"), UInt8(ascii: "\r"))
    var lines: [Range<Int>] = []
    var start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    var index = start
    while index != bytes.count {
        let byte = bytes[index]
        guard byte == lineFeed || byte == carriageReturn else {
            index += 1
            continue
        }
        lines.append(start..<index)
        index += 1
        if byte == carriageReturn, index != bytes.count, bytes[index] == lineFeed { index += 1 }
        start = index
    }
    lines.append(start..<bytes.count)
    return lines
}
