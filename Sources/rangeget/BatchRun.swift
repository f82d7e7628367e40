// Several files in one run (`-i LIST`): every file's transfers run on one
// TransferLoop, one multi handle (a connection one file opened serves the
// next) whose connection limit is `-n`: a new file's first transfer comes
// before another transfer of a running one, so files go on in list order and
// a large one ends up with every connection the small ones no longer need.
// At most `--jobs` files are fetched at once, each on a thread of its own (a
// lane) for the steps that block (claiming the .part, a checksum). A file
// whose bytes are all fetched and verified hands its commit to the run's
// SyncGroup (a group commit: the more files wait for a flush, the more one
// flush commits) and its lane takes up the next file at once: a committer
// thread ends the file when its flush is done, so slow flushes never hold
// back the fetching and no thread waits per file. At most
// `unendedBeyondJobs` files wait so (each keeps its data file open); then
// the lanes wait too, so a disk that stays slow, or a `--json` reader that
// stops reading (the committer writes the lines), holds the fetching back
// before the open files run out. A file with a checksum to compute hands its
// turn on as soon as its bytes are fetched (the `fetched` event), and another
// lane is started when none is free to take it (up to `--jobs` more lanes,
// so a list of large files checked against a checksum list keeps its
// connections busy meanwhile). An entry whose URLs a running entry fetches
// (a URL listed twice) hands its turn on too, and waits for that one to end,
// then finds its file complete. A failed file does not stop the others; a
// line on stderr (also with -q), the summary and the exit code say which
// failed. Nothing is kept per finished file but its failure, so a list of
// 100,000 files runs in the memory of a short one; `--json` prints each
// file's object as it ends, then a summary line.
import Dispatch
import FoundationEssentials
import Glibc
import RangeGet
import Synchronization

final class BatchRun: Sendable {
    private let entries: [ListEntry]
    /// The list's lines that could not be read: each fails alone, reported as the run starts.
    private let problems: [ListProblem]
    private let settings: GetSettings
    private let display: ProgressDisplay
    private let state: Mutex<State>
    /// The group commit of every file of the list.
    private let syncs = SyncGroup()
    /// Serialises the lines of `--json` written by the lanes.
    private let output = Mutex(())
    /// The output directory as the run began (nil where it cannot be read,
    /// does not tell case apart, or holds many more entries than the list).
    private let directory: SharedDirectory?
    /// True when a file's opening request may ask for the whole file while
    /// the files still to start would take every free slot
    /// (`DownloadOptions.filesTakeFreeSlots`): when at least one lane runs per
    /// connection, so those files do start as slots free up. With fewer
    /// lanes (`-j` below `-n`, or a list shorter than `-n`), the files in
    /// flight share the connections, and each opening asks for the minimum
    /// split as a single download's does.
    private let wholeFileOpenings = Atomic<Bool>(false)
    /// Files a lane took up whose first request has not been sent yet: they
    /// will want a slot as surely as the files not taken yet. A file leaves
    /// the count as its opening is sent, as its first piece starts (a file
    /// resumed, or probed with HEAD, makes no opening), or as it ends (one
    /// already complete makes no request; an entry waiting for its URLs
    /// counts while it waits).
    private let firstRequestsDue = Atomic<Int>(0)
    /// `State.next`, for the loop's thread (which takes no lock of the run).
    private let filesTaken = Atomic<Int>(0)

    private struct State {
        var next = 0
        var running: [Int: Download] = [:]
        var progress: ListProgress
        var stopping = false
        /// Files ended, and of those the complete ones already there (skipped).
        var finished = 0
        var skipped = 0
        /// The files that failed, in the order they ended, with their exit codes.
        var failed: [(index: Int, code: ExitCode)] = []
        /// The URLs of the running files (`urlKey`), each with what a later
        /// entry of the same URLs waits on (made when one waits).
        var fetching: [String: DispatchGroup?] = [:]

