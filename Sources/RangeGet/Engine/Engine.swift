// Engine: the transfers of one file, a client of a TransferLoop, whose thread
// alone calls it (invariant 4: one thread owns the multi handle and every
// easy handle); other threads only use its StopSignal, which wakes the loop.
// Each turn: top up idle connections with work, publish progress, (the loop
// lets libcurl move bytes: the write callbacks pwrite them), settle finished
// transfers, catch stalls, move connections between mirrors, checkpoint.
// Who fetches what is decided in Engine+Scheduling.swift, what happens to a
// finished transfer in Engine+Settle.swift, and stalls, progress and
// checkpoints are watched in Engine+Progress.swift.
import CCurl
import Synchronization
import SystemSupport

/// Where an engine's bytes go.
enum Sink {
    /// The `.part` file, written at offsets.
    case file(OutputFile)
    /// A stream's window, read in order.
    case stream(StreamWindow)
}

/// How an engine run ended.
enum EngineOutcome: Sendable {
    /// Every byte is written; `size` is the final length (learned here for a stream of unknown length).
    case complete(size: Int64)
    /// A stop was requested; the manifest holds everything durable.
    case stopped
    /// The remote file is not the one the download started with.
    case remoteChanged(String)
    /// Ranged requests don't work on this server after all.
    case rangesUnsupported(String)
    /// Mirror `index` reached through a redirect refuses now (403/410): a
    /// signed URL that expired; the original URL should be resolved anew.
    case expired(index: Int, reason: String)
    /// The download cannot go on.
    case failed(DownloadError)
}

final class Engine: LoopClient {
    // Touched only by the loop's thread, from `begin` to `end`; other threads
    // reach the engine through `stop` alone.
    /// The download's settings (`connections`, `retries`, `transfer`, ...).
    let settings: DownloadOptions
    /// One plain GET from byte 0 instead of ranged requests.
    let plain: Bool
    let size: Int64?
    let mirrors: [Mirror]
    let planner: Planner
    let onEvent: @Sendable (DownloadEvent) -> Void
    /// Where the bytes go: the `.part` file, or a stream's window.
    private let sink: any ByteSink
    /// A stream's window: pieces are planned in file order, only inside it.
    let window: StreamWindow?
    /// Bytes not yet planned into pieces: a stream's rest (planned in
    /// order, inside its window), or a file's end reserve (handed out in
    /// small pieces once nothing can be stolen: `Planner.endReserve`).
    var unplanned = RangeSet()
    /// True while the end reserve waits for the servers' first-byte waits
    /// (a resume sends no opening to measure them).
    var endReservePending = false
    /// A stream's piece length: small enough that every connection has
    /// work inside the window, large enough that requests stay few.
    let streamPiece: Int64
    /// The longest piece of a stream (16 MiB).
    static let largestStreamPiece: Int64 = 16 << 20
    /// The loop whose multi handle runs this engine's transfers (shared by the files of a list).
    let loop: TransferLoop
    /// The zero-round-trip start's request, until `begin` adopts or ends it.
    private var opening: Opening?
    /// How the run ended, once it has.
    private var outcome: EngineOutcome?
    /// While stopping: when to give up waiting for bytes already in the
    /// sockets, and the bytes received at the last turn.
    private var drain: (deadline: Double, received: Int64)?
    /// Totals kept when the connections are released at the end.
    private var finalFetched: Int64?
    private var finalUsed: Int?
    let checkpointer: Checkpointer?
    /// Bytes written and not yet durable, recorded by the connections at each write.
    let journal: WriteJournal?
    /// What another thread may use to stop this engine.
    let stop: StopSignal
    /// Checks each piece against its published digest (nil: no piece hashes).
    let pieceCheck: PieceCheck?
    /// The `.part` the piece checks read: a bad piece's copy, and its good one.
    let pieceFile: OutputFile?
    /// Who wrote which bytes not yet verified: (range, mirror index), with piece hashes only.
    var writers: [(range: ByteRange, mirror: Int)] = []
    /// Times each piece failed its check.
    var pieceFailures: [Int: Int] = [:]
    /// Pieces that failed their checks, as they were, until their good copies land.
    var badCopies: [Int: BadCopy] = [:]
    /// The bytes `badCopies` hold.
    var heldCopyBytes: Int64 = 0
    /// When written pieces were last sent to be hashed.
    var lastPieceSubmit = 0.0

