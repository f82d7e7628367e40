// DownloadList: the files of a list fetched on one session (`rangeget -i`).
// Every file's transfers run on the session's TransferLoop, one multi handle
// (a connection one file opened serves the next) whose connection limit is
// the session's: a new file's first transfer comes before another transfer
// of a running one, so files go on in list order and a large one ends up
// with every connection the small ones no longer need.
// At most `jobs` files are fetched at once, each on a thread of its own (a
// lane) for the steps that block (claiming the .part, a checksum). A file
// whose bytes are all fetched and verified hands its commit to the session's
// SyncGroup (a group commit: the more files wait for a flush, the more one
// flush commits) and its lane takes up the next file at once: a committer
// thread ends the file when its flush is done, so slow flushes never hold
// back the fetching and no thread waits per file. At most
// `unendedBeyondJobs` files wait so (each keeps its data file open); then
// the lanes wait too, so a disk that stays slow, or an `onEnd` that blocks
// (the command's `--json` lines, written by the committer), holds the
// fetching back before the open files run out. A file with a checksum to
// compute hands its turn on as soon as its bytes are fetched (the `fetched`
// event), and another lane is started when none is free to take it (up to
// `jobs` more lanes, so a list of large files checked against a checksum
// list keeps its connections busy meanwhile). An entry whose URLs a running
// entry fetches (a URL listed twice) hands its turn on too, and waits for
// that one to end, then finds its file complete. A failed file does not stop
// the others. Nothing is kept per finished file but a failure's index, so a
// list of 100,000 files runs in the memory of a short one.
import Dispatch
import FoundationEssentials
import Synchronization
import SystemSupport

/// The files of a list, fetched on one ``DownloadSession``: at most
/// ``jobs`` at once, in list order, sharing the session's connections.
///
/// Make one with ``DownloadSession/list(_:into:options:jobs:)``, from
/// entries of your own or from a ``ListFile``. Each entry is a
/// ``Download`` of its own (the list's options, its own destination); a
/// failed entry does not stop the others. A URL listed twice is fetched
/// once: the later entry waits for the earlier and then finds its file
/// complete.
public final class DownloadList: Sendable {
    /// What a run of the list did, once every file has ended.
    public struct Summary: Sendable, Equatable {
        /// Entries in the list.
        public var entries: Int
        /// Entries that were taken up (the others never started: the list was stopped).
        public var started: Int
        /// Entries complete at their final names, of which `alreadyComplete` were there before.
        public var complete: Int
        /// Entries whose file was there already, shown to be the server's.
        public var alreadyComplete: Int
        /// The entries that failed (interrupted ones too), in list order.
        public var failed: [Int]
        /// True when ``DownloadList/stop()`` (or a cancelled task) stopped the run.
        public var stopped: Bool
    }

    /// The list's files, in order.
    public let entries: [Entry]
    /// Where the files are saved.
    public let directory: String
    /// The options of every file of the list.
    public let options: DownloadOptions
    /// Files fetched at once.
    public let jobs: Int
    /// The session whose connections the list shares.
    public let session: DownloadSession

    /// True when the list has the session to itself, so that every
    /// connection in it was made with the list's options: then the
    /// connection of a small file's opening serves the next one's
    /// (`TransferLoop.recycleConnections`).
    private let ownsSession: Bool
    private let state = Mutex(State())
    /// The output directory as the run began (nil where it cannot be read,
    /// does not tell case apart, or holds many more entries than the list).
    private let listedDirectory: SharedDirectory?
    /// True when a file's opening request may ask for the whole file while
    /// the files still to start would take every free slot
    /// (`DownloadOptions.filesTakeFreeSlots`): when at least one lane runs per
    /// connection, so those files do start as slots free up. With fewer
    /// lanes (`jobs` below the connections, or a list shorter than them),
    /// the files in flight share the connections, and each opening asks for
    /// the minimum split as a single download's does.
    private let wholeFileOpenings: Bool
    /// Files a lane took up whose first request has not been sent yet: they
    /// will want a slot as surely as the files not taken yet. A file leaves
    /// the count as its opening is sent, as its first piece starts (a file
    /// resumed, or probed with HEAD, makes no opening), or as it ends (one
    /// already complete makes no request; an entry waiting for its URLs
    /// counts while it waits).
    private let firstRequestsDue = Atomic<Int>(0)
    /// `State.next`, for the loop's thread (which takes no lock of the list).
    private let filesTaken = Atomic<Int>(0)

    private struct State {
        var next = 0
        var running: [Int: Download] = [:]
        var stopping = false
        var ran = false
        var complete = 0
        var alreadyComplete = 0
        var failed: [Int] = []
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

    /// Turns to fetch a file: `jobs` of them (set in `run`).
    private let turns = DispatchSemaphore(value: 0)
    /// The lanes running, and the files not yet ended (a commit handed off
    /// ends on the committer's thread): `run` waits for both.
    private let lanes = DispatchGroup()
    private let files = DispatchGroup()
    /// Files a lane may start before the others end: `jobs` fetched, and
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

