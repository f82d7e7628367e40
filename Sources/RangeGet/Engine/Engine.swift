// Engine: the transfer loop. One thread drives one curl multi handle and every
// easy handle (invariant 4); other threads only call `requestStop`, which
// wakes the loop. Each turn of the loop: top up idle connections with work,
// let libcurl move bytes (the write callbacks pwrite them), settle finished
// transfers, catch stalls, publish progress, checkpoint.
import CCurl
import Synchronization

/// Settings of one engine run.
struct EngineSettings: Sendable {
    var connections: Int
    var minimumSplit: Int64
    /// Attempts at one piece that end with no byte written before the download fails.
    var retries: Int
    /// First backoff delay in seconds; doubles per failure up to `retryWaitLimit`.
    var retryWait: Double
    var retryWaitLimit: Double
    var checkpointInterval: Double
    /// Seconds without a byte before a transfer is abandoned and its range requeued.
    var stallTimeout: Double
    /// One plain GET from byte 0 instead of ranged requests.
    var plain: Bool
}

/// How an engine run ended.
enum EngineOutcome: Sendable {
    /// Every byte is written; `size` is the final length (learned here for a stream of unknown length).
    case complete(size: Int64)
    /// `requestStop` was called; the manifest holds everything durable.
    case stopped
    /// The remote file is not the one the download started with.
    case remoteChanged(String)
    /// Ranged requests don't work on this server after all.
    case rangesUnsupported(String)
    /// The download cannot go on.
    case failed(DownloadError)
}

final class Engine: @unchecked Sendable {
    // Every stored property but `stopRequested` and `multi` (whose wakeup is
    // thread-safe) is touched only by the thread inside `run()`.
    private let settings: EngineSettings
    private let remote: RemoteFile
    private let file: OutputFile
    private let multi: MultiHandle
    private let planner: Planner
    private let checkpointer: Checkpointer?
    private let onEvent: @Sendable (DownloadEvent) -> Void
    private let stopRequested = Atomic<Bool>(false)

    private var connections: [Connection] = []
    private var queue: [Piece] = []
    private var manifest: Manifest?
    private var written: RangeSet
    private var connectionLimit: Int
    /// Typical seconds from a request to its first byte (moving average).
    private var setupDelay = 0.1
    private var lastCheckpoint = 0.0
    private var meter = RateMeter()
    private var lastReport = 0.0
    private(set) var retries = 0

    init(
        remote: RemoteFile, file: OutputFile, manifest: Manifest?, manifestPath: String?,
        settings: EngineSettings, options: TransferOptions, calls: SystemCalls,
        onEvent: @escaping @Sendable (DownloadEvent) -> Void
    ) throws {
        self.settings = settings
        self.remote = remote
        self.file = file
        self.manifest = manifest
        self.onEvent = onEvent
        multi = try MultiHandle()
        planner = Planner(connections: settings.connections, minimumSplit: settings.minimumSplit)
        written = manifest?.done ?? RangeSet()
        connectionLimit = settings.plain ? 1 : settings.connections
        if let manifestPath, manifest != nil {
            checkpointer = Checkpointer(file: file, manifestPath: manifestPath, calls: calls)
        } else {
            checkpointer = nil
        }
        let expected = Expectation(remote)
        for id in 0..<connectionLimit {
            connections.append(try Connection(
                id: id, file: file, expected: expected, url: remote.effectiveURL, options: options))
        }
        try multi.set(CURLMOPT_MAXCONNECTS, max(16, settings.connections * 2))
    }

    /// Asks the loop to stop soon, keeping resume state; safe from any thread or signal handler queue.
    func requestStop() {
        stopRequested.store(true, ordering: .relaxed)
        multi.wakeup()
    }

    /// Bytes received and written by this run.
    var bytesFetched: Int64 { connections.reduce(0) { $0 + $1.totalBytes } }

    /// Runs the download until it completes, fails or is stopped.
    func run() -> EngineOutcome {
        let size = remote.size
        if settings.plain {
            queue = [Piece(range: ByteRange(0, size ?? Int64.max))]
            written = RangeSet()
        } else if let size {
            queue = planner.plan(written.complement(size: size)).map { Piece(range: $0) }
        }
        let started = MonotonicClock.now()
        lastCheckpoint = started
        meter.add(bytes: currentlyDone, at: started)
        let outcome = loop()
        for connection in connections where connection.isBusy {
            multi.remove(connection.easy)
            settle(connection, connection.abandon(reason: "stopped"), now: MonotonicClock.now())
        }
        switch outcome {
        case .complete, .remoteChanged, .rangesUnsupported:
            break
        case .stopped, .failed:
            if let failure = saveFinalCheckpoint() {
                if case .failed = outcome { return outcome }
                return .failed(.io(failure))
            }
        }
        report(now: MonotonicClock.now(), force: true)
        return outcome
    }