    var connections: [Connection] = []
    var queue: [Piece] = []
    var written: RangeSet
    var connectionLimit: Int
    /// The most transfers the server took at once when it refused one more
    /// (`connectionRefused`); nil before any refusal.
    var learnedLimit: Int?
    /// When the places of transfers cut short (with `learnedLimit` known)
    /// are free at the server again, as far as rangeget can tell.
    var placesHeldUntil: [Double] = []
    /// Typical seconds from a request to its first byte (moving average).
    var setupDelay = 0.1
    var retries = 0
    var sizeDisagreements = 0
    /// The size is the manifest's word alone (see `init`).
    let unprobed: Bool
    /// Times the plain stream started over from byte 0.
    var plainRestarts = 0
    var lastOtherTotal: Int64?
    var lastCheckpoint = 0.0
    var lastWriteback = 0.0
    /// Seconds between starts of writeback of the dirty data, so the durable
    /// saves (and the final sync) find little left.
    static let writebackInterval = 0.05
    /// Slots of the loop's connection limit this engine holds: one per
    /// running transfer (a slot taken for a transfer about to start counts
    /// once it starts: `startIdleConnections`).
    var slotsHeld = 0
    var meter = RateMeter(window: 3)
    /// How many connections each mirror gets.
    var placement: MirrorPlacement
    var lastPlacement = 0.0
    /// The learned connection count (`DownloadOptions.automaticConnections`);
    /// nil for a fixed count.
    var tuner: ConnectionTuner?
    /// All bytes received, over the tuner's longest window.
    var tuningMeter = RateMeter(window: ConnectionTuner.longestWindow)
    /// The loop's idle microseconds, over the tuner's longest window.
    var idleMeter = RateMeter(window: ConnectionTuner.longestWindow)
    /// Microseconds of delivering transfers, summed over them, and over the window.
    var tuningDelivering: Int64 = 0
    var deliveringMeter = RateMeter(window: ConnectionTuner.longestWindow)
    /// The longest silence of a delivering transfer lately: a bursty
    /// server's pause, which the tuner's window must span several times.
    var tuningPause = RecentPause(memory: 1)
    /// The tuner's count, and when nearly all its transfers first delivered together.
    var tuningCount = 0
    var tuningChanged = 0.0
    /// The most transfers delivering at once in the last two seconds or so.
    var mostDelivering = (count: 0, at: 0.0)
    var tuningRamped: Double?
    var lastTuning = 0.0
    var lastReport = 0.0

