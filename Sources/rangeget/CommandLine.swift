// A small declarative command-line parser: each command is one table of
// options, each option declared once with its help text; `--help` is printed
// from the same table. (swift-argument-parser can't be fetched here.)
import RangeGet

/// What went wrong with the command line; printed as one line, exit 2.
struct UsageError: Error, CustomStringConvertible {
    let message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

/// An option as people read of it: its names, its value's placeholder (nil
/// for a flag) and its help. `--help`, the man page and the completions show this.
struct OptionText {
    let short: Character?
    let long: String
    let value: String?
    let help: String

    /// `-n, --connections N`
    var synopsis: String {
        let names = (short.map { "-\($0), " } ?? "    ") + "--" + long
        return value.map { names + " " + $0 } ?? names
    }
}

/// One option of a command: what is shown of it, and how it changes the
/// command's settings.
struct Option<Settings> {
    let text: OptionText
    let apply: (inout Settings, String) throws(UsageError) -> Void

    /// A flag: `-q`, `--restart`.
    static func flag(
        _ short: Character? = nil, _ long: String, _ help: String,
        _ apply: @escaping (inout Settings) -> Void
    ) -> Option {
        Option(text: OptionText(short: short, long: long, value: nil, help: help)) { settings, _ in apply(&settings) }
    }

    /// An option with a value: `-n 8`, `--output=FILE`.
    static func value(
        _ short: Character? = nil, _ long: String, _ placeholder: String, _ help: String,
        _ apply: @escaping (inout Settings, String) throws(UsageError) -> Void
    ) -> Option {
        Option(text: OptionText(short: short, long: long, value: placeholder, help: help), apply: apply)
    }
}

/// One way to run a command: the arguments after `rangeget` and its name, and
/// what that form does in a few words (the overview at the top of `rangeget --help`).
struct Usage {
    let arguments: String
    let purpose: String

    init(_ arguments: String, _ purpose: String) {
        self.arguments = arguments
        self.purpose = purpose
    }
}

/// A command: its name, usage lines, summary, option table and closing text.
/// Subcommand.all lists every command; dispatch, help, the man page and the
/// completions read them there.
struct Command<Settings> {
    /// The word after `rangeget` that selects it (`status`); nil for the
    /// download, which runs when no word does.
    let name: String?
    let usage: [Usage]
    let summary: String
    let options: [Option<Settings>]
    let details: String
    /// Options of other tools, as typed (`-x`, `--continue`), with what to
    /// use here: refused with that hint, never taken for something else.
    var habits: [String: String] = [:]

    /// Applies `arguments` to `settings`; returns the positional arguments.
    func parse(_ arguments: [String], into settings: inout Settings) throws(UsageError) -> [String] {
        var positional: [String] = []
        var index = 0
        func nextValue(for option: Option<Settings>, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else { throw UsageError("option --\(option.text.long) needs a value") }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                positional += arguments[(index + 1)...]
                break
            }
            if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                let name = body.split(separator: "=", maxSplits: 1).first.map(String.init) ?? ""
                let inline = body.contains("=") ? String(body.drop(while: { $0 != "=" }).dropFirst()) : nil
                guard let option = options.first(where: { $0.text.long == name }) else {
                    throw unknownOption("--" + name, closeTo: name)
                }
                if option.text.value == nil {
                    if inline != nil { throw UsageError("option --\(name) takes no value") }
                    try option.apply(&settings, "")
                } else {
                    try option.apply(&settings, try nextValue(for: option, inline: inline))
                }
            } else if argument.hasPrefix("-") && argument.count > 1 {
                var letters = Array(argument.dropFirst())
                while !letters.isEmpty {
                    let letter = letters.removeFirst()
                    guard let option = options.first(where: { $0.text.short == letter }) else {
                        // `-conections`: a long option typed with one dash.
                        let word = String(argument.dropFirst())
                        throw unknownOption(
                            "-\(letter)", closeTo: word.count > 2 && letters.count + 1 == word.count ? word : nil)
                    }
                    if option.text.value == nil {
                        try option.apply(&settings, "")
                    } else {
                        let inline = letters.isEmpty ? nil : String(letters)
                        letters = []
                        try option.apply(&settings, try nextValue(for: option, inline: inline))
                    }
                }
            } else {
                positional.append(argument)
            }
            index += 1
        }
        return positional
    }

    /// `rangeget --help`, `rangeget serve --help`: where a usage error points.
    private var helpCommand: String { page.invocation + " --help" }

    /// The error for `typed`, an option this command does not have: the
    /// hint for another tool's habit typed as a long option (`--continue`),
    /// else the long option closest to `word` when one is close enough to be
    /// a typo (`--conections`, or `-connections` typed with one dash), else
    /// the hint for a habit's letter (`-x`).
    private func unknownOption(_ typed: String, closeTo word: String?) -> UsageError {
        // Typed whole, a habit is no typo.
        if typed.hasPrefix("--"), let hint = habits[typed] { return UsageError(hint) }
        let longNames = options.map(\.text.long)
        if let word, let match = longNames.contains(word) ? word : Suggestion.closest(to: word, among: longNames) {
            return UsageError(
                "unknown option \(typed == "--" + word ? typed : "-" + word); did you mean --\(match)? "
                    + "(see '\(helpCommand)')")
        }
        if let hint = habits[typed] { return UsageError(hint) }
        return UsageError("unknown option \(typed) (see '\(helpCommand)')")
    }

    /// What help, the man page and the completions show of this command.
    var page: CommandPage {
        CommandPage(name: name, usage: usage, summary: summary, options: options.map(\.text), details: details)
    }

    /// The `--help` text, generated from the option table.
    var help: String { page.help }
}

