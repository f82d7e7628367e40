// Metalink input: `rangeget FILE.meta4`, `rangeget --metalink FILE|URL`. The
// document is read (a local file, or fetched into memory: at most 16 MiB,
// as the reader takes no more) and its files become the entries of a list:
// each file's mirrors in priority order, its name inside -d, its size, its
// strongest whole-file hash and its piece hashes. A Metalink of one file is
// downloaded as a single file is (-o may rename it); several go as -i does.
import Foundation
import RangeGet

enum MetalinkInput {
    /// True when `argument` names a Metalink document by its extension
    /// (`.meta4`, Metalink 4; `.metalink`, Metalink 3), as a path or a URL.
    static func namesMetalink(_ argument: String) -> Bool {
        let path = argument.split(separator: "?", maxSplits: 1).first.map(String.init) ?? argument
        let lower = path.lowercased()
        return lower.hasSuffix(".meta4") || lower.hasSuffix(".metalink")
    }

    /// The files of the Metalink at `source` (a path, or an http(s) URL
    /// fetched with `options`), as a list's entries and the files refused.
    static func read(_ source: String, options: DownloadOptions) throws(UsageError) -> ListFile {
        let bytes = try document(at: source, options: options)
        let metalink: Metalink
        do {
            metalink = try Metalink(parsing: bytes)
        } catch {
            throw UsageError("cannot read Metalink \(source): \(error.message)")
        }
        return metalink.list
    }

    /// `list` with each entry that is one Metalink URL replaced by the
    /// files that Metalink lists, on the entry's line; one that cannot be
    /// read is a problem of that line.
    static func expanding(_ list: ListFile, options: DownloadOptions) -> ListFile {
        guard list.entries.contains(where: { $0.urls.count == 1 && namesMetalink($0.urls[0]) }) else { return list }
        var expanded = ListFile()
        expanded.problems = list.problems
        for entry in list.entries {
            guard entry.urls.count == 1, namesMetalink(entry.urls[0]) else {
                expanded.entries.append(entry)
                continue
            }
            do throws(UsageError) {
                let files = try read(entry.urls[0], options: options)
                for var file in files.entries {
                    file.line = entry.line
                    expanded.entries.append(file)
                }
                expanded.problems += files.problems.map {
                    DownloadList.Problem(line: entry.line, message: "input line \(entry.line): \($0.message)")
                }
            } catch {
                expanded.problems.append(
                    DownloadList.Problem(line: entry.line, message: "input line \(entry.line): \(error.description)"))
            }
        }
        expanded.problems.sort { $0.line < $1.line }
        return expanded
    }

    /// The bytes of the document at `source`.
    private static func document(at source: String, options: DownloadOptions) throws(UsageError) -> [UInt8] {
        let lower = source.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            guard let data = FileManager.default.contents(atPath: source) else {
                throw UsageError("cannot read Metalink \(source): \(systemReason(errno))")
            }
            return Array(data)
        }
        switch waitFor({ () async throws(DownloadError) in try await Metalink.document(at: source, options: options) })
        {
        case let .success(bytes): return bytes
        case let .failure(error): throw UsageError("cannot fetch Metalink \(source): \(error.commandLineText)")
        }
    }
}