    private func loop() -> EngineOutcome {
        while true {
            let now = MonotonicClock.now()
            if stopRequested.load(ordering: .relaxed) { return .stopped }
            if let outcome = startIdleConnections(now: now) { return outcome }
            if queue.isEmpty && !connections.contains(where: \.isBusy) {
                return .complete(size: remote.size ?? written.ranges.last?.end ?? 0)
            }
            do {
                _ = try multi.perform()
            } catch {
                return .failed(.network(url: remote.effectiveURL, message: error.message))
            }
            while let (easy, result) = multi.nextFinished() {
                guard let connection = connections.first(where: { $0.easy.raw == easy }) else { continue }
                multi.remove(connection.easy)
                let now = MonotonicClock.now()
                if let outcome = settle(connection, connection.finish(result: result, now: now), now: now) {
                    return outcome
                }
            }
            if let outcome = abandonStalledTransfers(now: now) { return outcome }
            report(now: now, force: false)
            if let failure = checkpointer?.failure { return .failed(.io(failure)) }
            checkpointIfDue(now: now)
            do {
                try multi.poll(timeoutMilliseconds: pollTimeout(now: now))
            } catch {
                return .failed(.network(url: remote.effectiveURL, message: error.message))
            }
        }
    }

    // MARK: - Handing out work

    /// Gives every idle connection within the limit a piece: the first ready
    /// piece of the queue, else half of the largest piece in flight.
    private func startIdleConnections(now: Double) -> EngineOutcome? {
        var busy = connections.count(where: \.isBusy)
        for connection in connections where !connection.isBusy && busy < connectionLimit {
            guard let piece = nextPiece(for: connection, now: now) else { break }
            do {
                try connection.start(piece, plain: settings.plain, ifRange: remote.ifRange, now: now)
                try multi.add(connection.easy)
            } catch {
                return .failed(.network(url: remote.effectiveURL, message: "\(error)"))
            }
            busy += 1
        }
        return nil
    }

    private func nextPiece(for thief: Connection, now: Double) -> Piece? {
        if let index = queue.firstIndex(where: { $0.notBefore <= now }) {
            return queue.remove(at: index)
        }
        guard queue.isEmpty, !settings.plain else { return nil }
        return steal(for: thief, now: now)
    }

    /// The end of the piece that will take longest to finish, cut so that
    /// victim and thief finish together. A victim whose rate is not known yet
    /// is assumed to run like the thief did on its last piece.
    private func steal(for thief: Connection, now: Double) -> Piece? {
        let running = connections.compactMap { connection -> (Connection, ByteRange, Double?)? in
            connection.remaining.map { (connection, $0, connection.rate(now: now)) }
        }
        let known = running.compactMap(\.2).sorted()
        let typicalRate = known.isEmpty ? thief.lastRate : known[known.count / 2]
        func secondsLeft(_ candidate: (Connection, ByteRange, Double?)) -> Double {
            guard let rate = candidate.2 ?? typicalRate, rate > 0 else { return Double(candidate.1.count) }
            return Double(candidate.1.count) / rate
        }
        guard let (victim, remaining, rate) = running.max(by: { secondsLeft($0) < secondsLeft($1) }),
              let stolen = planner.steal(from: remaining, rate: rate ?? typicalRate, setupDelay: setupDelay)
        else { return nil }
        victim.stop(at: stolen.start)
        onEvent(.stolen(from: victim.id, range: stolen))
        return Piece(range: stolen)
    }

    // MARK: - Finished transfers