/// What `--help`, the man page and the completions show of a command,
/// whatever the type of its settings.
struct CommandPage {
    let name: String?
    let usage: [Usage]
    let summary: String
    let options: [OptionText]
    let details: String

    /// `rangeget status`; `rangeget` for the download.
    var invocation: String { name.map { "rangeget " + $0 } ?? "rangeget" }

    /// The `--help` text. The download's page is the program's: its usage
    /// lines are every command's, each with what it does.
    var help: String {
        let usageLines = name == nil ? Subcommand.overview : usage.map { invocation + " " + $0.arguments }
        let width = min(34, (options.map(\.synopsis.count).max() ?? 0) + 2)
        var lines = usageLines.enumerated().map { ($0.offset == 0 ? "Usage: " : "       ") + $0.element }
        lines += ["", summary, "", "Options:"]
        for option in options {
            let synopsis = "  " + option.synopsis
            if synopsis.count + 1 >= width + 2 {
                lines.append(synopsis)
                lines.append(String(repeating: " ", count: width + 2) + option.help)
            } else {
                lines.append(synopsis.padding(to: width + 2) + option.help)
            }
        }
        if !details.isEmpty { lines += ["", details] }
        return lines.joined(separator: "\n")
    }
}

extension String {
    /// The text followed by spaces up to `width` characters; longer text as it is.
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}

/// Parsers for option values, each failing with a message that names the
/// option and its bounds. Every number is bounded here, at parse time, so no
/// value a person can type reaches arithmetic that would overflow (seconds
/// become milliseconds, sizes are doubled): sizes and rates up to 1T, seconds
/// from 1 ms to one day, counts as each option says.
enum Parse {
    /// `--checksum ALGO=HEX`, for the download and `verify`.
    static func checksum(_ text: String) throws(UsageError) -> Checksum {
        guard let checksum = Checksum(text) else {
            throw UsageError(
                "--checksum needs sha256=HEX (or sha512, sha1, md5) with a digest of the right length, not '\(text)'")
        }
        return checksum
    }

    /// The largest size or rate: 1 TiB (per second).
    static let largestSize: Int64 = 1 << 40
    /// The shortest and the longest duration in seconds: 1 ms and one day.
    static let secondsRange = 0.001...86_400.0

    static func positiveInteger(_ text: String, _ option: String, max: Int = 1_000_000) throws(UsageError) -> Int {
        guard let value = Int(text), value > 0, value <= max else {
            throw UsageError("--\(option) needs a whole number from 1 to \(max), not '\(text)'")
        }
        return value
    }

    static func count(_ text: String, _ option: String, max: Int) throws(UsageError) -> Int {
        guard let value = Int(text), value >= 0, value <= max else {
            throw UsageError("--\(option) needs a whole number from 0 to \(max), not '\(text)'")
        }
        return value
    }

    static func seconds(_ text: String, _ option: String) throws(UsageError) -> Double {
        guard let value = Double(text), secondsRange.contains(value) else {
            throw UsageError("--\(option) needs a number of seconds from 0.001 to 86400, not '\(text)'")
        }
        return value
    }

    static func bytes(_ text: String, _ option: String, range: ClosedRange<Int64> = 1...largestSize) throws(UsageError)
        -> Int64
    {
        guard let value = ByteCount.parse(text), range.contains(value) else {
            func short(_ size: Int64) -> String {
                let units: [(String, Int64)] = [("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)]
                return units.first { size >= $0.1 && size % $0.1 == 0 }.map { "\(size / $0.1)\($0.0)" } ?? "\(size)"
            }
            throw UsageError(
                "--\(option) needs a size from \(short(range.lowerBound)) to \(short(range.upperBound)), "
                    + "like 512K, 10M or 1.5G, not '\(text)'")
        }
        return value
    }

    /// A `-H 'Name: value'` header line that adds exactly one header and
    /// leaves the choice of bytes to rangeget: no line break or other control
    /// character (a CR or LF would start a header, or a request, of its own),
    /// a name of token characters, and neither `Range` (the planner's ranges)
    /// nor `If-Range` (the validator that keeps a changed file from being spliced).
    static func header(_ text: String) throws(UsageError) -> String {
        _ = try headerValue(text, "header")
        let name = text.prefix { $0 != ":" }
        let bare = name.filter { $0 != " " && $0 != "\t" }.lowercased()
        if bare == "range" || bare == "if-range" {
            let which = bare == "range" ? "Range" : "If-Range"
            throw UsageError(
                "--header \(which) is not allowed: rangeget chooses the ranges and validators of its requests")
        }
        guard name.count < text.count, TransferOptions.isToken(name) else {
            throw UsageError("--header needs 'Name: value' with a name of letters, digits and -, not '\(text)'")
        }
        return text
    }

    /// Text for a request header (`--user-agent`, a `-H` line): no control
    /// character but the tab, so no line break.
    static func headerValue(_ text: String, _ option: String) throws(UsageError) -> String {
        if text.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" }) {
            throw UsageError("--\(option) must not contain a line break (CR or LF): one header per option")
        }
        if TransferOptions.hasControlCharacter(text) {
            throw UsageError("--\(option) must not contain a control character")
        }
        return text
    }
}
