// Issue 12, the executable's pure parts, tested in-process: the formatters
// of the progress line and summaries take sizes and offsets up to Int64.max
// and any rate or duration without trapping (item 3), text for the terminal
// is escaped (item 15), and list and checksum files are read by line whatever
// the line ending (item 8). Seeded, so a failure replays.
import Foundation
import RangeGet
import RangeServer
import XCTest

@testable import rangeget

final class CommandLineFormattingTests: XCTestCase {
    private let sizes: [Int64] = [
        0, 1, 59, 60, 61, 1023, 1024, (1 << 31) - 1, 1 << 32, 1 << 40, 1 << 50, 1 << 60, (1 << 62) + 1,
        9_000_000_000_000_000_000, Int64.max / 60, Int64.max / 2 + 1, Int64.max - 59, Int64.max - 1, Int64.max
    ]

    private func size(_ random: inout SplitMix64) -> Int64 {
        random.next() % 2 == 0
            ? sizes[Int(random.next() % UInt64(sizes.count))] : Int64.random(in: 0...Int64.max, using: &random)
    }

    /// The map's cells computed `total * cell`, which trapped for a file the
    /// server said was 9e18 bytes long. Each cell must lie inside the file,
    /// and the cells must reach from byte 0 to the end, in order.
    func testMapCellsCoverFilesUpToInt64MaxInOrder() {
        var random = SplitMix64(seed: 12_31)
        for _ in 0..<20_000 {
            let total = max(1, size(&random))
            let cells = Int.random(in: 10...60, using: &random)
            var previous = ByteRange(0, 0)
            for cell in 0..<cells {
                let slice = ProgressDisplay.slice(cell, of: cells, total: total)
                XCTAssertTrue(
                    slice.start >= 0 && slice.end <= total && slice.count >= 1,
                    "cell \(cell)/\(cells) of \(total): \(slice)")
                XCTAssertGreaterThanOrEqual(slice.start, previous.start, "in order")
                if total >= Int64(cells) { XCTAssertEqual(slice.start, previous.end, "adjacent cells for \(total)") }
                previous = slice
            }
            XCTAssertEqual(previous.end, total, "the last cell ends the file")
            XCTAssertEqual(ProgressDisplay.slice(0, of: cells, total: total).start, 0)
        }
        XCTAssertEqual(
            ProgressDisplay.slice(30, of: 60, total: Int64.max),
            ByteRange(Int64.max / 2, Int64.max / 60 * 31 + 7 * 31 / 60))
    }

    func testByteCountsFormatUpToInt64Max() {
        var random = SplitMix64(seed: 12_32)
        for _ in 0..<20_000 {
            let bytes = random.next() % 4 == 0 ? -size(&random) : size(&random)
            let text = ByteCount.format(bytes)
            XCTAssertFalse(text.isEmpty)
            XCTAssertLessThanOrEqual(text.count, 24, text)
        }
        XCTAssertEqual(ByteCount.format(Int64.max), "8.0 EiB")
        XCTAssertEqual(ByteCount.format(9_000_000_000_000_000_000), "7.8 EiB")
        XCTAssertEqual(ByteCount.format(1 << 50), "1.0 PiB")
        XCTAssertEqual(ByteCount.format(1023), "1023 B")
        XCTAssertEqual(ByteCount.parse("5000000T"), 5_000_000 << 40, "parsed, then refused by the option's bound")
        XCTAssertNil(ByteCount.parse("9000000T"))
        XCTAssertNil(ByteCount.parse(String(repeating: "9", count: 400)))
    }

