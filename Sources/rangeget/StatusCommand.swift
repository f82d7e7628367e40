// `rangeget status [PATH...]`: the partial downloads in the current directory
// (or the given files and directories): URL, size, how much is done, when the
// manifest was last written, and whether it can be resumed as it is.
import FoundationEssentials
import RangeGet

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct StatusSettings {
    var json = false
    var help = false
}

enum StatusCommand {
    static var command: Command<StatusSettings> {
        Command(
            name: "status",
            usage: [Usage("[OPTIONS] [PATH...]", "partial downloads here (or there) and their health")],
            summary:
                "Show the partial downloads in the current directory, or in the given directories and files\n(an output name, its .part or its .part.json).",
            options: [
                .flag(nil, "json", "print a JSON array instead of a table") { $0.json = true },
                .flag("h", "help", "show this help") { $0.help = true }
            ],
            details: """
                States: resumable (its manifest reads back and its .part file holds every byte listed), checksum
                failed (complete, but not what --checksum expected: --restart fetches it again), not resumable
                (one stream, from a server that served no ranges or no length: the next run starts over unless
                the server serves ranges by then), damaged (exit 4). A PATH that does not
                exist (no file, .part or .part.json of that name) is said so on stderr, and the exit code is 2.
                """
        )
    }

    /// One partial download as `status` reports it.
    struct Entry: Encodable {
        var manifest: String
        var output: String
        var url: String?
        var size: Int64?
        var bytesDone: Int64?
        var bytesLeft: Int64?
        var percentDone: Double?
        var lastUpdated: String?
        /// "resumable", "checksum failed", "not resumable" or "damaged".
        var state: String
        /// True when the same command resumes it as it is.
        var healthy: Bool { state == "resumable" }
        var problem: String?

        private enum CodingKeys: String, CodingKey {
            case manifest, output, url, size, bytesDone, bytesLeft, percentDone, lastUpdated, state, healthy, problem
        }