    /// An engine for the file behind `mirrors` (the first one's size is the
    /// size). `opening`, the zero-round-trip start's request to the first
    /// mirror, becomes the first connection when its bytes are still missing.
    /// `unprobed`: the size is the manifest's word alone (a resume that sent
    /// no probe), so one answer naming another total ends the run for a probe.
    init(
        mirrors remotes: [RemoteFile], sink: Sink, manifest: Manifest?, manifestPath: String?,
        settings: DownloadOptions, plain: Bool, loop: TransferLoop,
        opening: Opening? = nil, unprobed: Bool = false, onEvent: @escaping @Sendable (DownloadEvent) -> Void
    ) {
        precondition(!remotes.isEmpty)
        precondition(
            opening?.heldBody == nil, "a body held in memory is written by the download (write(held:)), not an engine")
        self.settings = settings
        self.plain = plain
        self.unprobed = unprobed
        self.onEvent = onEvent
        size = remotes[0].size
        mirrors = remotes.enumerated().map { Mirror(index: $0.offset, remote: $0.element) }
        let file: OutputFile?
        switch sink {
        case let .file(output):
            (self.sink, file, window) = (output, output, nil)
        case let .stream(window):
            (self.sink, file, self.window) = (window, nil, window)
        }
        let perConnection = (window?.capacity ?? 0) / Int64(2 * max(1, settings.connections))
        streamPiece = min(
            window?.capacity ?? .max, max(settings.minimumSplit, min(perConnection, Self.largestStreamPiece)))
        let done = manifest?.done ?? window?.done ?? RangeSet()
        written = done
        // A single plain stream cannot fetch one piece again: its checksum alone checks it.
        if let hashes = settings.pieces, let file, !plain, let size = remotes[0].size {
            let listed = manifest?.pieceList == hashes.fingerprint ? manifest?.verified ?? RangeSet() : RangeSet()
            pieceCheck = PieceCheck(
                hashes: hashes, size: size, descriptor: file.descriptor,
                verified: listed.subtracting(listed.subtracting(done)), wake: { [loop] in loop.wakeup() })
            pieceFile = file
        } else {
            pieceCheck = nil
            pieceFile = nil
        }
        // One URL to a file on a loop of its own: the count may be learned,
        // up to the per-host cap (a list's shared slots, a stream's window and
        // the placement over several mirrors keep the fixed count).
        if settings.automaticConnections, !plain, window == nil, remotes.count == 1, loop.freeSlots == nil {
            tuner = ConnectionTuner(start: settings.maxPerHost, ceiling: settings.maxPerHost)
        }
        let mostConnections = max(settings.connections, tuner?.ceiling ?? 0)
        if let file, let manifestPath, var manifest {
            manifest.pieceList = pieceCheck?.hashes.fingerprint
            checkpointer = Checkpointer(
                file: file, manifest: manifest, manifestPath: manifestPath, calls: settings.systemCalls)
            // Without a journal (no boot ID, a file system that refuses it) a
            // kill costs what was written since the last durable save.
            journal = try? WriteJournal(
                path: PartialFiles(data: file.path).journal, file: file, size: manifest.size,
                slots: mostConnections, written: done)
        } else {
            checkpointer = nil
            journal = nil
        }
        self.loop = loop
        stop = StopSignal(loop: loop)
        self.opening = opening
        planner = Planner(
            connections: tuner?.target ?? settings.connections, minimumSplit: settings.minimumSplit,
            grain: pieceCheck?.hashes.length ?? 1)
        placement = MirrorPlacement(connections: settings.connections, room: mirrors.map { _ in settings.maxPerHost })
        connectionLimit = plain ? 1 : tuner?.target ?? settings.connections
    }

    var isStopping: Bool { stop.isRequested }

    /// Bytes received and written by this run.
    var bytesFetched: Int64 { finalFetched ?? connections.reduce(0) { $0 + $1.totalBytes } }

    /// Bytes received so far, running transfers included.
    var bytesReceived: Int64 {
        connections.reduce(bytesFetched) { $0 + ($1.isBusy ? $1.transferBytes : 0) }
    }

    /// Runs the download until it completes, fails or is stopped.
    func run() async -> EngineOutcome {
        await loop.serve(self)
        return outcome ?? .stopped
    }

    // MARK: - LoopClient

    /// True when a free connection would get a piece (`pieceSources`): a
    /// file whose queued pieces wait out a backoff has nothing to start, its
    /// end reserve included, and does not hold the other files to their
    /// first slots meanwhile (issue 36: one answering 503 with Retry-After
    /// kept a large file of the list on one connection of 4).
    func waitsForFirstConnection(now: Double) -> Bool {
        loop.assertOnLoopThread()
        return slotsHeld == 0 && outcome == nil && !pieceSources(now: now).isEmpty
    }