    /// An ETA of 10^19 seconds trapped in `Int(seconds.rounded())`.
    func testDurationsAndDecimalsFormatWhateverTheValue() {
        var random = SplitMix64(seed: 12_33)
        let specials: [Double] = [
            0, -0.0, 0.04, 0.05, 59.5, 3599.5, rangeget.DurationText.longest, rangeget.DurationText.longest + 1, 9.2e18,
            9.3e18,
            1e19, 1e300, -1e19, .infinity, -.infinity, .nan, .greatestFiniteMagnitude, -.greatestFiniteMagnitude
        ]
        for index in 0..<20_000 {
            let value =
                index < specials.count
                ? specials[index]
                : Double(bitPattern: random.next()) // every exponent, NaNs and infinities included
            XCTAssertFalse(rangeget.DurationText.format(value).isEmpty)
            XCTAssertFalse(String(format1: value).isEmpty)
            _ = Int64(saturating: value)
        }
        XCTAssertEqual(rangeget.DurationText.format(1e19), "> 100 days")
        XCTAssertEqual(rangeget.DurationText.format(.infinity), "--:--")
        XCTAssertEqual(rangeget.DurationText.format(3723), "1:02:03")
        XCTAssertEqual(rangeget.DurationText.format(rangeget.DurationText.longest), "2400:00:00")
        XCTAssertEqual(String(format1: 12.345), "12.3")
        XCTAssertEqual(String(format1: -1.5), "-1.5")
        XCTAssertEqual(String(format1: -0.01), "0.0")
        XCTAssertEqual(String(format1: 1e19), "9223372036854775807")
        XCTAssertEqual(String(format1: .nan), "-")
        XCTAssertEqual(Int64(saturating: 1e19), .max)
        XCTAssertEqual(Int64(saturating: -1e19), .min)
        XCTAssertEqual(Int64(saturating: .nan), 0)
        XCTAssertEqual(Int64(saturating: 0x1p63 - 1024), Int64.max - 1023)
    }

    func testSumsOverAListSaturate() {
        var random = SplitMix64(seed: 12_34)
        for _ in 0..<20_000 {
            let a = size(&random)
            let b = size(&random)
            let sum = a.saturatingAdding(b)
            XCTAssertEqual(sum, a > Int64.max - b ? Int64.max : a + b)
        }
        XCTAssertEqual(Int64.min.saturatingAdding(-1), .min)
    }

