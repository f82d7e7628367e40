// `rangeget help [COMMAND]`, and the man page and shell completions, all
// generated from the registry of commands (Subcommand.all) and their option
// tables so they cannot drift apart. `rangeget help --man` prints
// docs/rangeget.1; `--completion bash|zsh` prints docs/completion/*; a test
// checks the committed files match.
import FoundationEssentials
import RangeGet

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The shells whose completion `help --completion` writes.
enum Shell: String {
    case bash, zsh
}

struct HelpSettings {
    var man = false
    var completion: Shell?
    var help = false
}

enum HelpCommand {
    static var command: Command<HelpSettings> {
        Command(
            name: "help",
            usage: [Usage("[OPTIONS] [COMMAND]", "help for a command (also COMMAND -h)")],
            summary: """
                Show the help of COMMAND, or of the download itself without one; or write the man page or a
                shell's completion, generated from the same option tables.
                """,
            options: [
                .flag(nil, "man", "print the man page, in roff (what man rangeget shows)") { $0.man = true },
                .value(nil, "completion", "SHELL", "print the completion script for SHELL: bash or zsh") {
                    settings, text throws(UsageError) in
                    guard let shell = Shell(rawValue: text) else { throw UsageError("--completion needs bash or zsh") }
                    settings.completion = shell
                },
                .flag("h", "help", "show this help") { $0.help = true }
            ],
            details: ""
        )
    }

    /// The man page's EXAMPLES: the README's examples (a test keeps them the same), each with what it does.
    static let examples: [(command: String, meaning: String)] = [
        ("rangeget https://example.org/big.iso", "as many connections as help, saved as ./big.iso"),
        ("rangeget -n 16 -o /data/big.iso https://example.org/big.iso", "16 connections, saved as /data/big.iso"),
        (
            "rangeget -n 12 https://a.example/big.iso https://b.example/big.iso https://c.example/big.iso",
            "three mirrors of one file, 12 connections among them"
        ),
        ("rangeget -d ~/Downloads https://example.org/get?id=42", "the name from Content-Disposition"),
        (
            "rangeget -d isos https://example.org/release.meta4",
            "a Metalink: its mirrors, every piece checked as it lands"
        ),
        ("rangeget verify --repair -M release.meta4 isos/big.iso", "check a file; fetch only its bad pieces again"),
        (
            "rangeget --checksum sha256=9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 https://example.org/big.iso",
            "verified before it gets its final name"
        ),
        ("rangeget -H 'Authorization: Bearer TOKEN' https://example.org/private.tar", "a header, never stored on disk"),
        ("rangeget --max-speed 5M https://example.org/big.iso", "the whole run stays under 5 MiB/s"),
        (
            "rangeget -n 16 -d isos -i list.txt --checksum-file SHA256SUMS",
            "a list, each file checked against SHA256SUMS"
        ),
        ("rangeget --json https://example.org/big.iso | jq .mirrors", "the outcome as JSON"),
        (
            "rangeget -n 8 -o - https://example.org/big.tar.zst | zstd -d | tar x",
            "stream in order to stdout, 8 connections fetching ahead"
        ),
        ("rangeget status ~/Downloads", "the partial downloads there"),
        (
            "rangeget --trace run.json https://example.org/big.iso",
            "a timeline of every connection: rangeget report run.json draws it (Perfetto opens it too)"
        ),
        (
            "rangeget bench --report mirrors.html https://a.example/big.iso https://b.example/big.iso",
            "which mirrors to use, and how many connections, with the curves drawn"
        ),
        (
            "rangeget serve ./files --rate-per-connection 10M --latency 50 --fault 'stall:1048576@request=3'",
            "a test server: 10 MiB/s per connection, 50 ms latency, the third request stalls after 1 MiB"
        )
    ]

    static func run(_ arguments: [String]) -> Int32 {
        var settings = HelpSettings()
        let words: [String]
        do {
            words = try command.parse(arguments, into: &settings)
            guard words.count <= 1 else { throw UsageError("help takes one COMMAND") }
        } catch {
            return fail("\(error)", .usage)
        }
        if settings.help {
            print(command.help)
        } else if settings.man {
            print(manPage(), terminator: "")
        } else if let shell = settings.completion {
            print(shell == .bash ? bashCompletion() : zshCompletion(), terminator: "")
        } else if let page = page(of: words.first) {
            print(page.help)
        } else {
            let names = Subcommand.names.joined(separator: ", ")
            return fail(
                "no help for '\(words[0])'; commands: \(names) (and the download itself: rangeget help)", .usage)
        }
        return ExitCode.success.rawValue
    }

    /// The page of the command `word` names; the download's when there is no
    /// word, or it is `rangeget` or `get`, as people guess.
    private static func page(of word: String?) -> CommandPage? {
        guard let word, word != "rangeget", word != "get" else { return Subcommand.download.page }
        return Subcommand.called(word)?.page
    }

