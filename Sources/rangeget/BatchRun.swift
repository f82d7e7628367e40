// Several files in one run (`-i LIST`): the wiring of the library's
// DownloadList to the terminal and to `--json`. The list runs on a session of
// its own whose connection limit is `-n` (DownloadList says how files share
// it); this says each file's end as it comes (a line on stderr, also with -q
// for a failure, or its `--json` object), draws the list's progress, and
// picks the exit code. Nothing is kept per finished file but its failure, so
// a list of 100,000 files runs in the memory of a short one; `--json` prints
// each file's object as it ends, then a summary line.
import Dispatch
import FoundationEssentials
import RangeGet
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class BatchRun: Sendable {
    private let entries: [DownloadList.Entry]
    /// The list's lines that could not be read: each fails alone, reported as the run starts.
    private let problems: [DownloadList.Problem]
    private let settings: GetSettings
    private let display: ProgressDisplay
    private let state: Mutex<State>
    /// Serialises the lines of `--json` written by the lanes.
    private let output = Mutex(())
    /// What the next run can make of each running file, should it be interrupted.
    private let resumability = Mutex<[Int: Resumability]>([:])

    private struct State {
        var progress: ListProgress
        /// Files ended.
        var finished = 0
        /// The files that failed, with their exit codes.
        var failed: [(index: Int, code: ExitCode)] = []
        /// TCP connections the completed files opened, probes included.
        var tcpConnections = 0
    }

    /// `--checksum-file`'s digests by file name, nil without one.
    private let checksums: [String: Checksum]?

    init(
        entries: [DownloadList.Entry], problems: [DownloadList.Problem] = [], settings: GetSettings,
        checksums: [String: Checksum]? = nil
    ) {
        self.checksums = checksums
        self.entries = entries
        self.problems = problems
        state = Mutex(State(progress: ListProgress(files: entries.count)))
        self.settings = settings
        display = ProgressDisplay(quiet: settings.quiet || settings.json)
    }

    /// Downloads every entry; returns the exit code.
    func run(jobs: Int) -> Int32 {
        // Said before anything starts, and also with -q: each bad line is a file not fetched.
        for problem in problems {
            if settings.json {
                printJSONLine(JSONSummary(urls: [], error: .usage(problem.message), code: .usage, line: problem.line))
            } else {
                display.message("failed: " + problem.message)
            }
        }
        guard !entries.isEmpty else { return finish(nil) }
        // Two malloc arenas, not glibc's eight per core: each lane's arena
        // keeps its own free memory. With a lane per file waiting for its
        // commit (before commits were handed off), 20,000 files of 4 KiB
        // peaked at 31.5-32.4 MiB against 35.7-40.9, in the same wall time.
        // Blocks up to 1 MiB stay in them: each file's request has a
        // receive buffer of 512 KiB, mapped and unmapped per file by
        // default. 1000 files of 16 KiB: 3.6k -> 1.75k page faults and
        // 195 -> 174 ms of CPU (medians of 15 runs, output on tmpfs).
        tuneMalloc(arenas: 2, largestKept: 1 << 20)
        Self.raiseOpenFileLimit()
        // One multi handle and one connection limit (-n) for every file.
        let session = DownloadSession(
            configuration: .init(
                connections: settings.options.connections, multiplex: settings.options.transfer.multiplex,
                maxBytesPerSecond: settings.maxSpeed))
        var options = settings.options
        // Looked up by the name the file is saved under, known only after the probe (Content-Disposition).
        options.checksumList = checksums
        let list = session.exclusiveList(entries, into: settings.directory ?? ".", options: options, jobs: jobs)
        let interrupts = InterruptHandler { list.stop() }
        defer { interrupts.cancel() }
        let summary = list.runBlocking(
            onEvent: { [self] index, event in observe(event, of: index) },
            onEnd: { [self] index, result in end(index, with: result) })
        display.clear()
        return finish(summary)
    }

    /// Raises the soft limit on open descriptors to the hard one, as Go's
    /// runtime does for every program: a list keeps up to `--jobs` + 256
    /// files open, with a socket per connection, and the usual soft 1024
    /// is the shell's default, not the system's limit (often 512 Ki).
    private static func raiseOpenFileLimit() {
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(resource, &limit)
    }

    /// Ends file `index` with `result`: counted, and reported as it ended.
    private func end(_ index: Int, with result: Result<DownloadResult, DownloadError>) {
        state.withLock { state in
            state.progress.end(index)
            state.finished += 1
            switch result {
            case let .success(done): state.tcpConnections += done.tcpConnections
            case let .failure(error): state.failed.append((index, ExitCode(error)))
            }
        }
        let resumability = self.resumability.withLock { $0.removeValue(forKey: index) } ?? .resumable
        if settings.json {
            switch result {
            case let .success(done): printJSONLine(JSONSummary(result: done, line: entries[index].line))
            case let .failure(error):
                printJSONLine(
                    JSONSummary(
                        urls: entries[index].urls, error: error, code: ExitCode(error),
                        line: entries[index].line))
            }
        }
        switch result {
        case let .success(done) where !settings.quiet && !settings.json:
            display.message(
                done.alreadyComplete
                    ? "\(done.path) is already complete (the same as the server's): skipped"
                    : "saved \(done.path) (\(ByteCount.format(done.size)))")
        case .failure(.interrupted):
            if !settings.quiet { display.message("failed: \(resumability.interruptedMessage)") }
        case let .failure(error):
            display.message("failed: \(error.commandLineText)")
        case .success:
            break
        }
    }

    /// Called by the files' lanes and the loop's thread at once: the run's
    /// lock is taken only for the progress of the whole run.
    private func observe(_ event: DownloadEvent, of index: Int) {
        guard case let .progress(progress) = event else {
            if case .probed = event {
                resumability.withLock { $0[index] = ($0[index] ?? .resumable).after(event) }
            } else if case .restarting = event {
                resumability.withLock { $0[index] = ($0[index] ?? .resumable).after(event) }
            }
            GetCommand.report(
                event, display: display, quiet: settings.quiet,
                file: OutgoingText.withoutUserinfo(entries[index].urls[0]))
            return
        }
        guard display.draws else { return }
        let (figures, finished) = state.withLock { state in
            state.progress.update(index, progress)
            return (state.progress.figures(), state.finished)
        }
        // No map: the list's bytes are no one file's.
        display.show(
            figures.progress, prefix: "[\(finished)/\(entries.count) files]", mapped: false,
            unknownSizes: figures.unknownSizes)
    }

    /// One JSON object on a line of stdout, written whole and flushed at
    /// once, so a script reading the pipe sees each file as it ends.
    private func printJSONLine(_ summary: some Encodable) {
        let line = JSONSummary.encode(summary) + "\n"
        output.withLock { _ in write(line, to: STDOUT_FILENO) }
    }

    /// Prints the summary and picks the exit code: 130 for a run that was
    /// interrupted (what a script waits for after Ctrl-C, whatever failed
    /// before it), else that of the first entry in list order that failed
    /// (a bad line's is 2), else 0.
    private func finish(_ summary: DownloadList.Summary?) -> Int32 {
        let (failures, tcpConnections) = state.withLock { ($0.failed, $0.tcpConnections) }
        let (started, skipped, stopping) = (
            summary?.started ?? 0, summary?.alreadyComplete ?? 0, summary?.stopped ?? false
        )
        let notStarted = entries.count - started
        let files = entries.count + problems.count
        let failedCount = failures.count + notStarted + problems.count
        let firstFailure =
            (failures.map { (line: entries[$0.index].line, code: $0.code) }
            + problems.map { (line: $0.line, code: ExitCode.usage) }).min { $0.line < $1.line }
        let code = stopping || notStarted > 0 ? .interrupted : firstFailure?.code ?? .success
        if settings.json {
            for index in started..<entries.count {
                printJSONLine(
                    JSONSummary(
                        urls: entries[index].urls, error: .interrupted(keptResumeState: true),
                        code: .interrupted, line: entries[index].line))
            }
            printJSONLine(
                BatchSummary(
                    outcome: failedCount == 0 ? "complete" : code == .interrupted ? "interrupted" : "failed",
                    exitCode: code.rawValue, fileCount: files, complete: files - failedCount,
                    alreadyComplete: skipped, failed: failedCount, badLines: problems.count,
                    tcpConnections: tcpConnections))
        } else if !settings.quiet, !entries.isEmpty {
            // (A list of bad lines only was all said as the run began.)
            let failedNames =
                failures.sorted { $0.index < $1.index }.map { OutgoingText.withoutUserinfo(entries[$0.index].urls[0]) }
                + (problems.isEmpty
                    ? [] : ["\(problems.count) bad \(problems.count == 1 ? "line" : "lines") of the list"])
                + (notStarted > 0 ? ["\(notStarted) not started"] : [])
            display.message(
                "\(files - failedCount) of \(files) files downloaded"
                    + (skipped > 0 ? " (\(skipped) already complete)" : "")
                    + (failedNames.isEmpty ? "" : "; failed: " + failedNames.joined(separator: ", ")))
        }
        return code.rawValue
    }
}

/// `--json` with a list: the last line, after one object per file.
struct BatchSummary: Encodable {
    var outcome: String
    var exitCode: Int32
    /// Files in the list.
    var fileCount: Int
    /// Files now complete at their final names, of which `alreadyComplete` were there before.
    var complete: Int
    var alreadyComplete: Int
    /// Files that failed, were interrupted or never started, and bad lines.
    var failed: Int
    /// Lines of the list that could not be read (each also has an object of its own).
    var badLines: Int
    /// TCP connections the files that completed opened, probes included
    /// (races and steals may open more over a run than `-n` lets be open at once).
    var tcpConnections: Int
}
