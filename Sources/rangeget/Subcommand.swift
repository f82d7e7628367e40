// The one list of rangeget's commands. Dispatch (main.swift), the overview
// at the top of `rangeget --help`, `rangeget help COMMAND`, the man page and
// both shell completions read it: a command added here is added to all of
// them, and one missing here is missing from all of them.

/// A command as the registry holds it: what is shown of it, and what runs it.
struct Subcommand {
    /// Its name, usage lines, summary, options and closing text.
    let page: CommandPage
    /// Runs it with the arguments after its name; returns the exit code.
    let run: ([String]) -> Int32

    init<Settings>(_ command: Command<Settings>, run: @escaping ([String]) -> Int32) {
        page = command.page
        self.run = run
    }

    /// The word after `rangeget` that selects it; nil for the download.
    var name: String? { page.name }

    /// The download: what runs when the first argument names no other command.
    static var download: Subcommand { Subcommand(GetCommand.command, run: GetCommand.run) }

    /// The commands a word selects, in the order help and the man page list them.
    static var named: [Subcommand] {
        [
            Subcommand(StatusCommand.command, run: StatusCommand.run),
            Subcommand(VerifyCommand.command, run: VerifyCommand.run),
            Subcommand(ReportCommand.command, run: ReportCommand.run),
            Subcommand(BenchCommand.command, run: BenchCommand.run),
            Subcommand(ServeCommand.command, run: ServeCommand.run),
            Subcommand(HelpCommand.command, run: HelpCommand.run)
        ]
    }

    /// Every command, the download first.
    static var all: [Subcommand] { [download] + named }

    /// The words that select a command.
    static var names: [String] { named.compactMap(\.name) }

    /// The command `word` selects, if any.
    static func called(_ word: String) -> Subcommand? {
        named.first { $0.name == word }
    }

    /// The command `arguments` select and the arguments it runs with: the
    /// download, with all of them, when the first names no other command.
    static func selected(by arguments: [String]) -> (subcommand: Subcommand, arguments: [String]) {
        if let word = arguments.first, let subcommand = called(word) {
            return (subcommand, Array(arguments.dropFirst()))
        }
        return (download, arguments)
    }

    /// Every command's usage lines, each with what it does, aligned: the top of `rangeget --help`.
    static var overview: [String] {
        let forms = all.flatMap { subcommand in
            subcommand.page.usage.map { (line: subcommand.page.invocation + " " + $0.arguments, purpose: $0.purpose) }
        }
        let width = (forms.map(\.line.count).max() ?? 0) + 3
        return forms.map { $0.line.padding(to: width) + $0.purpose }
    }
}
