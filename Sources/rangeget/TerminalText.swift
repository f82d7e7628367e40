// What rangeget prints for people, made safe for a terminal. Messages quote
// text that others control (ETags, Content-Range values, Server headers,
// error text, URLs and names from lists, file names on disk); a control
// character or escape sequence among it could retitle the window, clear the
// screen, reorder the line (bidi overrides) or forge a line of its own. Every
// message, summary and table goes through `TerminalText.escaped`; JSON output
// goes through `TerminalText.json`, which keeps it valid and the text intact.
import FoundationEssentials
import RangeGet

enum TerminalText {
    /// `text` with every character a terminal acts on written as `\u{XX}`:
    /// C0 controls (line breaks and tabs too: a message is one line), DEL, C1
    /// controls, the bidi controls and the Unicode line and paragraph separators.
    static func escaped(_ text: String) -> String {
        OutgoingText.escapingControls(text)
    }

    /// JSON text (as an encoder wrote it) with the characters `escaped` would
    /// rewrite that an encoder leaves raw (DEL, C1, bidi controls, separators)
    /// written as `\uXXXX` escapes: the same JSON value, safe on a terminal.
    /// Such characters can only occur inside JSON strings, where an escape is valid.
    static func json(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: OutgoingText.isControl) else { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if OutgoingText.isControl(scalar) && scalar.value >= 0x20 {
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// Prints one line of text for people on stdout, escaped.
    static func printLine(_ text: String) {
        print(escaped(text))
    }

    /// Rows of cells as aligned columns, every cell escaped; the last column is not padded.
    static func table(_ rows: [[String]]) -> String {
        let cells = rows.map { $0.map(escaped) }
        let columns = cells.map(\.count).max() ?? 0
        let widths = (0..<columns).map { column in cells.map { $0.count > column ? $0[column].count : 0 }.max() ?? 0 }
        return cells.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(to: widths[column])
            }.joined(separator: " ").trimmingTrailingSpaces()
        }.joined(separator: "\n")
    }
}
