// TransferLoop: one curl multi handle and the thread that drives it, for
// every transfer of a run. A single download drives its own loop on the
// calling thread; the files of a list share one loop on a thread of its own,
// so their requests share one connection cache (keep-alive connections are
// reused from one file to the next, DNS answers are cached) and `-n` is one
// limit. The loop's clients are the engines (one per file being fetched) and
// the opening requests waiting for their heads; each turn it lets every
// client start work, moves bytes, hands each finished transfer to the client
// whose connection ran it, and lets every client look after its transfers.
// Other threads only add clients, queue commands and wake it (invariant 4:
// one thread owns the multi handle and every easy handle in it).
// A shared loop also holds the run's connection limit (`-n`): every transfer,
// an opening request or an engine's, runs on a slot taken from it. A client
// with no transfer yet (a new file) comes first; a transfer beyond a file's
// first gets a slot only while no file waits for its first. So the files of
// a list go on in order, and a large one gets every connection the small
// ones no longer need.
import CCurl
import Dispatch
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A user of the loop: its methods run on the loop's thread only.
protocol LoopClient: AnyObject {
    /// True while the client has work it could start now but no transfer
    /// slot at all (it comes first).
    func waitsForFirstConnection(now: Double) -> Bool
    /// Called once, before the first turn.
    func begin(now: Double)
    /// Starts work before libcurl moves bytes; true when the client is done.
    func beforeTransfers(now: Double) -> Bool
    /// A transfer on `connection` ended with `result` (its handle is already
    /// out of the multi handle); true when the client is done.
    func transferFinished(_ connection: Connection, result: CURLcode, now: Double) -> Bool
    /// Looks after running transfers (stalls, checkpoints); true when done.
    func afterTransfers(now: Double) -> Bool
    /// The longest the loop may wait for sockets on this client's behalf, in seconds.
    func pollTimeout(now: Double) -> Double
    /// libcurl itself failed; the client ends.
    func loopFailed(_ error: CurlError)
    /// Called once when done, still on the loop's thread, before its waiter resumes.
    func end()
}

