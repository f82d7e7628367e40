import Dispatch
import FoundationEssentials
import RangeGet
import Synchronization

// The main command: `rangeget [OPTIONS] URL`. Parses options into
// DownloadOptions, runs a Download, shows progress, maps the outcome to an
// exit code. All the work happens in the RangeGet library.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct GetSettings {
    /// The library's defaults but for the count: the command line learns it
    /// (`-n auto`) unless given one; a list, mirrors and a stream keep 8.
    var options: DownloadOptions = {
        var options = DownloadOptions()
        options.automaticConnections = true
        return options
    }()
    var output: String?
    var directory: String?
    var inputFile: String?
    /// `--metalink FILE|URL`, or a lone argument named `*.meta4` / `*.metalink`.
    var metalink: String?
    var checksumFile: String?
    var jobs: Int?
    var maxSpeed: Int64?
    var quiet = false
    var json = false
    var help = false
    var version = false
}

enum GetCommand {
    static var command: Command<GetSettings> {
        Command(
            name: nil,
            usage: [
                Usage("[OPTIONS] URL [MIRROR-URL...]", "download one file (several URLs: mirrors of it)"),
                Usage("[OPTIONS] -i LIST", "download every file in LIST"),
                Usage("[OPTIONS] FILE.meta4", "download the files a Metalink lists, every piece checked")
            ],
            summary: """
                Download a file over many connections at once, resumably: run the same command again after
                Ctrl-C, a crash or a reboot and only the missing bytes are fetched. Several URLs are mirrors
                of one file: they must agree on its size, and work flows to whichever is faster.
                """,
            options: [
                .value(
                    "o", "output", "PATH",
                    "save to PATH (default: name from the server or the URL); '-' writes the file to stdout, in order"
                ) { $0.output = $1 },
                .value(
                    nil, "window", "SIZE",
                    "with -o -: the most bytes held in memory ahead of the reader (default 64M, 1M to 16G)"
                ) { settings, text throws(UsageError) in
                    settings.options.streamWindow = try Parse.bytes(text, "window", range: 1 << 20...16 << 30)
                },
                .value(
                    "d", "dir", "DIR",
                    "save into directory DIR, created with its parents if missing (default: current directory)"
                ) { $0.directory = $1 },
                .value("i", "input-file", "FILE", "download every file listed in FILE (one per line; '-' reads stdin)")
                {
                    $0.inputFile = $1
                },
                .value(
                    "M", "metalink", "FILE",
                    "download the files a Metalink (RFC 5854, or version 3) lists, from its mirrors, checking its hashes and pieces; FILE may be an http(s) URL (a lone argument named *.meta4 or *.metalink is one too)"
                ) { $0.metalink = $1 },
                .value(
                    "j", "jobs", "N",
                    "with -i: at most N files fetched at once, up to 1000 (default: one per connection)"
                ) { settings, text throws(UsageError) in
                    settings.jobs = try Parse.positiveInteger(text, "jobs", max: 1000)
                },
                .value(
                    "n", "connections", "N|auto",
                    "connections at once, at most 256 (default auto: learned while one URL downloads, from --max-per-host "
                        + "down; a list (shared by its files), mirrors and -o - run 8)"
                ) { settings, text throws(UsageError) in
                    if text == "auto" {
                        settings.options.automaticConnections = true
                        return
                    }
                    settings.options.automaticConnections = false
                    settings.options.connections = try Parse.positiveInteger(text, "connections", max: 256)
                },
                .value("k", "min-split", "SIZE", "never split a piece below SIZE bytes (default 1M, at most 1T)") {
                    settings, text throws(UsageError) in
                    settings.options.minimumSplit = try Parse.bytes(text, "min-split")
                },
                .value(nil, "max-per-host", "N", "at most N connections to one host:port (default 16, at most 256)") {
                    settings, text throws(UsageError) in
                    settings.options.maxPerHost = try Parse.positiveInteger(text, "max-per-host", max: 256)
                },
                .flag(
                    nil, "use-head",
                    "probe with HEAD before any data moves (default: the first ranged GET is the probe)"
                ) {
                    $0.options.probeWithHead = true
                },
                .flag("q", "quiet", "no progress display and no summary") { $0.quiet = true },
                .value(
                    nil, "trace", "FILE",
                    "write a timeline of the run to FILE (Chrome trace JSON: Perfetto, chrome://tracing, rangeget report)"
                ) { $0.options.trace = DownloadTrace(path: $1) },
                .flag(nil, "json", "print one JSON object with the outcome and per-mirror figures on stdout") {
                    $0.json = true
                },
                .flag(nil, "restart", "discard a partial download and start over") { $0.options.restart = true },
                .value(
                    nil, "checksum", "ALGO=HEX",
                    "verify the file (sha256, sha512, sha1 or md5) before it is renamed into place"
                ) { settings, text throws(UsageError) in
                    settings.options.checksum = try Parse.checksum(text)
                },
                .value(
                    nil, "checksum-file", "FILE",
                    "with -i: verify each file against a SHA256SUMS-style list; a file it does not list fails (exit 3)"
                ) {
                    $0.checksumFile = $1
                },
                .flag(
                    nil, "no-discovery",
                    "ignore what the server publishes beyond the bytes: a Repr-Digest or Digest header's SHA-256 or SHA-512 (else checked as --checksum is), the mirrors its Link: rel=duplicate headers list (else used as mirrors given are) and the Metalink a Link: rel=describedby names (else its pieces are checked as --metalink's are)"
                ) { $0.options.discovery = false },
                .flag(nil, "force", "overwrite an existing complete file") { $0.options.overwrite = true },
                .flag(
                    nil, "xattr",
                    "record the URL on the saved file as the extended attribute user.xdg.origin.url, as curl --xattr does"
                ) {
                    $0.options.recordOriginURL = true
                },
                .value(
                    nil, "retries", "N",
                    "attempts at a piece that fail without progress before giving up (default 5, at most 1000)"
                ) { settings, text throws(UsageError) in
                    settings.options.retries = try Parse.count(text, "retries", max: 1000)
                },
                .value(
                    nil, "retry-wait", "SECONDS",
                    "first delay before a retry, doubling each time, four times as long after a 429 without Retry-After (default 0.5; 0.001 to 86400)"
                ) { settings, text throws(UsageError) in
                    settings.options.retryWait = try Parse.seconds(text, "retry-wait")
                },
                .value(
                    nil, "max-wait", "SECONDS",
                    "the longest Retry-After to wait out; a server asking for more is dropped, or the run fails (default 60; 0.001 to 86400)"
                ) { settings, text throws(UsageError) in
                    settings.options.longestRetryAfter = try Parse.seconds(text, "max-wait")
                },
                .value(
                    nil, "refresh-cmd", "CMD",
                    "renew a signed link that expired (401, 403 or 410 after serving bytes): run CMD through /bin/sh with the expired URL as its last argument; the first line it prints is the new URL, which must serve the same file (at most 60 s)"
                ) { settings, text throws(UsageError) in
                    guard !text.allSatisfy(\.isWhitespace) else { throw UsageError("--refresh-cmd needs a command") }
                    let command = RefreshCommand(command: text)
                    settings.options.refreshURL = { expired in try await command.refresh(expired) }
                },
                .value(
                    nil, "stall-timeout", "SECONDS",
                    "hand a connection's range to another after this long without data (default 5; 0.001 to 86400)"
                ) { settings, text throws(UsageError) in
                    settings.options.transfer.stallTimeout = try Parse.seconds(text, "stall-timeout")
                },
                .value(
                    nil, "connect-timeout", "SECONDS", "give up connecting after this long (default 15; 0.001 to 86400)"
                ) { settings, text throws(UsageError) in
                    settings.options.transfer.connectTimeout = try Parse.seconds(text, "connect-timeout")
                },
                .value(nil, "max-speed", "RATE", "cap the whole run at RATE bytes/s, e.g. 10M (at most 1T)") {
                    settings, text throws(UsageError) in
                    settings.maxSpeed = try Parse.bytes(text, "max-speed")
                },
                .flag(nil, "netrc", "read credentials from ~/.netrc") { $0.options.transfer.useNetrc = true },
                .value(
                    "H", "header", "'NAME: VALUE'",
                    "send this request header (never stored on disk; not Range or If-Range)"
                ) { settings, text throws(UsageError) in
                    settings.options.transfer.headerLines.append(try Parse.header(text))
                },
                .value(nil, "user-agent", "TEXT", "the User-Agent header") { settings, text throws(UsageError) in
                    settings.options.transfer.userAgent = try Parse.headerValue(text, "user-agent")
                },
                .value(nil, "proxy", "URL", "use this proxy") { $0.options.transfer.proxy = $1 },
                .flag(
                    nil, "http2",
                    "offer HTTP/2 over TLS (default HTTP/1.1; either way each range has a TCP connection of its own)"
                ) {
                    $0.options.transfer.httpVersion = .http2
                },
                .flag(
                    nil, "multiplex",
                    "let ranges to one host share a TCP connection as HTTP/2 streams (one flow; off by default)"
                ) {
                    $0.options.transfer.multiplex = true
                },
                .flag(nil, "insecure", "do not verify TLS certificates") { $0.options.transfer.insecure = true },
                .value(nil, "cacert", "FILE", "verify TLS certificates with the CAs in FILE") {
                    $0.options.transfer.caCertificates = $1
                },
                .flag("h", "help", "show this help") { $0.help = true },
                .flag(nil, "version", "show the version") { $0.version = true }
            ],
            details: listSyntax + "\n\n" + """
                Exit codes: 0 done, 1 network or server failure, 2 usage error, 3 verification failed,
                4 local I/O error, 5 another rangeget is downloading to the same file, 130 interrupted (the
                same command resumes it; a single stream only where the server then serves byte ranges;
                -o - never). A list exits with the code of its first failed entry in list order (130 when
                interrupted). With -o -, a reader that
                closes the pipe early ends the run with 0.
                """,
            habits: Suggestion.habits
        )
    }

