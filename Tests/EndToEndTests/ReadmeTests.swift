// Issue 37: README.md is a user guide a newcomer reads in five minutes: at
// most 300 lines and 16 KB, the first download within its first 40 lines,
// no lab notes, and every `rangeget ...` command it shows parsed by the
// option tables the program itself parses with, so an example never names an
// option that was renamed or removed.
import Foundation
import XCTest

@testable import rangeget

final class ReadmeTests: XCTestCase {
    private var readme: String {
        get throws { try String(contentsOf: CLI.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8) }
    }

    func testTheReadmeIsShortAndStartsWithAFirstDownload() throws {
        let text = try readme
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertLessThanOrEqual(lines.count, 300)
        XCTAssertLessThanOrEqual(text.utf8.count, 16 * 1024)
        let first = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("rangeget http") }, "a first download command")
        XCTAssertLessThan(first, 40, "the first download appears within the first 40 lines")
        // Lab notes belong in docs/: no issue numbers or commit hashes.
        XCTAssertNil(text.firstMatch(of: /[Ii]ssue \d+/), "an issue number")
        XCTAssertNil(text.firstMatch(of: /\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,12}\b/), "a commit hash")
    }

    func testEveryCommandTheReadmeShowsParses() throws {
        let commands = Self.commandLines(in: try readme)
        XCTAssertGreaterThan(commands.count, 10, "the README's examples were found")
        for line in commands {
            let words = Self.shellWords(line)
            XCTAssertEqual(words.first, "rangeget", line)
            do {
                try Self.parse(Array(words.dropFirst()))
            } catch {
                XCTFail("README example does not parse: \(line): \(error)")
            }
        }
    }

    /// The `rangeget ...` lines of the README's `sh` blocks, without their
    /// comments and what a pipe feeds.
    static func commandLines(in text: String) -> [String] {
        var inShell = false
        var commands: [String] = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("```") {
                inShell = line == "```sh"
                continue
            }
            guard inShell, line.hasPrefix("rangeget ") else { continue }
            var command = String(line)
            if let comment = command.range(of: "  #") ?? command.range(of: " # ") {
                command = String(command[..<comment.lowerBound])
            }
            if let pipe = command.range(of: " | ") { command = String(command[..<pipe.lowerBound]) }
            commands.append(command.trimmingCharacters(in: .whitespaces))
        }
        return commands
    }

    /// Words as a POSIX shell splits them, for the quoting examples use ('...' and "...").
    static func shellWords(_ line: String) -> [String] {
        var words: [String] = []
        var word = ""
        var quote: Character?
        var inWord = false
        for character in line {
            if let open = quote {
                if character == open { quote = nil } else { word.append(character) }
            } else if character == "'" || character == "\"" {
                quote = character
                inWord = true
            } else if character == " " {
                if inWord { words.append(word) }
                word = ""
                inWord = false
            } else {
                word.append(character)
                inWord = true
            }
        }
        if inWord { words.append(word) }
        return words
    }

    /// Parses `arguments` as `rangeget` would pick and parse them.
    static func parse(_ arguments: [String]) throws {
        func parse<Settings>(_ command: Command<Settings>, _ settings: Settings, _ arguments: [String]) throws {
            var settings = settings
            _ = try command.parse(arguments, into: &settings)
        }
        let rest = Array(arguments.dropFirst())
        switch arguments.first {
        case "status": try parse(StatusCommand.command, StatusSettings(), rest)
        case "verify": try parse(VerifyCommand.command, VerifySettings(), rest)
        case "bench": try parse(BenchCommand.command, BenchSettings(), rest)
        case "serve": try parse(ServeCommand.command, ServeSettings(), rest)
        case "help": try parse(HelpCommand.command, HelpSettings(), rest)
        default: try parse(GetCommand.command, GetSettings(), arguments)
        }
    }
}