/// One multi handle and the loop driving every transfer in it. Share one
/// between downloads (`DownloadOptions.transferLoop`) so that they reuse
/// each other's connections; a download without one makes its own.
package final class TransferLoop: @unchecked Sendable {
    // `multi` is touched only by the thread driving the loop (its `wakeup`
    // by any); `state` is the only thing other threads change.
    let multi: MultiHandle
    private let threaded: Bool
    private let state = Mutex(Shared())
    /// The clients being served: the driving thread's alone.
    private var clients: [Client] = []
    /// Requests outside any engine (probes) in the multi handle, by handle: the driving thread's alone.
    private var requests: [UnsafeMutableRawPointer: LoopRequest] = [:]
    /// The most transfers at once (nil: no limit; a lone download's engine keeps its own).
    private let connectionLimit: Int?
    /// Slots taken and not given back, and whether a client waits for its
    /// first: the driving thread's alone.
    private var slotsInUse = 0
    private var firstWaiting = false
    /// How long the loop's requests to each server wait for their first
    /// byte (a moving average; `server(of:)` keys it): the driving thread's
    /// alone. At most `serversTimed` servers are kept: past them, an
    /// arbitrary one is forgotten for each new one (its next opening goes
    /// out unwidened, as a first one does).
    private var firstByteDelays: [String: Double] = [:]
    private static let serversTimed = 256
    /// `slotsInUse`, and the transfers in the multi handle and their peak,
    /// for other threads to read.
    private let slotFigures = Atomic<Int>(0)
    private let transferFigures = Atomic<Int>(0)
    private let transferPeak = Atomic<Int>(0)
    /// The thread driving the loop now (0: none), for `assertOnLoopThread`.
    private let driver = Atomic<UInt>(0)

    private struct Shared {
        var arrivals: [Client] = []
        var commands: [@Sendable () -> Void] = []
        var threadRunning = false
    }

    private final class Client {
        let body: LoopClient
        /// The task waiting for the client's end on a loop of its own thread.
        let done: CheckedContinuation<Void, Never>?
        var finished = false
        init(_ body: LoopClient, done: CheckedContinuation<Void, Never>?) {
            self.body = body
            self.done = done
        }
    }

    /// A loop shared by downloads running on several threads: it runs on a
    /// thread of its own while it has work, and at most `connections`
    /// transfers at once over all of them (each download also keeps to its
    /// own `DownloadOptions.connections`).
    package convenience init(connections: Int, multiplex: Bool = false) throws(DownloadError) {
        precondition(connections > 0, "a loop needs a connection")
        do {
            try self.init(threaded: true, multiplex: multiplex, connections: connections, limit: connections)
        } catch {
            throw .network(url: "", message: "cannot set up libcurl: \(error.message)", failure: error.failure)
        }
    }

    /// A loop driven by its own thread (`threaded`) or by the thread that
    /// runs a client on it (one download); `connections` sizes the cache of
    /// idle connections kept for reuse.
    init(threaded: Bool, multiplex: Bool, connections: Int, limit: Int? = nil) throws(CurlError) {
        multi = try MultiHandle(multiplex: multiplex)
        self.threaded = threaded
        connectionLimit = limit
        try multi.set(CURLMOPT_MAXCONNECTS, max(16, connections * 2))
        // A shared loop's limit is libcurl's limit on TCP connections too:
        // with every file on one server, idle connections are reused and a
        // list with `-n 8` never holds a ninth socket (SessionTests). Idle
        // ones to another server are not always closed first: two
        // downloads from two servers on a session of 2 held 3 or 4 sockets
        // at a moment in 6 of 10 runs.
        if let limit { try multi.set(CURLMOPT_MAX_TOTAL_CONNECTIONS, limit) }
    }

    /// Idle connections of openings that brought a whole small file, kept
    /// for the next opening after `recycleConnections` (their easy handles
    /// keep every option set: making, configuring and freeing one was about
    /// a tenth of a small file's instructions). At most `spareLimit`.
    private let spare = Mutex(SpareConnections())
    private let spareLimit = Atomic<Int>(0)
    private let recycled = Atomic<Int>(0)

    /// Connections that only the loop's lock hands from one thread to another.
    private struct SpareConnections: @unchecked Sendable {
        var idle: [Connection] = []
    }

    /// Makes the connections of finished openings serve the next openings.
    /// Only for a loop whose every download uses the same transfer options
    /// (a list's): a connection keeps the options it was made with.
    package func recycleConnections(upTo limit: Int) {
        spareLimit.store(limit, ordering: .relaxed)
    }

    /// Openings that took the connection of an earlier one.
    package var connectionsRecycled: Int { recycled.load(ordering: .relaxed) }

    /// An idle connection of an earlier opening, nil when none is kept.
    func spareConnection() -> Connection? {
        guard spareLimit.load(ordering: .relaxed) > 0,
            let connection = spare.withLock({ $0.idle.popLast().map(UncheckedBox.init) })?.value
        else { return nil }
        recycled.add(1, ordering: .relaxed)
        return connection
    }

    /// Keeps `connection` (its transfer ended, its handle out of the multi
    /// handle, and no one else holding on to it) for a later opening.
    func recycle(_ connection: Connection) {
        let limit = spareLimit.load(ordering: .relaxed)
        guard limit > 0 else { return }
        // Nothing of its last transfer may reach the next file's (an engine
        // would take over an unowned end, a client would hear of its transfer).
        precondition(
            connection.client == nil && !connection.isBusy && connection.unownedEnd == nil,
            "a connection recycled before its transfer was over")
        connection.releaseHeldBody()
        let kept = UncheckedBox(connection)
        spare.withLock { spare in
            if spare.idle.count < limit { spare.idle.append(kept.value) }
        }
    }

    /// Transfers running now over all clients.
    package var connectionsInUse: Int { transferFigures.load(ordering: .relaxed) }

    /// The most transfers that ran at once so far, counted in the multi
    /// handle as they start (not the slots taken: a transfer started
    /// without one counts too).
    package var peakConnectionsInUse: Int { transferPeak.load(ordering: .relaxed) }

    /// Slots of the connection limit taken and not given back.
    package var slotsTaken: Int { slotFigures.load(ordering: .relaxed) }

    /// Slots free now; nil without a limit. Loop thread only.
    var freeSlots: Int? { connectionLimit.map { max(0, $0 - slotsInUse) } }

    /// Takes a slot for a transfer (`first`: the client's first); false when
    /// none is free, or only a first may have it. Loop thread only.
    func takeSlot(first: Bool) -> Bool {
        assertOnLoopThread()
        if let connectionLimit {
            guard slotsInUse < connectionLimit, first || !firstWaiting else { return false }
        }
        slotsInUse += 1
        publishSlots()
        return true
    }

    /// Counts a request to `server` whose first byte came `seconds` after it was sent. Loop thread only.
    func noteFirstByte(after seconds: Double, from server: String) {
        assertOnLoopThread()
        if firstByteDelays[server] == nil, firstByteDelays.count >= Self.serversTimed {
            firstByteDelays.remove(at: firstByteDelays.startIndex)
        }
        firstByteDelays[server] = firstByteDelays[server].map { 0.8 * $0 + 0.2 * seconds } ?? seconds
    }

    /// How long requests to `server` waited for their first byte lately;
    /// nil before one was measured. Loop thread only.
    func firstByteDelay(from server: String) -> Double? {
        assertOnLoopThread()
        return firstByteDelays[server]
    }

    /// The `scheme://host[:port]` part a URL starts with, lowercased,
    /// without user info or a default port (`http://H:80/` and `http://h/`
    /// are one server), the key of the first-byte delays: a cut of the
    /// string, no parse (4% of a small file's CPU went to a second parse of
    /// its URL once).
    static func server(of url: String) -> String {
        guard let schemeEnd = url.firstRange(of: "://") else { return url }
        let authority = url[schemeEnd.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let start = authority.lastIndex(of: "@").map(authority.index(after:)) ?? authority.startIndex
        var key = (String(url[..<schemeEnd.upperBound]) + authority[start...]).lowercased()
        for suffix in ["http://": ":80", "https://": ":443"]
        where key.hasPrefix(suffix.key) && key.hasSuffix(suffix.value) {
            key.removeLast(suffix.value.count)
        }
        return key
    }

    /// Starts `easy`'s transfer in the multi handle, on a slot its client
    /// holds (on a shared loop). Loop thread only.
    func add(_ easy: EasyHandle) throws(CurlError) {
        assertOnLoopThread()
        try multi.add(easy)
        publishTransfers()
    }

    /// Takes `easy`'s transfer out of the multi handle (nothing when it is
    /// out already). Loop thread only.
    func remove(_ easy: EasyHandle) {
        assertOnLoopThread()
        multi.remove(easy)
        publishTransfers()
    }

    /// Starts the transfer of `request`'s handle `easy`, on a slot it
    /// holds. Loop thread only.
    func add(request: LoopRequest, _ easy: EasyHandle) throws(CurlError) {
        try add(easy)
        requests[easy.raw] = request
    }

    /// Takes a request's handle out of the multi handle (nothing when it is out already). Loop thread only.
    func remove(request easy: EasyHandle) {
        requests[easy.raw] = nil
        remove(easy)
    }

    /// Gives back `count` slots. Loop thread only.
    func giveSlots(_ count: Int) {
        assertOnLoopThread()
        precondition(count <= slotsInUse, "more slots given back than taken")
        slotsInUse -= count
        publishSlots()
    }

    /// Traps in debug builds when called off the thread driving the loop,
    /// where the multi handle, the easy handles and the clients are promised
    /// to be touched (as NIO's `preconditionInEventLoop`).
    func assertOnLoopThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(
            driver.load(ordering: .relaxed) == UInt(bitPattern: Int(bitPattern: pthread_self())),
            "called off the transfer loop's thread", file: file, line: line)
    }

    private func publishSlots() {
        slotFigures.store(slotsInUse, ordering: .relaxed)
    }

    private func publishTransfers() {
        let transfers = multi.transfers
        transferFigures.store(transfers, ordering: .relaxed)
        if transfers > transferPeak.load(ordering: .relaxed) { transferPeak.store(transfers, ordering: .relaxed) }
    }

    /// Makes the calling thread the one that drives this loop, which must be
    /// one without a thread of its own: what `run` does first, and what a
    /// test does before it calls a client's methods by hand.
    func driveOnThisThread() {
        precondition(!threaded, "a threaded loop is driven by its own thread")
        driver.store(UInt(bitPattern: Int(bitPattern: pthread_self())), ordering: .relaxed)
    }

    /// Serves `client` until it is done, and returns after its `end()`. A
    /// loop of its own thread serves it there while the task waits without
    /// a thread; any other loop is driven here, on the calling thread, until
    /// the client is done.
    func serve(_ client: LoopClient) async {
        guard threaded else {
            let entry = Client(client, done: nil)
            driveOnThisThread()
            client.begin(now: MonotonicClock.now())
            clients.append(entry)
            while !entry.finished { turn() }
            return
        }
        let arrival = UncheckedBox(client)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            submit { $0.arrivals.append(Client(arrival.value, done: done)) }
        }
    }

    /// True when the loop runs on a thread of its own (a session's).
    var hasOwnThread: Bool { threaded }

    /// Runs `command` on the loop's thread (at once when the caller drives the loop).
    func execute(_ command: @escaping @Sendable () -> Void) {
        guard threaded else { return command() }
        submit { $0.commands.append(command) }
    }

    /// Wakes the loop from its wait for sockets; safe from any thread.
    func wakeup() {
        multi.wakeup()
    }

    private func submit(_ change: (inout Shared) -> Void) {
        enum Signal { case start, wake, none }
        let signal = state.withLock { shared -> Signal in
            // Woken once per batch: the loop takes every arrival and command
            // at the start of its next turn, so a queue that was not empty
            // already has its wakeup on the way (a list's lanes submit often).
            let queued = !shared.arrivals.isEmpty || !shared.commands.isEmpty
            change(&shared)
            if shared.threadRunning { return queued ? .none : .wake }
            shared.threadRunning = true
            return .start
        }
        switch signal {
        case .start: startThread("rangeget loop") { [self] in threadBody() }
        case .wake: multi.wakeup()
        case .none: break
        }
    }

    /// The loop's own thread: turns while there are clients or commands,
    /// and ends when there were none for `idleLinger` seconds (the next
    /// arrival starts another). The wait keeps one thread through the short
    /// gaps of a session's work (its downloads between their probes and
    /// their engines), rather than one ending as the next starts.
    private func threadBody() {
        var idleSince: Double?
        while true {
            guard clients.isEmpty, state.withLock({ $0.arrivals.isEmpty && $0.commands.isEmpty }) else {
                idleSince = nil
                turn()
                continue
            }
            let now = MonotonicClock.now()
            guard let since = idleSince, now - since >= Self.idleLinger else {
                idleSince = idleSince ?? now
                // `submit` wakes this wait.
                try? multi.poll(timeoutMilliseconds: 100)
                continue
            }
            let ends = state.withLock { shared -> Bool in
                guard shared.arrivals.isEmpty, shared.commands.isEmpty else { return false }
                shared.threadRunning = false
                return true
            }
            if ends { return }
        }
    }

    /// How long a loop's own thread waits for work before it ends.
    static let idleLinger = 1.0

    /// One turn: take arrivals and commands, let clients start work, move
    /// bytes, settle finished transfers, let clients look after the rest,
    /// then wait for sockets unless a transfer just ended.
    /// Microseconds the loop spent waiting for sockets, over its life: a
    /// loop that never waits is the bottleneck (`Engine.tuneConnections`).
    private(set) var idleMicroseconds: Int64 = 0

    private func turn() {
        driver.store(UInt(bitPattern: Int(bitPattern: pthread_self())), ordering: .relaxed)
        let (arrivals, commands) = state.withLock { shared in
            defer { (shared.arrivals, shared.commands) = ([], []) }
            return (shared.arrivals, shared.commands)
        }
        for command in commands { command() }
        let now = MonotonicClock.now()
        for arrival in arrivals {
            arrival.body.begin(now: now)
            clients.append(arrival)
        }
        firstWaiting = clients.contains { !$0.finished && $0.body.waitsForFirstConnection(now: now) }
        for client in clients where !client.finished {
            if client.body.beforeTransfers(now: now) { finish(client) }
        }
        do {
            _ = try multi.perform()
        } catch {
            failAll(error)
        }
        var settled = false
        while let (easy, result) = multi.nextFinished() {
            guard let connection = Connection.owning(easy) else {
                // A request outside any engine (a probe's): it ends, and its client with it.
                if let request = requests[easy] {
                    request.ended(result)
                    settled = true
                }
                continue
            }
            remove(connection.easy)
            settled = true
            guard let owner = clients.first(where: { !$0.finished && $0.body === connection.client }) else {
                // Its owner has not taken it yet (an opening request waiting
                // for its engine): the engine settles it when it does.
                connection.endedUnowned(result)
                continue
            }
            if owner.body.transferFinished(connection, result: result, now: MonotonicClock.now()) { finish(owner) }
        }
        let later = MonotonicClock.now()
        for client in clients where !client.finished {
            if client.body.afterTransfers(now: later) { finish(client) }
        }
        clients.removeAll(where: \.finished)
        // A connection just freed takes its next piece at once (and an end is
        // noticed at once): waiting in poll cost up to 0.1 s per piece.
        if settled || clients.isEmpty && !threaded { return }
        var timeout = 0.1
        for client in clients { timeout = min(timeout, client.body.pollTimeout(now: later)) }
        do {
            try multi.poll(timeoutMilliseconds: max(1, Int(timeout * 1000)))
        } catch {
            failAll(error)
            clients.removeAll(where: \.finished)
        }
        idleMicroseconds += Int64((MonotonicClock.now() - later) * 1e6)
    }

    /// libcurl itself failed: every client still served ends with the error.
    private func failAll(_ error: CurlError) {
        for client in clients where !client.finished {
            client.body.loopFailed(error)
            finish(client)
        }
    }

    private func finish(_ client: Client) {
        guard !client.finished else { return }
        client.finished = true
        client.body.end()
        client.done?.resume()
    }
}