        func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(manifest, forKey: .manifest)
            try container.encode(output, forKey: .output)
            try container.encodeIfPresent(url, forKey: .url)
            try container.encodeIfPresent(size, forKey: .size)
            try container.encodeIfPresent(bytesDone, forKey: .bytesDone)
            try container.encodeIfPresent(bytesLeft, forKey: .bytesLeft)
            try container.encodeIfPresent(percentDone, forKey: .percentDone)
            try container.encodeIfPresent(lastUpdated, forKey: .lastUpdated)
            try container.encode(state, forKey: .state)
            try container.encode(healthy, forKey: .healthy)
            try container.encodeIfPresent(problem, forKey: .problem)
        }
    }

    static func run(_ arguments: [String]) -> Int32 {
        var settings = StatusSettings()
        let paths: [String]
        do {
            paths = try command.parse(arguments, into: &settings)
        } catch {
            return fail(error.description, .usage)
        }
        if settings.help {
            print(command.help)
            return ExitCode.success.rawValue
        }
        var manifests: [String] = []
        var missing = false
        for path in paths.isEmpty ? ["."] : paths {
            if let note = absence(path) {
                warn(note.text)
                missing = missing || note.missing
                continue
            }
            if isDirectory(path) {
                let names = Set((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [])
                // A .part without a manifest is listed too: a single stream of unknown length.
                let parts = names.filter { $0.hasSuffix(".part.json") }
                    .union(names.filter { $0.hasSuffix(".part") && !names.contains($0 + ".json") }.map { $0 + ".json" })
                manifests += parts.sorted().map { join(path, $0) }
            } else if path.hasSuffix(".part.json") {
                manifests.append(path)
            } else if path.hasSuffix(".part") {
                manifests.append(path + ".json")
            } else {
                manifests.append(path + ".part.json")
            }
        }
        let entries = manifests.map(entry)
        if settings.json {
            print(JSONSummary.encode(entries, pretty: true))
        } else if entries.isEmpty {
            if !missing { print("no partial downloads") }
        } else {
            print(table(entries))
        }
        if missing { return ExitCode.usage.rawValue }
        return entries.contains { $0.state == "damaged" } ? ExitCode.local.rawValue : ExitCode.success.rawValue
    }

    /// What to say instead of a row for `path`, when there is no partial
    /// download to look at: nothing of that name (`missing`), or a file
    /// without a `.part` or `.part.json` beside it. Nil when there is one.
    private static func absence(_ path: String) -> (text: String, missing: Bool)? {
        let base =
            path.hasSuffix(".part.json")
            ? String(path.dropLast(".part.json".count))
            : path.hasSuffix(".part") ? String(path.dropLast(".part".count)) : path
        let exists = { (name: String) in access(name, F_OK) == 0 }
        if exists(base + ".part") || exists(base + ".part.json") || isDirectory(path) { return nil }
        if exists(path) {
            return ("\(path): no partial download of it here (complete, or not fetched by rangeget)", false)
        }
        return ("\(path) does not exist", true)
    }

    static func entry(_ manifestPath: String) -> Entry {
        let part = String(manifestPath.dropLast(".json".count))
        var entry = Entry(manifest: manifestPath, output: String(part.dropLast(".part".count)), state: "damaged")
        var info = stat()
        if stat(manifestPath, &info) == 0 {
            entry.lastUpdated = Timestamp.iso8601(seconds: Int(info.st_mtim.tv_sec))
        }
        do {
            guard let manifest = try Manifest.load(from: manifestPath) else {
                if Manifest.isPartialDownload(dataFile: part) {
                    entry.state = "not resumable"
                    entry.problem = "one stream of unknown length (no manifest): the next run starts over"
                } else {
                    entry.problem =
                        access(part, F_OK) == 0
                        ? "no manifest, and \(part) is not rangeget's"
                        : "\(entry.output): no such download here"
                }
                return entry
            }
            entry.url = manifest.url
            entry.size = manifest.size
            entry.bytesDone = manifest.done.byteCount
            entry.bytesLeft = manifest.size - manifest.done.byteCount
            entry.percentDone = manifest.size > 0 ? Double(manifest.done.byteCount) * 100 / Double(manifest.size) : 100
            var data = stat()
            let needed = manifest.done.ranges.last?.end ?? 0
            if stat(part, &data) != 0 {
                entry.problem = "\(part) is missing"
            } else if Int64(data.st_size) < needed {
                entry.problem = "\(part) is shorter than the manifest says"
            } else if let problem = manifest.problem {
                entry.state = "checksum failed"
                entry.problem = problem + " (--restart fetches it again)"
            } else if manifest.singleStream == true {
                entry.state = "not resumable"
                entry.problem =
                    "one stream (the server served no byte ranges): the next run starts over "
                    + "unless the server serves ranges by then"
            } else {
                entry.state = "resumable"
            }
        } catch {
            entry.problem = DownloadError.manifest(error).commandLineText
        }
        return entry
    }

    private static func table(_ entries: [Entry]) -> String {
        var rows = [["OUTPUT", "DONE", "SIZE", "LEFT", "UPDATED", "STATE", "URL"]]
        for entry in entries {
            rows.append([
                entry.output,
                entry.percentDone.map { String(format1: $0) + "%" } ?? "-",
                entry.size.map(ByteCount.format) ?? "-",
                entry.bytesLeft.map(ByteCount.format) ?? "-",
                entry.lastUpdated ?? "-",
                entry.state + (entry.problem.map { ": " + $0 } ?? ""),
                entry.url ?? "-"
            ])
        }
        return TerminalText.table(rows)
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory == "." ? name : (directory.hasSuffix("/") ? directory + name : directory + "/" + name)
    }
}

enum Timestamp {
    /// `2026-11-29T13:27:45Z` for seconds since the epoch; the seconds
    /// themselves (`@67767976233532800`) for a time too far out to be
    /// broken into a date. tmpfs and tar keep such mtimes, and `status`
    /// must list the file all the same.
    static func iso8601(seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        // gmtime_r fails (EOVERFLOW) where the year does not fit tm_year.
        guard gmtime_r(&time, &parts) != nil else { return "@\(seconds)" }
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        // In Int: tm_year near Int32.max (year 2^31) overflows Int32 plus 1900.
        return "\(Int(parts.tm_year) + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

extension String {
    /// The text without spaces at its end.
    func trimmingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