    /// What a lane keeps of its running file: whether it still holds a
    /// fetching turn (until `fetched`, or its end).
    private final class Lane: Sendable {
        let fetching = Atomic<Bool>(true)
    }

    /// The callbacks of one run.
    private struct Observers: Sendable {
        let event: @Sendable (Int, DownloadEvent) -> Void
        let end: @Sendable (Int, Result<DownloadResult, DownloadError>) -> Void
    }

    init(
        entries: [Entry], directory: String, options: DownloadOptions, jobs: Int?, session: DownloadSession,
        ownsSession: Bool
    ) {
        self.entries = entries
        self.directory = directory
        self.options = options
        self.jobs = max(1, min(jobs ?? options.connections, max(1, entries.count)))
        self.session = session
        self.ownsSession = ownsSession
        wholeFileOpenings = self.jobs >= min(options.connections, session.configuration.connections)
        // Reading up to four names a file (a few microseconds) costs less
        // than the three lookups each file saves (10 us each on ext4).
        listedDirectory = SharedDirectory(directory: directory, limit: max(64, 4 * entries.count))
    }

    /// Fetches every entry, blocking the calling thread until every file
    /// has ended (for a program without Swift concurrency, such as the
    /// `rangeget` command). `onEvent` hears each file's events with its
    /// index in ``entries``, from the threads that run it; `onEnd` hears
    /// each file's outcome once, in the order they end. A list runs once: a
    /// second `run` returns at once with nothing started.
    @available(*, noasync, message: "blocks the calling thread; use 'await run(onEvent:onEnd:)'")
    @discardableResult
    public func runBlocking(
        onEvent: @escaping @Sendable (_ entry: Int, DownloadEvent) -> Void = { _, _ in },
        onEnd: @escaping @Sendable (_ entry: Int, Result<DownloadResult, DownloadError>) -> Void = { _, _ in }
    )
        -> Summary
    {
        run(Observers(event: onEvent, end: onEnd))
    }