    func begin(now: Double) {
        loop.assertOnLoopThread()
        // A plain stream starts from byte 0 anyway; a ranged plan needs byte 0 to be missing.
        let adopted = opening.flatMap { opening in
            opening.isUsable && !opening.isHeld && (plain || !written.contains(ByteRange(0, 1))) ? opening : nil
        }
        if let adopted {
            let connection = adopted.handOver()
            slotsHeld = 1
            connection.attach(sink, journal: journal, pieces: pieceCheck)
            connection.client = self
            connections.append(connection)
        } else if let opening {
            opening.cancel()
            mirrors[0].tcpConnections += opening.connectionsOpened
        }
        opening = nil
        // A reader that makes room wakes the loop: for the plan, and for a single stream paused at the window's edge.
        window?.onRoom { [loop] in loop.wakeup() }
        if plain {
            queue = [Piece(range: ByteRange(0, size ?? Int64.max))]
            written = RangeSet()
        } else if let size, window != nil {
            unplanned = written.complement(size: size)
            planAhead()
        } else if let size {
            // On a shared loop, plan for the connections it can give now (a
            // piece per connection that will wait would cost a request each);
            // slots that free up later take work by stealing.
            let count = tuner?.target ?? settings.connections
            let reachable = loop.freeSlots.map { min(count, max(1, slotsHeld + $0)) } ?? count
            // An opening that asked for the whole file (a list's, from a
            // distant server) keeps its first piece running to the end.
            let whole = adopted?.served.map { $0.end == size } ?? false
            let missing = written.complement(size: size)
            queue = Planner(connections: reachable, minimumSplit: settings.minimumSplit, grain: planner.grain)
                .plan(whole ? missing : keepEndReserve(of: missing)).map { Piece(range: $0) }
        }
        // Its transfer may have ended while no one owned it.
        if let adopted, let result = adoptOpening(served: adopted.served, now: now) {
            _ = transferFinished(connections[0], result: result, now: now)
        }
        lastCheckpoint = now
        meter.add(bytes: currentlyDone, at: now)
    }

    func beforeTransfers(now: Double) -> Bool {
        loop.assertOnLoopThread()
        if outcome != nil { return true }
        if isStopping {
            // On a stop (Ctrl-C, pause), what has already arrived in the sockets
            // is taken in before the connections close: those bytes cost
            // nothing now and would be fetched again later. The stop ends
            // when a turn brings nothing more, or after `drainLimit` seconds.
            let received = bytesReceived
            if let drain, now >= drain.deadline || received == drain.received || !connections.contains(where: \.isBusy)
            {
                return ended(.stopped)
            }
            drain = (drain?.deadline ?? now + Self.drainLimit, received)
            return false
        }
        settleEndReserve()
        if let outcome = startIdleConnections(now: now) { return ended(outcome) }
        if queue.isEmpty && unplanned.isEmpty && !connections.contains(where: \.isBusy) && piecesDone {
            return ended(.complete(size: size ?? written.ranges.last?.end ?? 0))
        }
        // Reported once the free connections took their next pieces, so a
        // sample never shows a connection between two pieces as idle.
        report(now: now, force: false)
        return false
    }

    func transferFinished(_ connection: Connection, result: CURLcode, now: Double) -> Bool {
        loop.assertOnLoopThread()
        // A transfer whose first byte came in the turn it ended is timed too.
        sample(connection, now: now)
        let outcome = settle(connection, connection.finish(result: result, now: now), now: now)
        // While stopping, the stop is the outcome.
        guard let outcome, !isStopping else { return self.outcome != nil }
        return ended(outcome)
    }

    func afterTransfers(now: Double) -> Bool {
        loop.assertOnLoopThread()
        if outcome != nil { return true }
        if isStopping { return false }
        if let outcome = watchTransfers(now: now) { return ended(outcome) }
        if let outcome = checkPieces(now: now) { return ended(outcome) }
        placeConnections(now: now)
        tuneConnections(now: now)
        if let failure = checkpointer?.failure { return ended(.failed(.io(failure))) }
        checkpointIfDue(now: now)
        reportSavedCheckpoint()
        return false
    }

    func loopFailed(_ error: CurlError) {
        loop.assertOnLoopThread()
        outcome =
            outcome ?? .failed(.network(url: mirrors[0].remote.url, message: error.message, failure: error.failure))
    }

    /// Closes the run: running transfers stop (their ranges stay missing),
    /// the manifest is saved, and the connections' handles are released here,
    /// on the loop's thread (their connections stay in the loop's cache).
    func end() {
        loop.assertOnLoopThread()
        var outcome = self.outcome ?? .stopped
        for connection in connections where connection.isBusy {
            cancel(connection, reason: "stopped", requeue: true, now: MonotonicClock.now())
        }
        returnSlots()
        pieceCheck?.waitUntilIdle()
        switch outcome {
        case .complete, .remoteChanged, .rangesUnsupported:
            checkpointer?.waitForBackgroundSave()
            reportSavedCheckpoint()
        case .stopped, .failed, .expired:
            if let failure = saveFinalCheckpoint() {
                if case .failed = outcome {} else { outcome = .failed(.io(failure)) }
            }
        }
        report(now: MonotonicClock.now(), force: true)
        self.outcome = outcome
        finalFetched = bytesFetched
        finalUsed = connectionsUsed
        for connection in connections { connection.client = nil }
        connections = []
    }

