// `-i FILE`: lists of files in aria2's input-file style. One file per line;
// several whitespace-separated URLs on a line are mirrors of one file; `#`
// starts a comment; `out=NAME` (on the line, or on an indented line below it)
// names the output.
import FoundationEssentials

/// One file of an input list.
struct ListEntry: Equatable {
    var urls: [String]
    var output: String?
    /// The line the entry starts on (1-based), for messages.
    var line: Int
}

enum InputList {
    /// Parses the text of an input file; throws a usage error naming the line of the first problem.
    static func parse(_ text: String) throws(UsageError) -> [ListEntry] {
        var entries: [ListEntry] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let content = rawLine.prefix { $0 != "#" }
            let tokens = content.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
            guard !tokens.isEmpty else { continue }
            let continues = rawLine.first == " " || rawLine.first == "\t"
            var urls: [String] = []
            var output: String?
            for token in tokens {
                if token.hasPrefix("out=") {
                    output = String(token.dropFirst(4))
                    guard !(output ?? "").isEmpty else { throw UsageError("input line \(number): out= needs a name") }
                } else if token.contains("=") && !token.contains("://") {
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
                if let output { entries[entries.count - 1].output = output }
            } else {
                entries.append(ListEntry(urls: urls, output: output, line: number))
            }
        }
        return entries
    }

    /// Refuses anything but an absolute http or https URL with a host.
    static func check(url: String, line: Int? = nil) throws(UsageError) {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty else {
            throw UsageError((line.map { "input line \($0): " } ?? "") + "not an http or https URL: '\(url)'")
        }
    }
}