    static func manPage() -> String {
        func escape(_ text: String) -> String {
            text.replacing("\\", with: "\\e").replacing("-", with: "\\-")
        }
        var roff = """
            .TH RANGEGET 1 "" "rangeget \(RangeGetVersion.current)" "User Commands"
            .ad l
            .nh
            .SH NAME
            rangeget \\- segmented, resumable downloads over many connections
            .SH SYNOPSIS

            """
        // `.B rangeget status` and its arguments, the words to replace (`PATH`, `MIRROR-URL`) in italics.
        roff += Subcommand.all.flatMap { subcommand in
            subcommand.page.usage.map { usage in
                let arguments = escape(usage.arguments).replacing(/[A-Z]+(?:\\-[A-Z]+)*/) { "\\fI\($0.output)\\fR" }
                return ".B \(subcommand.page.invocation)\n\(arguments)\n"
            }
        }.joined(separator: ".br\n")
        // Text as written in --help: each line as it is, indented lines kept apart (.nf), a line starting with . or ' escaped.
        func block(_ text: String) -> String {
            ".nf\n"
                + text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                    let escaped = escape(String(line))
                    return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
                }.joined(separator: "\n") + "\n.fi\n"
        }
        for page in Subcommand.all.map(\.page) {
            roff += page.name.map { ".SH \($0.uppercased())\n" } ?? ".SH DESCRIPTION\n"
            roff += escape(page.summary.replacing("\n", with: " ")) + "\n"
            roff += page.name == nil ? ".SH OPTIONS\n" : ".SS Options\n"
            for option in page.options {
                roff += ".TP\n.B \(escape(option.synopsis.trimmingLeadingSpaces()))\n\(escape(option.help))\n"
            }
            // The download's closing text is the LISTS and EXIT STATUS sections below.
            if page.name != nil, !page.details.isEmpty { roff += ".PP\n" + block(page.details) }
        }
        roff += ".SH LISTS\n" + block(GetCommand.listSyntax)
        roff += ".SH EXAMPLES\n"
        for example in examples {
            roff += ".TP\n.B \(escape(example.command))\n\(escape(example.meaning))\n"
        }
        roff += """
            .SH RESUMING
            Data goes to \\fIOUTPUT\\fR.part and the resume state to \\fIOUTPUT\\fR.part.json. Running the same
            command again fetches only the missing bytes; a remote file that changed is downloaded again from the start.
            .SH EXIT STATUS
            0 done; 1 network or server failure; 2 usage error; 3 verification failed; 4 local I/O error;
            5 another rangeget is downloading to the same file (nothing changed); 130 interrupted
            (resumable; a single stream only where the server then serves byte ranges). A list exits
            with the code of its first failed entry, in list order, or 130 when interrupted.

            """
        return roff
    }

    /// The commands in the order a shell's `case` tries them: the download,
    /// whose branch is `*`, last.
    private static var caseOrder: [Subcommand] { Subcommand.named + [Subcommand.download] }

    /// The names a command's operand may be besides a file: a command's, for
    /// the download (whose first word may name one) and for help.
    private static func commandNames(for subcommand: Subcommand) -> [String] {
        subcommand.name == nil || subcommand.name == "help" ? Subcommand.names : []
    }

    /// The bash completion: after a command's name, its long options; as the
    /// first word, and after help, the commands' names too.
    static func bashCompletion() -> String {
        let cases = caseOrder.map { subcommand in
            let words = commandNames(for: subcommand) + subcommand.page.options.map { "--" + $0.long }
            return "        \(subcommand.name ?? "*")) words=\"\(words.joined(separator: " "))\" ;;"
        }
        return """
            # bash completion for rangeget (generated by `rangeget help --completion bash`)
            _rangeget() {
                local cur=${COMP_WORDS[COMP_CWORD]} sub=${COMP_WORDS[1]}
                local words
                case "$sub" in
            \(cases.joined(separator: "\n"))
                esac
                if [[ $cur == -* || $COMP_CWORD -eq 1 || $sub == help ]]; then
                    COMPREPLY=($(compgen -W "$words" -- "$cur"))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
            }
            complete -o default -F _rangeget rangeget

            """
    }

    /// The zsh completion: after a command's name, its options with their
    /// help; as the first word, and after help, the commands' names too.
    static func zshCompletion() -> String {
        // Text inside a single-quoted spec: no quote to end it, no colon to
        // end a field, no bracket to end the help.
        func quotable(_ text: String) -> String {
            text.replacing("'", with: "").replacing("[", with: "(").replacing("]", with: ")").replacing(":", with: "")
        }
        func spec(_ option: OptionText) -> String {
            let value = option.value.map { ":\(quotable($0.lowercased())):_files" } ?? ""
            return "'--\(option.long)[\(quotable(option.help))]\(value)'"
        }
        let cases = caseOrder.map { subcommand in
            var specs = subcommand.page.options.map(spec)
            let names = commandNames(for: subcommand).joined(separator: " ")
            if !names.isEmpty {
                specs.append("'*:\(subcommand.name == nil ? "url or subcommand" : "command"):(\(names))'")
            }
            return "    \(subcommand.name ?? "*")) _arguments \\\n"
                + specs.map { "        " + $0 }.joined(separator: " \\\n") + " ;;"
        }
        return """
            #compdef rangeget
            # zsh completion for rangeget (generated by `rangeget help --completion zsh`)
            _rangeget() {
                case $words[2] in
            \(cases.joined(separator: "\n"))
                esac
            }
            _rangeget "$@"

            """
    }
}

extension String {
    func trimmingLeadingSpaces() -> String { String(drop { $0 == " " }) }
}