    /// How a list for -i is written; in --help and in the man page's LISTS.
    static let listSyntax = """
        Lists (-i FILE, '-' for stdin): one file per line. Several URLs on a line are mirrors of one
        file. out=NAME on the line, or on an indented line below it, names the output (a base name
        inside -d DIR). A line of one URL ending in .meta4 or .metalink stands for the files that
        Metalink lists. '#' starts a comment; blank lines are skipped. For example:
          https://a.example/big.iso https://b.example/big.iso out=big.iso
          # named by the server (Content-Disposition) or by the URL:
          https://example.org/get?id=42
          https://example.org/tools.tar
            out=tools-1.2.tar
        """

    static func run(_ arguments: [String]) -> Int32 {
        var settings = GetSettings()
        let code = run(arguments, settings: &settings)
        // The trace of whatever ran, also of a run that failed.
        guard let trace = settings.options.trace else { return code }
        do throws(DownloadError) {
            try trace.write()
        } catch {
            warn("--trace: \(error.commandLineText)")
            return code == ExitCode.success.rawValue ? ExitCode.local.rawValue : code
        }
        return code
    }

    private static func run(_ arguments: [String], settings: inout GetSettings) -> Int32 {
        var urls: [String]
        do {
            urls = try command.parse(arguments, into: &settings)
            if settings.help {
                print(command.help)
                return ExitCode.success.rawValue
            }
            if settings.version {
                print(
                    """
                    rangeget \(RangeGetVersion.current) (commit \(RangeGetVersion.build))
                    \(RangeGetVersion.libraries)
                    checksums: \(RangeGetVersion.checksumLibrary)
                    """)
                return ExitCode.success.rawValue
            }
            if settings.metalink == nil, settings.inputFile == nil, urls.count == 1,
                MetalinkInput.namesMetalink(urls[0])
            {
                settings.metalink = urls.removeFirst()
            }
            if let metalink = settings.metalink {
                guard urls.isEmpty, settings.inputFile == nil else {
                    throw UsageError("give a Metalink, URLs or -i LIST, one of them")
                }
                let reading = try MetalinkInput.read(metalink, options: settings.options)
                if reading.entries.count == 1, reading.problems.isEmpty {
                    urls = try settings.take(reading.entries[0])
                } else {
                    guard settings.output == nil else {
                        throw UsageError(
                            "-o names one file; \(metalink) lists \(reading.entries.count + reading.problems.count)")
                    }
                    guard settings.checksumFile == nil else {
                        throw UsageError("--checksum-file goes with -i; a Metalink carries its own hashes")
                    }
                    return BatchRun(entries: reading.entries, problems: reading.problems, settings: settings)
                        .run(jobs: settings.jobs ?? settings.options.connections)
                }
            }
            if let list = settings.inputFile {
                guard urls.isEmpty else {
                    throw UsageError("give URLs either on the command line or with -i, not both")
                }
                guard settings.output == nil else {
                    throw UsageError("-o names one file; with -i use out=NAME in the list")
                }
                try validate(urls: ["http://list/"], settings: settings)
                // A line naming a Metalink (`*.meta4`, `*.metalink`) stands for the files it lists.
                let reading = MetalinkInput.expanding(
                    ListFile(parsing: try readList(list)), options: settings.options)
                guard !reading.entries.isEmpty || !reading.problems.isEmpty else {
                    throw UsageError("\(list) lists no URL")
                }
                let checksums = try settings.checksumFile.map { file throws(UsageError) in
                    let text = try readList(file)
                    do throws(DownloadError) { return try Checksum.list(parsing: text) } catch {
                        throw UsageError(error.problem)
                    }
                }
                for notice in reading.entries.compactMap(\.outputNotice) { warn(notice) }
                return BatchRun(
                    entries: reading.entries, problems: reading.problems, settings: settings, checksums: checksums
                )
                .run(jobs: settings.jobs ?? settings.options.connections)
            }
            if settings.checksumFile != nil {
                throw UsageError("--checksum-file goes with -i; for one file use --checksum")
            }
            try validate(urls: urls, settings: settings)
            if settings.output == "-" {
                guard !settings.json else {
                    throw UsageError("--json prints on stdout, which -o - fills with the file")
                }
                return stream(urls, settings: settings)
            }
        } catch {
            return fail("\(error)", .usage)
        }
        if let total = settings.maxSpeed { settings.options.transfer.rateLimit = RateLimit(bytesPerSecond: total) }
        let destination: Destination =
            settings.output.map { .file(joined(settings.directory, $0)) }
            ?? .directory(settings.directory ?? ".")
        let download = Download(mirrors: urls, destination: destination, options: settings.options)
        let display = ProgressDisplay(quiet: settings.quiet || settings.json)
        let interrupts = InterruptHandler { if !download.stop() { exit(ExitCode.interrupted.rawValue) } }
        defer { interrupts.cancel() }
        // Ctrl-C promises no more than the next run will do.
        let resumability = Mutex(Resumability.resumable)
        let retries = Mutex(RetryKinds())
        // Whether a partial download with bytes in it is there to resume.
        let kept = Mutex(false)
        do {
            let quiet = settings.quiet
            let result = try download.run { event in
                resumability.withLock { $0 = $0.after(event) }
                switch event {
                case let .reusing(bytes) where bytes > 0: kept.withLock { $0 = true }
                case let .progress(progress) where progress.bytesDone > 0: kept.withLock { $0 = true }
                default: break
                }
                if case let .retry(_, cause, _, _, _, _) = event { retries.withLock { $0.add(cause) } }
                report(event, display: display, quiet: quiet)
            }
            display.clear()
            if settings.json {
                print(JSONSummary(result: result).encoded())
            } else if !settings.quiet {
                // Said to people, so on stderr: stdout carries only what a program reads (--json, -o -).
                display.message(
                    result.alreadyComplete
                        ? skipped(result)
                        : summary(
                            result, retries: retries.withLock { $0 },
                            connections: result.connectionCount?.peak ?? settings.options.connections))
            }
            return ExitCode.success.rawValue
        } catch {
            display.clear()
            let code = ExitCode(error)
            if settings.json {
                let file = settings.output.map { joined(settings.directory, $0) }
                print(JSONSummary(urls: urls, error: error, code: code, file: file).encoded())
            }
            if code == .interrupted {
                if !settings.quiet { display.message(resumability.withLock { $0 }.interruptedMessage) }
                return code.rawValue
            }
            // An error with a remedy of its own (a manifest that asks for
            // --restart) is not followed by a promise that the same command resumes.
            let resumes = (code == .network || code == .local) && error.remedy == nil
            let note = resumes ? resumability.withLock { $0 }.keptMessage(kept.withLock { $0 }) : nil
            return fail(
                error.commandLineText + expiryHint(error, settings: settings, kept: kept.withLock { $0 })
                    + (note.map { "; " + $0 } ?? ""), code)
        }
    }