    /// Server text reached the terminal raw (item 15); JSON must stay valid.
    func testTerminalTextEscapesEveryActiveCharacterAndKeepsJSONValid() throws {
        var random = SplitMix64(seed: 12_35)
        let alphabet: [String] = [
            "a", "é", "\u{1B}", "[2J", "\u{07}", "\u{9B}", "\u{7F}", "\r", "\n", "\r\n", "\t", "\0",
            "\u{202E}", "\u{2066}", "\u{2028}", "\u{85}", "\u{301}", "\\", "\"", "👩‍👩‍👧", "\u{FEFF}"
        ]
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...12, using: &random)).map { _ in
                alphabet[Int(random.next() % UInt64(alphabet.count))]
            }
            .joined()
            let escaped = TerminalText.escaped(text)
            XCTAssertFalse(
                escaped.unicodeScalars.contains {
                    $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
                        || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value)
                        || $0.value == 0x2028
                },
                escaped.debugDescription)
            XCTAssertEqual(TerminalText.escaped(escaped), escaped, "escaping twice changes nothing")
            let json = JSONSummary.encode(["text": text])
            XCTAssertFalse(
                json.unicodeScalars.contains {
                    $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
                        || (0x202A...0x202E).contains($0.value)
                }, json.debugDescription)
            let decoded = try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
            XCTAssertEqual(decoded["text"], text, "the same JSON value: \(json.debugDescription)")
        }
        XCTAssertEqual(TerminalText.escaped("a\u{1B}[2Jb\r\n"), "a\\u{1B}[2Jb\\u{D}\\u{A}")
        XCTAssertEqual(TerminalText.table([["A", "B\u{1B}"], ["long\u{07}", "x"]]), "A         B\\u{1B}\nlong\\u{7} x")
    }

    /// Issue 18: a cell as wide as its column got a space more than the
    /// others, so the `status` and `bench` rows after it were shifted by one.
    func testTableColumnsStartAtTheSameOffsetInEveryRow() {
        let table = TerminalText.table([
            ["OUTPUT", "DONE", "URL"], ["/nonexistent", "-", "-"], ["a", "50.0%", "http://h/a"]
        ])
        XCTAssertEqual(
            table,
            """
            OUTPUT       DONE  URL
            /nonexistent -     -
            a            50.0% http://h/a
            """)
    }

    /// A CRLF file was one line (item 8): `"\r\n"` is a single Character.
    func testListsAndChecksumFilesSplitAtEveryLineEnding() throws {
        XCTAssertEqual("a\r\nb\nc\rd\r\n".textLines, ["a", "b", "c", "d", ""])
        XCTAssertEqual("\u{FEFF}a\r\n\r\nb".textLines, ["a", "", "b"])
        // Read as bytes: characters of several bytes, a break right after one, a CR then LF apart.
        XCTAssertEqual("é\nü\u{301}\r\r\n日本\n\r".textLines, ["é", "ü\u{301}", "", "日本", "", ""])
        XCTAssertEqual("".textLines, [""])
        let spaced = ListFile(parsing: "\thttp://h/é  http://m/é\t# a comment, out=z\n \t out=ü.bin # too\n#\n").entries
        XCTAssertEqual(spaced.map(\.urls), [["http://h/é", "http://m/é"]])
        XCTAssertEqual(spaced.map(\.output), ["ü.bin"])
        // A '#' or a space with a mark joined to it is part of its Character, not a delimiter.
        let joined = ListFile(parsing: "http://h/a out=#\u{FE0F}\u{20E3}.txt\nhttp://h/b out=x#\u{301}y\n").entries
        XCTAssertEqual(joined.map(\.output), ["#\u{FE0F}\u{20E3}.txt", "x#\u{301}y"])
        let entries = ListFile(parsing: "http://h/a\r\n  out=x.bin\r\n# c\r\nhttp://h/b out=../y\r\n").entries
        XCTAssertEqual(entries.map(\.urls), [["http://h/a"], ["http://h/b"]])
        XCTAssertEqual(entries.map(\.output), ["x.bin", "y"])
        XCTAssertEqual(entries.map(\.line), [1, 4])
        XCTAssertEqual(entries[1].outputNotice, "input line 4: out=../y is not a plain file name; saving it as y")
        // A token with '=' is an option unless it is a URL (whose query may hold one), on ASCII lines and others.
        let queries = ListFile(parsing: "http://h/a?x=1 http://m/a?x=1\nhttp://h/é?q=ü\n").entries
        XCTAssertEqual(queries.map(\.urls), [["http://h/a?x=1", "http://m/a?x=1"], ["http://h/é?q=ü"]])
        for line in ["http://h/a dir=x\n", "http://h/é dir=ü\n", "http://h/a x=\n"] {
            let reading = ListFile(parsing: line)
            XCTAssertEqual(reading.entries, [], line)
            XCTAssertTrue(
                reading.problems.first?.message.contains("input line 1: unknown option") == true, "\(reading.problems)")
        }
        let digest = String(repeating: "ab", count: 32)
        let sums = try Checksum.list(parsing: "\(digest)  a.bin\r\n\r\n\(digest.uppercased()) *./b.bin\r\n")
        XCTAssertEqual(sums.keys.sorted(), ["a.bin", "b.bin"])
        XCTAssertThrowsError(try Checksum.list(parsing: "\(digest)  a\r\nnot a sum\r\n")) { error in
            XCTAssertTrue("\(error)".contains("line 2"), "\(error)")
        }
        XCTAssertThrowsError(try Checksum.list(parsing: "\(digest)  a\n\(String(repeating: "cd", count: 32))  a\n"))
    }

    /// A list's progress line (issues 15 and 37): the bytes of the whole
    /// run, never dropping when a file ends; the list's size exact once every
    /// file has told its size, and until then a lower bound, each file of
    /// unknown size counted as empty, with the number of those: an ETA that
    /// is a bound, never a guess (the mean size told made six large files
    /// after twenty small ones read `ETA 0:05` for 17 s).
    func testAListsProgressCoversTheWholeList() {
        let kib: Int64 = 1024
        var list = ListProgress(files: 20)
        XCTAssertNil(list.figures().progress.totalBytes, "no size told yet")
        XCTAssertEqual(list.figures().unknownSizes, 20)
        func file(_ done: Int64, of size: Int64?, connections: Int = 1) -> DownloadProgress {
            DownloadProgress(bytesDone: done, totalBytes: size, bytesPerSecond: 0, activeConnections: connections)
        }
        // Four files ended (300 KiB each), four run halfway, twelve wait.
        for index in 0..<4 {
            list.update(index, file(300 * kib, of: 300 * kib))
            let before = list.figures().progress.bytesDone
            list.end(index)
            XCTAssertEqual(list.figures().progress.bytesDone, before, "an ended file's bytes stay")
        }
        for index in 4..<8 { list.update(index, file(150 * kib, of: 300 * kib, connections: 2)) }
        var (progress, unknown) = list.figures()
        XCTAssertEqual(progress.bytesDone, 1800 * kib)
        XCTAssertEqual(progress.totalBytes, 2400 * kib, "at least the sizes told")
        XCTAssertEqual(unknown, 12)
        XCTAssertEqual(progress.activeConnections, 8)
        progress.bytesPerSecond = 300 * 1024
        XCTAssertEqual(progress.secondsLeft ?? -1, 2, accuracy: 1e-9, "at least 600 KiB to go")
        // A running file whose size is not known yet counts as unknown, and adds its bytes.
        list.update(8, file(10, of: nil))
        (progress, unknown) = list.figures()
        XCTAssertEqual(progress.totalBytes, 2400 * kib + 10)
        XCTAssertEqual(unknown, 12)
        // Eleven more started and sized, one started that has told nothing yet (a lane took it).
        list.update(8, file(10, of: 100 * kib))
        for index in 9..<19 { list.update(index, file(0, of: 300 * kib)) }
        (progress, unknown) = list.figures()
        XCTAssertEqual(unknown, 1)
        XCTAssertEqual(progress.totalBytes, (1200 + 1200 + 100 + 3000) * kib)
        // Every file has told its size: the total is exact. One that ended without telling any drops out.
        list.end(19)
        (progress, unknown) = list.figures()
        XCTAssertEqual(progress.totalBytes, (1200 + 1200 + 100 + 3000) * kib)
        XCTAssertEqual(unknown, 0)
        // Sizes are the servers' word: the sums saturate, never trap.
        var huge = ListProgress(files: 1_000_002)
        huge.update(0, file(.max, of: .max))
        huge.update(1, file(.max - 1, of: .max))
        XCTAssertEqual(huge.figures().progress.totalBytes, .max)
        XCTAssertEqual(huge.figures().progress.bytesDone, .max)
    }

    /// The list is read over its bytes in one pass (issue 15): it reads
    /// every list as a plain reading of its rules does, by Characters and
    /// `textLines`, the way it was read before. Random lists of URLs (ASCII
    /// and not), `out=` names, unknown options, comments, marks joined to a
    /// '#' or a blank, indented lines, every line ending and a byte-order mark.
    func testTheByteReaderOfListsAgreesWithAPlainReading() {
        var random = Draws(seed: 15)
        let urls = ["http://h/a", "https://m/b?x=1", "http://h/é", "http://h/日本?q=ü", "http://h/a#x"]
        let outs = ["out=x.bin", "out=../y", "out=ü.txt", "out=#\u{FE0F}\u{20E3}", "out=x#\u{301}y"]
        let comments = ["# c", "#", "#out=z", "# é"]
        // Each drawn now and then: what the rules refuse, or a blank or '#' that a mark joins.
        let odd = [
            "out=", "out=..", "dir=x", "é", "ftp://h/f", "http://", "a=http://h/z", "\u{301}", "\u{FEFF}",
            " \u{301}", "#\u{301}", "x=\u{200D}", "é=\u{301}x", "é=:/\u{301}/"
        ]
        let blanks = [" ", "\t", "  ", " \t"]
        let breaks = ["\n", "\r\n", "\r", "\n\n"]
        var (accepted, lists) = (0, 3000)
        for _ in 0..<lists {
            var text = random.chance(0.1) ? "\u{FEFF}" : ""
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                var tokens: [String]
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<6:
                    tokens = (0..<Int.random(in: 1...3, using: &random)).map { _ in random.pick(urls) }
                    if random.chance(0.4) { tokens.append(random.pick(outs)) }
                case 6..<8:
                    tokens = [random.pick(outs)]
                    text += random.pick(blanks) // an option line, indented
                case 8: tokens = []
                default: tokens = [random.pick(comments)]
                }
                if random.chance(0.2) { tokens.append(random.pick(comments)) }
                if random.chance(0.04) {
                    tokens.insert(random.pick(odd), at: Int.random(in: 0...tokens.count, using: &random))
                }
                text += tokens.map { $0 + random.pick(blanks) }.joined().dropLast()
                text += random.pick(breaks)
            }
            if random.chance(0.5) { text.removeLast() }
            let read = ListFile(parsing: text)
            XCTAssertEqual(read, Self.plainReading(text), "\(text.debugDescription)")
            if read.problems.isEmpty, !read.entries.isEmpty { accepted += 1 }
        }
        // Both sides of the rules are drawn: lists read whole, and lists with bad lines.
        XCTAssertGreaterThan(accepted, lists / 4)
        XCTAssertLessThan(accepted, lists * 9 / 10)
    }

    /// True when `text` holds `part`, compared as Characters (as the
    /// `rangeget` module, without all of Foundation, compares them).
    private static func holds(_ text: String, _ part: String) -> Bool {
        let (characters, wanted) = (Array(text), Array(part))
        guard characters.count >= wanted.count else { return false }
        return (0...(characters.count - wanted.count)).contains { Array(characters[$0..<$0 + wanted.count]) == wanted }
    }

    /// The rules of an input list, read by Characters over `textLines`: a
    /// bad line is a problem and leaves out its entry (a bad option line,
    /// the entry it belongs to), and the option lines below a left-out entry.
    private static func plainReading(_ text: String) -> ListFile {
        var reading = ListFile()
        var skipping = false
        for (index, line) in text.textLines.enumerated() {
            let number = index + 1
            let tokens = line.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            if tokens.isEmpty { continue }
            let indented = line.first == " " || line.first == "\t"
            if !indented { skipping = false }
            let isOption = { (token: String) in token.contains(where: { $0 == "=" }) && !Self.holds(token, "://") }
            var urls: [String] = []
            var output: String?
            var notice: String?
            var problem: String?
            for token in tokens where problem == nil {
                if token.hasPrefix("out=") {
                    do {
                        (output, notice) = try ListFileReader.outputName(String(token.dropFirst(4)), line: number)
                    } catch {
                        problem = "\(error)"
                    }
                } else if isOption(token) {
                    problem = "input line \(number): unknown option '\(token)' (only out=NAME is known)"
                } else {
                    do { try ListFileReader.check(url: token, line: number) } catch { problem = "\(error)" }
                    urls.append(token)
                }
            }
            if urls.isEmpty, problem == nil, !skipping, !indented || reading.entries.isEmpty {
                problem = "input line \(number): options without a URL line above them"
            }
            if var problem {
                let optionsOnly = tokens.allSatisfy { $0.hasPrefix("out=") || isOption($0) }
                if indented, optionsOnly, !skipping, let owner = reading.entries.popLast() {
                    problem += "; the file of input line \(owner.line) is left out"
                }
                reading.problems.append(DownloadList.Problem(line: number, message: problem))
                skipping = true
                continue
            }
            if !urls.isEmpty {
                reading.entries.append(
                    DownloadList.Entry(urls: urls, output: output, line: number, outputNotice: notice))
            } else if !skipping, let output {
                reading.entries[reading.entries.count - 1].output = output
                reading.entries[reading.entries.count - 1].outputNotice = notice
            }
        }
        return reading
    }
}
