import XCTest

// The list of commands is written once, in Subcommand.all (issue 16: it was
// written five times, and they disagreed: `rangeget help help` said "no
// help" for a command dispatch ran, the man page listed the commands in
// another order, and the overview and each command's --help had different
// usage lines). These tests read every place a command is named, in the
// built binary's output, and check each names the same commands as dispatch.
@testable import rangeget

final class SubcommandRegistryTests: EndToEndTestCase {
    /// The words that select a command, as the registry lists them.
    private let names = Subcommand.names

    func testTheRegistryHasOneDownloadAndNamesEveryOtherCommandOnce() {
        XCTAssertEqual(Subcommand.all.filter { $0.name == nil }.count, 1, "the download, and only it, has no name")
        XCTAssertEqual(names.count, Subcommand.named.count, "every other command has a name")
        XCTAssertEqual(Set(names).count, names.count, "no name twice: \(names)")
        for name in names {
            let selected = Subcommand.selected(by: [name, "x"])
            XCTAssertEqual(selected.subcommand.name, name)
            XCTAssertEqual(selected.arguments, ["x"])
        }
        let download = Subcommand.selected(by: ["https://example.org/f", "status"])
        XCTAssertNil(download.subcommand.name)
        XCTAssertEqual(download.arguments, ["https://example.org/f", "status"])
    }

    /// Dispatch is the registry's: main.swift names no command of its own
    /// (it had a `switch` on the first word beside help's own).
    func testMainDispatchesOnlyThroughTheRegistry() throws {
        let main = try String(
            contentsOf: CLI.repositoryRoot.appendingPathComponent("Sources/rangeget/main.swift"), encoding: .utf8)
        let code = main.split(separator: "\n").filter { !$0.hasPrefix("//") }
        XCTAssertTrue(code.contains { $0.contains("Subcommand.selected(by:") }, main)
        XCTAssertFalse(code.contains { $0.contains("\"") }, "no word of its own in main.swift:\n\(main)")
    }

    /// Every command dispatch runs is in --help's overview, in the man page's
    /// SYNOPSIS and sections, in both completions' branches and first words,
    /// and in the message for an unknown COMMAND; and none of them names
    /// a command dispatch does not run.
    func testEveryPlaceThatNamesCommandsNamesTheOnesDispatchRuns() throws {
        let overview = try CLI.run(["--help"], in: directory).stdout.split(
            separator: "\n", omittingEmptySubsequences: false
        )
        .prefix { !$0.isEmpty }
        let man = try CLI.run(["help", "--man"], in: directory).stdout.split(separator: "\n")
        let bash = try CLI.run(["help", "--completion", "bash"], in: directory).stdout
        let zsh = try CLI.run(["help", "--completion", "zsh"], in: directory).stdout

        // The word after `rangeget` in each usage line, where it is not an option or operand.
        func commandWord(_ line: Substring) -> String? {
            let words = line.split(separator: " ")
            guard let index = words.firstIndex(of: "rangeget"), index + 1 < words.count else { return nil }
            let word = words[index + 1]
            return word.first.map { $0.isLetter && $0.isLowercase } == true ? String(word) : nil
        }
        // The man page's lines from one section heading to the next.
        func section(_ heading: String, until next: String) -> ArraySlice<Substring> {
            man.drop { $0 != heading }.dropFirst().prefix { $0 != next }
        }
        let places: [(String, [String])] = [
            ("--help's overview", overview.compactMap(commandWord)),
            ("the man page's SYNOPSIS", section(".SH SYNOPSIS", until: ".SH DESCRIPTION").compactMap(commandWord)),
            (
                "the man page's sections",
                section(".SH OPTIONS", until: ".SH LISTS").filter { $0.hasPrefix(".SH ") }
                    .map { $0.dropFirst(4).lowercased() }
            ),
            ("bash's branches", bash.matches(of: /\n +([a-z]+)\) words=/).map { String($0.1) }),
            (
                "bash's first words",
                try XCTUnwrap(bash.firstMatch(of: /\n +\*\) words="([^"]*)"/)).1
                    .split(separator: " ").filter { !$0.hasPrefix("-") }.map(String.init)
            ),
            ("zsh's branches", zsh.matches(of: /\n +([a-z]+)\) _arguments/).map { String($0.1) }),
            (
                "zsh's first words",
                try XCTUnwrap(zsh.firstMatch(of: /'\*:url or subcommand:\(([^)]*)\)'/)).1
                    .split(separator: " ").map(String.init)
            )
        ]
        for (place, named) in places {
            XCTAssertEqual(named, names, "\(place) names the commands dispatch runs, in its order")
        }

        let unknown = try CLI.run(["help", "nonsense"], in: directory)
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("commands: " + names.joined(separator: ", ") + " "), unknown.stderr)
    }

    /// `rangeget help NAME` and `rangeget NAME --help` print the same page for
    /// every command, and its options are in its branch of each completion.
    func testEveryCommandHasItsHelpAndItsOptionsInItsCompletionBranch() throws {
        let bash = try CLI.run(["help", "--completion", "bash"], in: directory).stdout
        let zsh = try CLI.run(["help", "--completion", "zsh"], in: directory).stdout
        for subcommand in Subcommand.all {
            let word = subcommand.name.map { [$0] } ?? []
            let help = try CLI.run(["help"] + word, in: directory)
            XCTAssertEqual(help.status, 0, help.stderr)
            XCTAssertEqual(help.stdout, subcommand.page.help + "\n")
            let dashHelp = try CLI.run(word + ["--help"], in: directory)
            XCTAssertEqual(dashHelp.status, 0, dashHelp.stderr)
            XCTAssertEqual(dashHelp.stdout, help.stdout, "rangeget \(word) --help")

            let label = subcommand.name ?? "*"
            let bashWords = try XCTUnwrap(branch(of: label, in: bash).first?.firstMatch(of: /words="([^"]*)"/), label).1
                .split(separator: " ")
            let zshSpecs = branch(of: label, in: zsh).joined(separator: "\n")
            for option in subcommand.page.options {
                XCTAssertTrue(
                    bashWords.contains("--" + option.long[...]), "bash's \(label) branch offers --\(option.long)")
                XCTAssertTrue(zshSpecs.contains("'--\(option.long)["), "zsh's \(label) branch offers --\(option.long)")
            }
        }
    }

    /// A completion's branch for `label` (`status`, `*`): its lines up to the `;;` that ends it.
    private func branch(of label: String, in script: String) -> ArraySlice<Substring> {
        let lines = script.split(separator: "\n")
        guard let start = lines.firstIndex(where: { $0.drop { $0 == " " }.hasPrefix(label + ") ") }) else { return [] }
        let end = lines[start...].firstIndex { $0.hasSuffix(";;") } ?? lines.endIndex - 1
        return lines[start...end]
    }

    /// The README's usage block is --help's overview, line for line.
    func testTheReadmeShowsTheOverviewOfHelp() throws {
        let readme = try String(contentsOf: CLI.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        for line in Subcommand.overview {
            XCTAssertTrue(readme.contains(line), "README.md's Usage has the line\n\(line)")
        }
    }
}