    /// What renews a signed link that expired, after a refusal a link's
    /// expiry gives (401, 403, 410) once bytes were `kept`, when nothing was
    /// given to renew it.
    static func expiryHint(_ error: DownloadError, settings: GetSettings, kept: Bool) -> String {
        guard kept, settings.options.refreshURL == nil, let status = error.httpStatus,
            [401, 403, 410].contains(status)
        else { return "" }
        return "; --refresh-cmd CMD renews an expired link"
    }

    private static func readList(_ path: String) throws(UsageError) -> String {
        if path == "-" {
            var text = ""
            while let line = readLine(strippingNewline: false) { text += line }
            return text
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason =
                access(path, R_OK) != 0
                ? systemReason(errno) : isDirectory(path) ? systemReason(EISDIR) : systemReason(EIO)
            throw UsageError("cannot read input file \(path): \(reason)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    private static func validate(urls: [String], settings: GetSettings) throws(UsageError) {
        guard !urls.isEmpty else { throw UsageError("no URL given (see 'rangeget --help')") }
        // `rangeget statsu`: a plain word close to a command's name meant the command.
        for url in urls where !url.contains(where: { "./:".contains($0) }) {
            if let command = Suggestion.closest(to: url, among: Subcommand.names) {
                throw UsageError(
                    "unknown command '\(url)'; did you mean 'rangeget \(command)'? (see 'rangeget --help')")
            }
        }
        for url in urls { try CommandLineURL.check(url) }
        if let directory = settings.directory {
            try OutputDirectory.prepare(directory, create: true, name: "--dir \(directory)")
        }
        if let output = settings.output, output != "-" {
            let path = joined(settings.directory, output)
            // Split as the download splits it (by bytes, as the kernel does).
            let folder = StateFile.directory(of: path)
            try OutputDirectory.prepare(folder, create: true, name: "the directory \(folder) of --output")
        }
    }

    static func joined(_ directory: String?, _ path: String) -> String {
        guard let directory, !path.hasPrefix("/") else { return path }
        return directory.hasSuffix("/") ? directory + path : directory + "/" + path
    }

    /// Shows `event` on `display`: progress, and a message for what the user
    /// should know. `file` (a list's entry) starts each message that does not
    /// name its URL already, so that a list's messages say which file they are about.
    /// `streaming`: to stdout (`-o -`), where nothing is kept to resume.
    static func report(
        _ event: DownloadEvent, display: ProgressDisplay, quiet: Bool, file: @autoclosure () -> String? = nil,
        streaming: Bool = false
    ) {
        func say(_ message: String) {
            if !quiet { display.message(file().map { "\($0): \(message)" } ?? message) }
        }
        switch event {
        case let .progress(progress):
            display.show(progress)
        case let .probed(remote) where remote.size == nil:
            say(
                "the server does not say how long the file is: downloading as one stream"
                    + (streaming ? "" : " (not resumable)"))
        case let .probed(remote) where !remote.acceptsRanges:
            say(
                "the server does not serve byte ranges: downloading as one stream"
                    + (streaming ? "" : " (a later run resumes it only if the server then serves them)"))
        case let .restarting(reason):
            say(reason)
        case let .reusing(bytes):
            display.discount(bytes)
            say("resuming: \(ByteCount.format(bytes)) already done")
        case let .mirrorDropped(url, reason):
            if !quiet { display.message("dropping mirror \(url): \(reason)") }
        case let .notice(message):
            say(message)
        case let .retry(_, _, reason, delay, attempt, attempts) where delay >= 1:
            // A wait long enough to notice is said once per attempt, not once per connection.
            if announcedWaits.withLock({ $0.insert(attempt).inserted }) {
                say("\(reason); retrying: attempt \(attempt) of \(attempts) in \(Int(delay.rounded())) s")
            }
        case .probed, .retry, .transfer, .fetched, .finished, .paused, .resumed:
            break
        }
    }

    /// The attempts whose retry `report` has said.
    private static let announcedWaits = Mutex(Set<Int>())

    /// The line for a file that was there already, still the server's.
    private static func skipped(_ result: DownloadResult) -> String {
        "\(result.path) is already complete (\(ByteCount.format(result.size)), the same as the server's): nothing to do"
    }

    /// The line that ends a download, `connections` being `-n`.
    static func summary(_ result: DownloadResult, retries: RetryKinds, connections: Int) -> String {
        let rate = result.seconds > 0 ? Double(result.bytesFetched) / result.seconds : 0
        var line =
            result.path == "-"
            ? "streamed \(ByteCount.format(result.size)) to stdout"
            : "saved \(result.path) (\(ByteCount.format(result.size)))"
        line += " in \(String(format1: result.seconds)) s"
        // Nothing fetched has no rate: "0 B/s" read as a stalled run.
        if result.bytesFetched > 0 { line += ", \(ByteCount.format(Int64(saturating: rate)))/s" }
        if result.bytesReused > 0 {
            let all = result.bytesFetched == 0 ? "all " : ""
            line += ", \(all)\(ByteCount.format(result.bytesReused)) reused from an earlier run"
        }
        if let retried = retries.phrase(total: result.retries) { line += ", " + retried }
        line += ", \(result.tcpConnections) TCP connection\(result.tcpConnections == 1 ? "" : "s")"
        let versions = Set(result.mirrors.compactMap(\.httpVersion)).sorted()
        if !versions.isEmpty { line += " over " + versions.map { "HTTP/\($0)" }.joined(separator: " and ") }
        if result.tcpConnections > connections {
            // More than -n is no broken limit: say why.
            line +=
                " (at most \(connections) at once: a transfer cut short, by the server, a steal or a race, closes its connection)"
        }
        if result.mirrors.count > 1 {
            func host(_ url: String) -> String {
                guard let components = URLComponents(string: url), let host = components.host else { return url }
                return components.port.map { "\(host):\($0)" } ?? host
            }
            // A mirror the first URL's response listed (`Link: rel=duplicate`) is marked so.
            let parts = result.mirrors.map { mirror in
                "\(host(mirror.url)) " + (mirror.discoveredIn == nil ? "" : "(discovered) ")
                    + (mirror.dropped == nil ? ByteCount.format(mirror.bytes) : "dropped")
            }
            line += "; mirrors: " + parts.joined(separator: ", ")
            // Each reason after the list, not in parentheses inside it: a reason may hold parentheses and commas of its own.
            for mirror in result.mirrors {
                if let dropped = mirror.dropped { line += "; \(host(mirror.url)) was dropped: \(dropped)" }
            }
        }
        return line
    }
}

/// Prints `rangeget: message` on stderr, escaped (it may quote a server or a list).
func warn(_ message: String) {
    writeToStandardError("rangeget: \(TerminalText.escaped(message))\n")
}

/// Prints `rangeget: message` on stderr and returns the exit code.
func fail(_ message: String, _ code: ExitCode) -> Int32 {
    warn(message)
    return code.rawValue
}

extension GetSettings {
    /// Downloads the one file of a Metalink as a single file: its URLs
    /// (returned), its name unless -o gives one, its size and pieces, and
    /// its hash unless --checksum gives one or pieces prove every byte.
    mutating func take(_ entry: DownloadList.Entry) throws(UsageError) -> [String] {
        if output == nil, let name = entry.output {
            output = name
        }
        // Pieces prove every byte; the whole-file hash is checked when there are none.
        if options.checksum == nil, entry.pieces == nil { options.checksum = entry.checksum }
        options.pieces = entry.pieces
        options.expectedSize = entry.size
        return entry.urls
    }
}