    /// Records how the run ended; true (the client is done).
    private func ended(_ outcome: EngineOutcome) -> Bool {
        self.outcome = outcome
        return true
    }

    /// The longest a stop waits for bytes already in the sockets.
    static let drainLimit = 0.2

    /// Gives the opening request, already answered from byte 0, the first
    /// piece of the plan, cut at what the server sends. The rest of that
    /// piece goes to the back of the queue: the other connections start on
    /// the other pieces, and the first to free up, usually this one, goes on
    /// with it, so every connection ends up with about an even share.
    /// Returns how its transfer ended, if it did before (`Connection.adopt`).
    private func adoptOpening(served: ByteRange?, now: Double) -> CURLcode? {
        // The engine takes the opening only while byte 0 is missing, so the plan starts there.
        guard let first = queue.first, first.range.start == 0 else { preconditionFailure("no piece at byte 0") }
        queue.removeFirst()
        let end = min(first.range.end, served?.end ?? .max)
        if end < first.range.end {
            // A stream's pieces stay in file order.
            queue.insert(Piece(range: ByteRange(end, first.range.end)), at: window == nil ? queue.endIndex : 0)
        }
        let piece = Piece(range: ByteRange(0, end))
        let endedBefore = connections[0].adopt(piece, from: mirrors[0], served: served, now: now)
        onEvent(.transfer(.pieceStarted(connection: 0, range: piece.range, url: mirrors[0].remote.url)))
        return endedBefore
    }

    /// A new connection, for a transfer when every existing one is busy.
    /// Connections are made on demand, so a small file (or one of a list,
    /// which may use every connection of the run) makes no handle it never
    /// uses; an idle one is always reused first (its handle keeps its
    /// connection alive).
    func newConnection() throws(CurlError) -> Connection {
        loop.assertOnLoopThread()
        let connection = try Connection(id: connections.count, sink: sink, options: settings.transfer)
        connection.attach(sink, journal: journal, pieces: pieceCheck)
        connection.client = self
        connections.append(connection)
        return connection
    }

    /// Starts `piece` on `connection`.
    func launch(_ connection: Connection, _ piece: Piece, from mirror: Mirror, race: Race?, now: Double)
        throws(CurlError)
    {
        loop.assertOnLoopThread()
        try connection.start(piece, from: mirror, plain: plain, race: race, now: now)
        connection.sentWithinLimit = learnedLimit.map { connections.count(where: \.isBusy) <= $0 } ?? false
        try loop.add(connection.easy)
        onEvent(.transfer(.pieceStarted(connection: connection.id, range: piece.range, url: mirror.remote.url)))
    }

    /// Ends a running transfer early; what it wrote is kept (up to
    /// `distrustingFrom`, when given), the rest is queued again if `requeue`.
    func cancel(
        _ connection: Connection, reason: String, requeue: Bool, distrustingFrom offset: Int64? = nil,
        now: Double
    ) {
        loop.assertOnLoopThread()
        loop.remove(connection.easy)
        let finished = connection.abandon(reason: reason, distrustingFrom: offset, now: now)
        recordEnd(of: finished, on: connection, now: now)
        if requeue, !partnerIsBusy(connection, in: finished.race) {
            self.requeue(
                finished.piece, from: max(finished.written.end, finished.race?.frontier ?? 0),
                failures: 0, notBefore: now)
        }
    }

    func pollTimeout(now: Double) -> Double {
        loop.assertOnLoopThread()
        if drain != nil { return 0.001 }
        var timeout = connections.contains(where: \.isPaused) ? 0.01 : 0.1
        if let wake = (queue.map(\.notBefore) + placesHeldUntil).min(), wake > now {
            timeout = min(timeout, wake - now)
        }
        return timeout
    }

    /// Per-mirror figures for the report.
    var mirrorReports: [MirrorReport] { mirrors.map(\.report) }

    /// Connections that carried at least one transfer.
    var connectionsUsed: Int { finalUsed ?? connections.count(where: \.wasUsed) }
}