        /// A URL listed twice is fetched once: while an entry of the same
        /// URLs runs, a later one waits for it to end (`work`), then finds
        /// its file complete (or, when it failed, tries again). Fetched at
        /// once, both fetched the file and the one that came second to its
        /// name failed. Takes the URLs `key` for an entry; when a running
        /// entry has them, returns what to wait on before asking again. An
        /// entry that waits holds no URLs, so none waits for it.
        mutating func takeURLs(_ key: String) -> DispatchGroup? {
            guard let waiting = fetching[key] else {
                fetching[key] = .some(nil)
                return nil
            }
            if let group = waiting { return group }
            let group = DispatchGroup()
            group.enter()
            fetching[key] = group
            return group
        }
    }

    /// `--checksum-file`'s digests by file name, nil without one.
    private let checksums: [String: Checksum]?
    /// Turns to fetch a file: `--jobs` of them (set in `run`).
    private let turns = DispatchSemaphore(value: 0)
    /// The lanes running, and the files not yet ended (a commit handed off
    /// ends on the committer's thread): `run` waits for both.
    private let lanes = DispatchGroup()
    private let files = DispatchGroup()
    /// Files a lane may start before the others end: `--jobs` fetched, and
    /// as many again as `unendedBeyondJobs` verified and waiting for their
    /// commit (set in `run`).
    private let unended = DispatchSemaphore(value: 0)
    /// 256, the bound when each waiting file kept a lane: on a disk whose
    /// flushes take 5 ms, 1000 files of 16 KiB took 0.220 s with 256 and
    /// 0.390 s with 64 (5 interleaved runs); 256 files keep 256 descriptors
    /// open, a quarter of the usual 1024.
    static let unendedBeyondJobs = 256
    /// Lanes not bound to a file (waiting for a turn, or about to), lanes
    /// started, and turns given but not yet taken: while fewer lanes are
    /// free than turns wait, another lane is started (two files handing
    /// their turns on at once may start one more than needed, never fewer).
    private let freeLanes = Atomic<Int>(0)
    private let laneCount = Atomic<Int>(0)
    private let waitingTurns = Atomic<Int>(0)

    /// What a lane keeps of its running file, its own: the run's lock is
    /// not taken for it (the lanes queued on that lock).
    private final class Lane: Sendable {
        /// True while the file holds a fetching turn (until `fetched`, or its end).
        let fetching = Atomic<Bool>(true)
        /// What the next run can make of the file, should it be interrupted.
        let resumability = Mutex(Resumability.resumable)
    }

