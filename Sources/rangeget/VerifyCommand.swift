// `rangeget verify FILE`: checks a file against the hashes its publisher
// gave (a Metalink's pieces and whole-file hash, or --checksum), and with
// --repair fetches the bad pieces again from the Metalink's mirrors (and any
// URLs after FILE), behind FILE.part, renamed over FILE once every piece
// matches. A file with no hashes to check is said so, and left alone.
import FoundationEssentials
import RangeGet

struct VerifySettings {
    var options = DownloadOptions()
    var metalink: String?
    var repair = false
    var json = false
    var quiet = false
    var help = false
}

enum VerifyCommand {
    static var command: Command<VerifySettings> {
        Command(
            name: "verify",
            usage: [
                Usage("[OPTIONS] FILE [MIRROR-URL...]", "check FILE against its published hashes; --repair mends it")
            ],
            summary: """
                Check a downloaded file against the hashes its publisher gave: each piece of a Metalink and its
                whole-file hash, or --checksum. With --repair, the bad pieces are fetched again from the
                Metalink's mirrors (and any URLs given after FILE), in place: FILE is renamed FILE.part (nothing
                is copied) and gets its name back once every piece matches, or when the repair fails. A repair
                killed midway is resumed by the same command.
                """,
            options: [
                .value(
                    "M", "metalink", "FILE", "the Metalink (a path or an http(s) URL) whose hashes and mirrors to use"
                ) {
                    $0.metalink = $1
                },
                .value(nil, "checksum", "ALGO=HEX", "the whole file's digest (sha256, sha512, sha1 or md5)") {
                    settings, text throws(UsageError) in
                    settings.options.checksum = try Parse.checksum(text)
                },
                .flag(nil, "repair", "fetch the bad pieces again (needs a Metalink's piece hashes)") {
                    $0.repair = true
                },
                .value("n", "connections", "N", "with --repair: connections at once (default 8, at most 256)") {
                    settings, text throws(UsageError) in
                    settings.options.connections = try Parse.positiveInteger(text, "connections", max: 256)
                },
                .flag(nil, "json", "print one JSON object with what was found (and fetched)") { $0.json = true },
                .flag("q", "quiet", "print nothing but errors") { $0.quiet = true },
                .flag("h", "help", "show this help") { $0.help = true }
            ],
            details: """
                Exit codes: 0 every hash matched (or the file was repaired), 3 a hash did not match, 2 no hash
                to check against or a usage error, 1 a mirror failed the repair, 4 a local error.
                """
        )
    }

    static func run(_ arguments: [String]) -> Int32 {
        var settings = VerifySettings()
        var operands: [String]
        do throws(UsageError) {
            operands = try command.parse(arguments, into: &settings)
            if settings.help {
                print(command.help)
                return ExitCode.success.rawValue
            }
            guard !operands.isEmpty else { throw UsageError("no FILE given (see 'rangeget help verify')") }
            let path = operands.removeFirst()
            var mirrors = operands
            if let metalink = settings.metalink {
                let entry = try entry(for: path, in: MetalinkInput.read(metalink, options: settings.options))
                // Pieces prove every byte: the whole-file hash only without them.
                if settings.options.checksum == nil, entry.pieces == nil { settings.options.checksum = entry.checksum }
                settings.options.pieces = entry.pieces
                mirrors = entry.urls + mirrors.filter { !entry.urls.contains($0) }
            }
            return check(path, mirrors: mirrors, settings: settings)
        } catch {
            return fail(error.description, .usage)
        }
    }

    /// The Metalink's entry for the file at `path`: the only one, or the one of its name.
    private static func entry(for path: String, in list: ListFile) throws(UsageError) -> DownloadList.Entry {
        if list.entries.count == 1 { return list.entries[0] }
        let name = path.split(separator: "/").last.map(String.init) ?? path
        if let entry = list.entries.first(where: { $0.output == name }) { return entry }
        if let problem = list.problems.first { throw UsageError(problem.message) }
        throw UsageError("the Metalink lists no file named \(name)")
    }

    private static func check(_ path: String, mirrors: [String], settings: VerifySettings) -> Int32 {
        let outcome = waitFor { () async throws(DownloadError) -> (FileVerification, DownloadResult?) in
            guard settings.repair else {
                return (
                    try Download.verify(path, pieces: settings.options.pieces, checksum: settings.options.checksum), nil
                )
            }
            let repaired = try await Download.repair(path, mirrors: mirrors, options: settings.options)
            return (repaired.found, repaired.repaired)
        }
        switch outcome {
        case let .failure(error):
            return fail(error.commandLineText, ExitCode(error))
        case let .success((found, repaired)):
            report(found, repaired: repaired, settings: settings)
            return found.isIntact || repaired != nil ? ExitCode.success.rawValue : ExitCode.verification.rawValue
        }
    }

    /// What was found, and fetched, on stdout (one line, or JSON).
    private static func report(_ found: FileVerification, repaired: DownloadResult?, settings: VerifySettings) {
        if settings.json {
            print(
                JSONSummary.encode(
                    Report(
                        file: found.path, size: found.size, piecesChecked: found.piecesChecked,
                        badPieces: found.badPieces, checksumMatches: found.checksumMatches,
                        repaired: repaired != nil, bytesFetched: repaired?.bytesFetched ?? 0)))
            return
        }
        guard !settings.quiet else { return }
        var checked: [String] = []
        if found.piecesChecked > 0 { checked.append("\(found.piecesChecked) pieces") }
        if let checksum = settings.options.checksum { checked.append("its \(checksum.algorithm.rawValue)") }
        let what = checked.joined(separator: " and ")
        if found.isIntact {
            print("\(found.path): \(what) match")
            return
        }
        var problems: [String] = []
        if !found.badPieces.isEmpty {
            let listed = found.badPieces.prefix(20).map(String.init).joined(separator: ", ")
            let more = found.badPieces.count > 20 ? ", ..." : ""
            problems.append("\(found.badPieces.count) of \(found.piecesChecked) pieces bad (\(listed)\(more))")
        }
        if found.checksumMatches == false { problems.append("the whole file's checksum differs") }
        print("\(found.path): \(problems.joined(separator: "; "))")
        if let repaired {
            print(
                "\(found.path): repaired: \(ByteCount.format(repaired.bytesFetched)) fetched again; every piece matches"
            )
        } else if !found.badPieces.isEmpty, !settings.repair {
            print("rangeget verify --repair fetches the bad pieces again")
        }
    }

    private struct Report: Encodable {
        var file: String
        var size: Int64
        var piecesChecked: Int
        var badPieces: [Int]
        var checksumMatches: Bool?
        var repaired: Bool
        var bytesFetched: Int64

        private enum CodingKeys: String, CodingKey {
            case file, size, piecesChecked, badPieces, checksumMatches, repaired, bytesFetched
        }

        /// Every key, `checksumMatches` null without a checksum.
        func encode(to encoder: Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(file, forKey: .file)
            try container.encode(size, forKey: .size)
            try container.encode(piecesChecked, forKey: .piecesChecked)
            try container.encode(badPieces, forKey: .badPieces)
            try container.encode(checksumMatches, forKey: .checksumMatches)
            try container.encode(repaired, forKey: .repaired)
            try container.encode(bytesFetched, forKey: .bytesFetched)
        }
    }
}