    /// Fetches every entry and returns when every file has ended (see
    /// ``runBlocking(onEvent:onEnd:)``). The files run on the list's own
    /// threads; cancelling the task stops the list (``stop()``).
    @discardableResult
    public func run(
        onEvent: @escaping @Sendable (_ entry: Int, DownloadEvent) -> Void = { _, _ in },
        onEnd: @escaping @Sendable (_ entry: Int, Result<DownloadResult, DownloadError>) -> Void = { _, _ in }
    )
        async -> Summary
    {
        let observers = Observers(event: onEvent, end: onEnd)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Summary, Never>) in
                startThread("rangeget list") { [self] in continuation.resume(returning: run(observers)) }
            }
        } onCancel: {
            stop()
        }
    }

    /// Stops the list soon: running files stop keeping their resume state
    /// (`Download.stop()`), and no other starts. Safe from any thread.
    public func stop() {
        let downloads = state.withLock { state in
            state.stopping = true
            return Array(state.running.values)
        }
        for download in downloads { download.stop() }
    }

    private func run(_ observers: Observers) -> Summary {
        let first = state.withLock { state in
            defer { state.ran = true }
            return !state.ran
        }
        guard first, !entries.isEmpty else { return summary() }
        waitingTurns.store(jobs, ordering: .relaxed)
        for _ in 0..<jobs { turns.signal() }
        for _ in 0..<(jobs + Self.unendedBeyondJobs) { unended.signal() }
        let loop: TransferLoop
        do {
            loop = try session.transferLoop()
        } catch {
            // No multi handle: every file fails alike.
            for index in entries.indices { observers.end(index, .failure(error)) }
            state.withLock { $0.failed = Array(entries.indices) }
            return summary()
        }
        if ownsSession { loop.recycleConnections(upTo: 2 * jobs) }
        // Real threads: each lane blocks in a download, and the global dispatch
        // queue runs only about one blocking job per core. Up to `jobs` more
        // start while files whose checksums are computed, or entries waiting
        // for an earlier one of the same URLs, have handed their turns on.
        let limit = 2 * jobs
        for _ in 0..<jobs { addLane(limit: limit, observers: observers) }
        // No thread to be had at all: the list is fetched here, one file at a time.
        if laneCount.load(ordering: .relaxed) == 0 { work(limit: 0, observers: observers, counted: false) }
        lanes.wait()
        files.wait()
        return summary()
    }

    private func summary() -> Summary {
        state.withLock { state in
            Summary(
                entries: entries.count, started: state.next, complete: state.complete,
                alreadyComplete: state.alreadyComplete, failed: state.failed.sorted(), stopped: state.stopping)
        }
    }

    /// Starts a lane, unless `limit` lanes run or no thread can be had.
    private func addLane(limit: Int, observers: Observers) {
        guard laneCount.add(1, ordering: .relaxed).newValue <= limit else {
            laneCount.subtract(1, ordering: .relaxed)
            return
        }
        freeLanes.add(1, ordering: .relaxed)
        lanes.enter()
        guard tryStartThread("rangeget lane", { [self] in work(limit: limit, observers: observers) }) else {
            freeLanes.subtract(1, ordering: .relaxed)
            laneCount.subtract(1, ordering: .relaxed)
            lanes.leave()
            return
        }
    }

    /// One lane: takes a turn, then the next entry, until none is left.
    private func work(limit: Int, observers: Observers, counted: Bool = true) {
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
                    addLane(limit: limit, observers: observers)
                }
                var waiting: DispatchGroup? = earlier
                while let group = waiting {
                    group.wait()
                    waiting = state.withLock { $0.takeURLs(Self.urlKey(entries[index])) }
                }
                freeLanes.add(1, ordering: .relaxed)
                turns.wait()
            }
            // Made outside the list's lock, which every lane takes for each file.
            let due = FirstRequestDue(self)
            let download = makeDownload(entries[index], due: due)
            let stopping = state.withLock { state in
                state.running[index] = download
                return state.stopping
            }
            // Stopped meanwhile: the download ends at once, interrupted.
            if stopping { download.stop() }
            freeLanes.subtract(1, ordering: .relaxed)
            waitingTurns.subtract(1, ordering: .relaxed)
            let lane = Lane()
            files.enter()
            download.runHandingOffCommit(
                onEvent: { [self] event in
                    // A checksum to compute: the turn goes on meanwhile, to another lane if none is free.
                    if case .fetched = event, verifiesChecksums {
                        handTurnOn(from: lane)
                        if freeLanes.load(ordering: .relaxed) < waitingTurns.load(ordering: .relaxed) {
                            addLane(limit: limit, observers: observers)
                        }
                    }
                    if case .transfer(.pieceStarted) = event { due.settle() }
                    observers.event(index, event)
                },
                ended: { [self] result in
                    due.settle()
                    end(index, with: result)
                    observers.end(index, result)
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
        private let list: DownloadList
        private let pending = Atomic<Bool>(true)

        init(_ list: DownloadList) {
            self.list = list
        }

        func settle() {
            if pending.exchange(false, ordering: .relaxed) { list.firstRequestsDue.subtract(1, ordering: .relaxed) }
        }
    }

    /// What identifies an entry's URLs in `State.fetching`.
    private static func urlKey(_ entry: Entry) -> String {
        entry.urls.count == 1 ? entry.urls[0] : entry.urls.joined(separator: "\n")
    }

    /// Counts file `index`'s end, and lets an entry of the same URLs go on.
    private func end(_ index: Int, with result: Result<DownloadResult, DownloadError>) {
        let key = Self.urlKey(entries[index])
        state.withLock { state in
            if let waiting = state.fetching.removeValue(forKey: key) { waiting?.leave() }
            state.running[index] = nil
            switch result {
            case let .success(done):
                state.complete += 1
                if done.alreadyComplete { state.alreadyComplete += 1 }
            case .failure:
                state.failed.append(index)
            }
        }
    }

    private func makeDownload(_ entry: Entry, due: FirstRequestDue) -> Download {
        var options = options
        options.urlsChecked = entry.urlsChecked
        options.syncGroup = session.syncGroup
        options.sharedDirectory = listedDirectory
        // What the entry's publisher gave (a Metalink) wins over the list's own.
        // Pieces prove every byte: the whole-file hash only without them.
        if let checksum = entry.checksum, entry.pieces == nil { options.checksum = checksum }
        if let pieces = entry.pieces { options.pieces = pieces }
        if let size = entry.size { options.expectedSize = size }
        if wholeFileOpenings {
            let count = entries.count
            options.filesTakeFreeSlots = { [self] free in
                due.settle()
                let notTaken = count - filesTaken.load(ordering: .acquiring)
                return notTaken + firstRequestsDue.load(ordering: .relaxed) >= free
            }
        }
        let destination: Destination = entry.output.map { .file(Self.joined(directory, $0)) } ?? .directory(directory)
        return Download(mirrors: entry.urls, destination: destination, window: nil, options: options, session: session)
    }

    /// `name` inside `directory`.
    private static func joined(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// True when each file's digest is computed after its bytes are fetched
    /// (a checksum list, or one checksum for every file of the list).
    private var verifiesChecksums: Bool {
        options.checksumList != nil || options.checksum != nil
    }

    /// Gives the fetching turn of `lane`'s file to the next lane, once.
    private func handTurnOn(from lane: Lane) {
        guard lane.fetching.exchange(false, ordering: .acquiringAndReleasing) else { return }
        waitingTurns.add(1, ordering: .relaxed)
        turns.signal()
    }
}