    init(entries: [ListEntry], problems: [ListProblem] = [], settings: GetSettings, checksums: [String: Checksum]? = nil) {
        self.checksums = checksums
        self.entries = entries
        self.problems = problems
        state = Mutex(State(progress: ListProgress(files: entries.count)))
        var settings = settings
        if let total = settings.maxSpeed { settings.options.transfer.rateLimit = RateLimit(bytesPerSecond: total) }
        self.settings = settings
        display = ProgressDisplay(quiet: settings.quiet || settings.json)
        // Reading up to four names a file (a few microseconds) costs less
        // than the three lookups each file saves (10 us each on ext4).
        directory = SharedDirectory(directory: settings.directory ?? ".", limit: max(64, 4 * entries.count))
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
        guard !entries.isEmpty else { return finish() }
        let jobs = max(1, min(jobs, entries.count))
        wholeFileOpenings.store(jobs >= settings.options.connections, ordering: .relaxed)
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
        waitingTurns.store(jobs, ordering: .relaxed)
        for _ in 0..<jobs { turns.signal() }
        for _ in 0..<(jobs + Self.unendedBeyondJobs) { unended.signal() }
        // One multi handle and one connection limit for every file.
        let loop: TransferLoop
        do {
            loop = try TransferLoop(connections: settings.options.connections, multiplex: settings.options.transfer.multiplex)
        } catch {
            return fail(error.commandLineText, ExitCode(error))
        }
        // Every file of the list has the same transfer options (makeDownload).
        loop.recycleConnections(upTo: 2 * jobs)
        let interrupts = InterruptHandler { [self] in
            let downloads = state.withLock { state in
                state.stopping = true
                return Array(state.running.values)
            }
            downloads.forEach { $0.stop() }
        }
        defer { interrupts.cancel() }
        // Real threads: each lane blocks in a download, and the global dispatch
        // queue runs only about one blocking job per core. Up to `jobs` more
        // start while files whose checksums are computed, or entries waiting
        // for an earlier one of the same URLs, have handed their turns on.
        let limit = 2 * jobs
        for _ in 0..<jobs { addLane(loop: loop, limit: limit) }
        // No thread to be had at all: the list is fetched here, one file at a time.
        if laneCount.load(ordering: .relaxed) == 0 { work(loop: loop, limit: 0, counted: false) }
        lanes.wait()
        files.wait()
        display.clear()
        return finish()
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

    /// Starts a lane, unless `limit` lanes run or no thread can be had.
    private func addLane(loop: TransferLoop, limit: Int) {
        guard laneCount.add(1, ordering: .relaxed).newValue <= limit else {
            laneCount.subtract(1, ordering: .relaxed)
            return
        }
        freeLanes.add(1, ordering: .relaxed)
        lanes.enter()
        guard tryStartThread("rangeget lane", { [self] in work(loop: loop, limit: limit) }) else {
            freeLanes.subtract(1, ordering: .relaxed)
            laneCount.subtract(1, ordering: .relaxed)
            lanes.leave()
            return
        }
    }

    /// One lane: takes a turn, then the next entry, until none is left.
    private func work(loop: TransferLoop, limit: Int, counted: Bool = true) {
        defer { if counted { lanes.leave() } }
        while true {
            unended.wait()
            turns.wait()
            // The next entry, and its URLs taken for it (or what to wait on
            // while an entry of the same URLs runs): one lock for both.
            let taken = state.withLock { state -> (index: Int, earlier: DispatchGroup?)? in
                guard !state.stopping, state.next < entries.count else { return nil }
                defer {
                    state.next += 1
                    // Due before taken: the loop's thread, which reads `filesTaken`
                    // first, finds the file in one count at least.
                    firstRequestsDue.add(1, ordering: .relaxed)
                    filesTaken.store(state.next, ordering: .releasing)
                }
                return (state.next, state.takeURLs(Self.urlKey(entries[state.next])))
            }
            guard let (index, earlier) = taken else {
                // Nothing left to fetch: the turn goes to the next lane, which finds the same.
                turns.signal()
                unended.signal()
                return
            }
            if let earlier {
                // An entry of the same URLs runs: its turn goes on meanwhile,
                // to another lane if none is free, and this one waits.
                turns.signal()
                freeLanes.subtract(1, ordering: .relaxed)
                if freeLanes.load(ordering: .relaxed) < waitingTurns.load(ordering: .relaxed) {
                    addLane(loop: loop, limit: limit)
                }
                var waiting: DispatchGroup? = earlier
                while let group = waiting {
                    group.wait()
                    waiting = state.withLock { $0.takeURLs(Self.urlKey(entries[index])) }
                }
                freeLanes.add(1, ordering: .relaxed)
                turns.wait()
            }
            // Made outside the run's lock, which every lane takes for each file.
            let due = FirstRequestDue(self)
            let download = makeDownload(entries[index], loop: loop, due: due)
            let stopping = state.withLock { state in
                state.running[index] = download
                return state.stopping
            }
            // Ctrl-C came meanwhile: the download ends at once, interrupted.
            if stopping { download.stop() }
            freeLanes.subtract(1, ordering: .relaxed)
            waitingTurns.subtract(1, ordering: .relaxed)
            let lane = Lane()
            files.enter()
            download.runHandingOffCommit(onEvent: { [self] event in
                // A checksum to compute: the turn goes on meanwhile, to another lane if none is free.
                if case .fetched = event, verifiesChecksums {
                    handTurnOn(from: lane)
                    if freeLanes.load(ordering: .relaxed) < waitingTurns.load(ordering: .relaxed) {
                        addLane(loop: loop, limit: limit)
                    }
                }
                if case .pieceStarted = event { due.settle() }
                observe(event, of: index, lane: lane)
            }, ended: { [self] result in
                due.settle()
                end(index, with: result, lane: lane)
                unended.signal()
                files.leave()
            })
            handTurnOn(from: lane)
            freeLanes.add(1, ordering: .relaxed)
        }
    }

    /// One file's count in `firstRequestsDue` (added as the file is taken),
    /// taken away once: when its first request is sent, or when it ends
    /// without one.
    private final class FirstRequestDue: Sendable {
        private let run: BatchRun
        private let pending = Atomic<Bool>(true)

        init(_ run: BatchRun) {
            self.run = run
        }

        func settle() {
            if pending.exchange(false, ordering: .relaxed) { run.firstRequestsDue.subtract(1, ordering: .relaxed) }
        }
    }

    /// What identifies an entry's URLs in `State.fetching`.
    private static func urlKey(_ entry: ListEntry) -> String {
        entry.urls.count == 1 ? entry.urls[0] : entry.urls.joined(separator: "\n")
    }

    /// Ends file `index` with `result`: counted, and reported as it ended.
    private func end(_ index: Int, with result: Result<DownloadResult, DownloadError>, lane: Lane) {
        let key = Self.urlKey(entries[index])
        state.withLock { state in
            if let waiting = state.fetching.removeValue(forKey: key) { waiting?.leave() }
            state.running[index] = nil
            state.progress.end(index)
            state.finished += 1
            switch result {
            case let .success(done): if done.alreadyComplete { state.skipped += 1 }
            case let .failure(error): state.failed.append((index, ExitCode(error)))
            }
        }
        let resumability = lane.resumability.withLock { $0 }
        if settings.json {
            switch result {
            case let .success(done): printJSONLine(JSONSummary(result: done, line: entries[index].line))
            case let .failure(error):
                printJSONLine(JSONSummary(urls: entries[index].urls, error: error, code: ExitCode(error),
                                          line: entries[index].line))
            }
        }
        switch result {
        case let .success(done) where !settings.quiet && !settings.json:
            display.message(done.alreadyComplete
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

    private func makeDownload(_ entry: ListEntry, loop: TransferLoop, due: FirstRequestDue) -> Download {
        var options = settings.options
        options.transferLoop = loop
        options.syncGroup = syncs
        options.sharedDirectory = directory
        // Looked up by the name the file is saved under, known only after the probe (Content-Disposition).
        options.checksumList = checksums
        // InputList checked every URL as it read the list.
        options.urlsChecked = true
        if wholeFileOpenings.load(ordering: .relaxed) {
            options.filesTakeFreeSlots = { [self] free in
                due.settle()
                let notTaken = entries.count - filesTaken.load(ordering: .acquiring)
                return notTaken + firstRequestsDue.load(ordering: .relaxed) >= free
            }
        }
        let directory = settings.directory ?? "."
        let destination: Destination = entry.output.map { .file(GetCommand.joined(directory, $0)) }
            ?? .directory(directory)
        return Download(mirrors: entry.urls, destination: destination, options: options)
    }

    /// True when each file's digest is computed after its bytes are fetched
    /// (`--checksum-file`, or `--checksum` for every file of the list).
    private var verifiesChecksums: Bool {
        checksums != nil || settings.options.checksum != nil
    }

    /// Gives the fetching turn of `lane`'s file to the next lane, once.
    private func handTurnOn(from lane: Lane) {
        guard lane.fetching.exchange(false, ordering: .acquiringAndReleasing) else { return }
        waitingTurns.add(1, ordering: .relaxed)
        turns.signal()
    }

    /// Called by the files' lanes and the loop's thread at once: the run's
    /// lock is taken only for the progress of the whole run.
    private func observe(_ event: DownloadEvent, of index: Int, lane: Lane) {
        guard case let .progress(progress) = event else {
            lane.resumability.withLock { $0 = $0.after(event) }
            GetCommand.report(event, display: display, quiet: settings.quiet, file: Manifest.redacting(entries[index].urls[0]))
            return
        }
        guard display.draws else { return }
        let (figures, finished) = state.withLock { state in
            state.progress.update(index, progress)
            return (state.progress.figures(), state.finished)
        }
        // No map: the list's bytes are no one file's.
        display.show(figures.progress, prefix: "[\(finished)/\(entries.count) files]", mapped: false,
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
    private func finish() -> Int32 {
        let (started, skipped, failures, stopping) = state.withLock { ($0.next, $0.skipped, $0.failed, $0.stopping) }
        let notStarted = entries.count - started
        let files = entries.count + problems.count
        let failedCount = failures.count + notStarted + problems.count
        let firstFailure = (failures.map { (line: entries[$0.index].line, code: $0.code) }
            + problems.map { (line: $0.line, code: ExitCode.usage) }).min { $0.line < $1.line }
        let code = stopping || notStarted > 0 ? .interrupted : firstFailure?.code ?? .success
        if settings.json {
            for index in started..<entries.count {
                printJSONLine(JSONSummary(urls: entries[index].urls, error: .interrupted(keptResumeState: true),
                                          code: .interrupted, line: entries[index].line))
            }
            printJSONLine(BatchSummary(
                outcome: failedCount == 0 ? "complete" : code == .interrupted ? "interrupted" : "failed",
                exitCode: code.rawValue, fileCount: files, complete: files - failedCount,
                alreadyComplete: skipped, failed: failedCount, badLines: problems.count))
        } else if !settings.quiet, !entries.isEmpty {
            // (A list of bad lines only was all said as the run began.)
            let failedNames = failures.sorted { $0.index < $1.index }.map { Manifest.redacting(entries[$0.index].urls[0]) }
                + (problems.isEmpty ? [] : ["\(problems.count) bad \(problems.count == 1 ? "line" : "lines") of the list"])
                + (notStarted > 0 ? ["\(notStarted) not started"] : [])
            display.message("\(files - failedCount) of \(files) files downloaded"
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
}

/// `--checksum-file`: lines of `HEX  NAME` (or `HEX *NAME`) as sha256sum,
/// sha512sum, sha1sum and md5sum write them (LF or CRLF); the algorithm
/// follows from the digest's length. A name is a file in the `-d` directory;
/// a leading `./` is dropped.
enum ChecksumList {
    static func parse(_ text: String) throws(UsageError) -> [String: Checksum] {
        var checksums: [String: Checksum] = [:]
        for (index, line) in text.textLines.enumerated() {
            let trimmed = line.drop { $0 == " " }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let parts = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
            let algorithms: [Checksum.Algorithm] = [.sha256, .sha512, .sha1, .md5]
            guard parts.count == 2, let algorithm = algorithms.first(where: { $0.hexLength == parts[0].count }),
                  let checksum = Checksum(algorithm: algorithm, hex: parts[0]) else {
                throw UsageError("checksum file line \(index + 1): expected 'HEX  NAME'")
            }
            var name = parts[1].drop { $0 == " " }
            if name.hasPrefix("*") { name = name.dropFirst() }
            if name.hasPrefix("./") { name = name.dropFirst(2) }
            if let other = checksums[String(name)], other != checksum {
                throw UsageError("checksum file line \(index + 1): a second, different digest for \(name)")
            }
            checksums[String(name)] = checksum
        }
        return checksums
    }
}