    /// Records what a finished transfer wrote and requeues what it did not.
    @discardableResult
    private func settle(
        _ connection: Connection, _ finished: (piece: Piece, end: TransferEnd, written: ByteRange), now: Double
    ) -> EngineOutcome? {
        let (piece, end, writtenRange) = finished
        written.insert(writtenRange)
        switch end {
        case .complete:
            return nil
        case let .localFailure(error):
            return .failed(.io(error))
        case let .incomplete(reason, rejection):
            switch rejection {
            case let .changed(detail)?:
                return .remoteChanged(detail)
            case .rangeIgnored?, .encoded?:
                return .rangesUnsupported(rejection!.description)
            case let .status(code, _)? where code == 429 || code == 503:
                connectionLimit = max(1, connections.count(where: \.isBusy))
            default:
                break
            }
            if stopRequested.load(ordering: .relaxed) {
                requeue(piece, from: writtenRange.end, failures: 0, notBefore: now)
                return nil
            }
            retries += 1
            let failures = writtenRange.isEmpty ? piece.failures + 1 : 1
            let retryable = rejection?.isTransient ?? true
            if failures > settings.retries || (!retryable && failures > settings.retries / 2) {
                return .failed(.server(url: remote.effectiveURL,
                                       message: "giving up after \(failures) attempts: \(reason)"))
            }
            var delay = min(settings.retryWait * Double(1 << min(failures - 1, 16)), settings.retryWaitLimit)
            if case let .status(_, retryAfter?)? = rejection { delay = max(delay, min(retryAfter, 300)) }
            onEvent(.retry(connection: connection.id, reason: reason, delay: delay))
            if settings.plain { written = RangeSet() }
            requeue(piece, from: settings.plain ? piece.range.start : writtenRange.end,
                    failures: failures, notBefore: now + delay)
            return nil
        }
    }

    private func requeue(_ piece: Piece, from start: Int64, failures: Int, notBefore: Double) {
        guard start < piece.range.end else { return }
        let rest = Piece(range: ByteRange(start, piece.range.end), failures: failures, notBefore: notBefore)
        let index = queue.firstIndex(where: { $0.range.start > start }) ?? queue.endIndex
        queue.insert(rest, at: index)
    }

    // MARK: - Stalls, progress, checkpoints

    private func abandonStalledTransfers(now: Double) -> EngineOutcome? {
        for connection in connections where connection.isBusy {
            let (idle, timeToFirstByte) = connection.sample(now: now)
            if let timeToFirstByte { setupDelay = 0.8 * setupDelay + 0.2 * timeToFirstByte }
            guard idle > settings.stallTimeout else { continue }
            multi.remove(connection.easy)
            let reason = "no data for \(Int(settings.stallTimeout)) s (stalled)"
            if let outcome = settle(connection, connection.abandon(reason: reason), now: now) { return outcome }
        }
        return nil
    }

    /// Bytes done: durable before this run plus everything written since.
    private var currentlyDone: Int64 {
        var total = written.byteCount
        for connection in connections where connection.isBusy { total += connection.transferBytes }
        return total
    }

    private func report(now: Double, force: Bool) {
        guard force || now - lastReport >= 0.1 else { return }
        lastReport = now
        let done = currentlyDone
        meter.add(bytes: done, at: now)
        onEvent(.progress(DownloadProgress(
            bytesDone: done, totalBytes: remote.size, bytesPerSecond: meter.rate,
            activeConnections: connections.count(where: \.isBusy))))
    }

    /// What is written now: finished ranges plus each running transfer's prefix.
    private func writtenSnapshot() -> RangeSet {
        var snapshot = written
        for connection in connections {
            if let range = connection.writtenSoFar { snapshot.insert(range) }
        }
        return snapshot
    }

    private func checkpointIfDue(now: Double) {
        guard let checkpointer, var manifest, now - lastCheckpoint >= settings.checkpointInterval,
              !settings.plain else { return }
        lastCheckpoint = now
        manifest.done = writtenSnapshot()
        let onEvent = self.onEvent
        checkpointer.saveInBackground(manifest) { saved in onEvent(.checkpoint(bytesDurable: saved.done.byteCount)) }
        self.manifest = manifest
    }

    /// Saves the manifest on the way out; the error if the disk refused.
    private func saveFinalCheckpoint() -> IOError? {
        guard let checkpointer, var manifest, !settings.plain else { return nil }
        manifest.done = written
        do {
            try checkpointer.saveNow(manifest)
            onEvent(.checkpoint(bytesDurable: manifest.done.byteCount))
            return nil
        } catch {
            return error
        }
    }

    private func pollTimeout(now: Double) -> Int {
        var timeout = 100.0
        if let wake = queue.map(\.notBefore).min(), wake > now { timeout = min(timeout, (wake - now) * 1000) }
        return max(1, Int(timeout))
    }
}

/// Throughput over the last few seconds, from (time, bytes) samples.
struct RateMeter {
    private var samples: [(time: Double, bytes: Int64)] = []
    private let window = 3.0

    mutating func add(bytes: Int64, at time: Double) {
        samples.append((time, bytes))
        while let first = samples.first, time - first.time > window, samples.count > 2 { samples.removeFirst() }
    }

    /// Bytes per second across the window, 0 until two samples exist.
    var rate: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        return Double(last.bytes - first.bytes) / (last.time - first.time)
    }
}
