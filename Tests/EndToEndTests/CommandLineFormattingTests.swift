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
    /// Server text reached the terminal raw (item 15); JSON must stay valid.
    func testTerminalTextEscapesEveryActiveCharacterAndKeepsJSONValid() throws {
        var random = SplitMix64(seed: 12_35)
        let alphabet: [String] = ["a", "é", "\u{1B}", "[2J", "\u{07}", "\u{9B}", "\u{7F}", "\r", "\n", "\r\n", "\t", "\0",
                                  "\u{202E}", "\u{2066}", "\u{2028}", "\u{85}", "\u{301}", "\\", "\"", "👩‍👩‍👧", "\u{FEFF}"]
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...12, using: &random)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }
                .joined()
            let escaped = TerminalText.escaped(text)
            XCTAssertFalse(escaped.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
                || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value) || $0.value == 0x2028 },
                           escaped.debugDescription)
            XCTAssertEqual(TerminalText.escaped(escaped), escaped, "escaping twice changes nothing")
            let json = JSONSummary.encode(["text": text])
            XCTAssertFalse(json.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
                || (0x202A...0x202E).contains($0.value) }, json.debugDescription)
            let decoded = try JSONDecoder().decode([String: String].self, from: Data(json.utf8))
            XCTAssertEqual(decoded["text"], text, "the same JSON value: \(json.debugDescription)")
        }
        XCTAssertEqual(TerminalText.escaped("a\u{1B}[2Jb\r\n"), "a\\u{1B}[2Jb\\u{D}\\u{A}")
        XCTAssertEqual(TerminalText.table([["A", "B\u{1B}"], ["long\u{07}", "x"]]), "A         B\\u{1B}\nlong\\u{7}  x")
    }
}
