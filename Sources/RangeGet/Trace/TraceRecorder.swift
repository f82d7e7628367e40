// TraceRecorder: one download's events, as DownloadController emits them,
// turned into trace events (docs/TRACE.md) stamped with the monotonic clock
// at that moment. A transfer becomes one slice on the lane of its TCP
// connection (its local port) when it ends: its start is its
// `pieceStarted`, its connection and timings its `transferTimed`.
import Synchronization
import SystemSupport

/// Records one download into a `DownloadTrace`.
final class TraceRecorder: Sendable {
    private let trace: DownloadTrace
    /// The download's process number in the trace.
    let process: Int

    private struct Started {
        var at: Double
        var range: ByteRange
        var url: String
    }

    private struct State {
        /// Running transfers by connection: when and what they asked for.
        var started: [Int: Started] = [:]
        /// The timing of the transfer about to finish, by connection.
        var timed: [Int: TransferTiming] = [:]
        /// Lanes named so far.
        var named: Set<Int> = []
        /// Bytes of finished transfers, by mirror index.
        var finishedBytes: [Int: Int64] = [:]
        /// The last rate sample: when, and the bytes by mirror index then.
        var lastSample: (at: Double, bytes: [Int: Int64])?
        /// When the last byte came in (`fetched`), for the final sync.
        var fetchedAt: Double?
        /// The mirrors: as given, then as transfers named them (discovered ones).
        var mirrors: [String]

        mutating func index(of url: String) -> Int {
            if let index = mirrors.firstIndex(of: url) { return index }
            mirrors.append(url)
            return mirrors.count - 1
        }
    }

    private let state: Mutex<State>

    /// The lane of the download's own events.
    static let downloadLane = 0
    /// Lanes of transfers without a TCP connection start here (plus the connection's number).
    static let unconnectedLanes = 100_000

    init(trace: DownloadTrace, process: Int, mirrors: [String]) {
        self.trace = trace
        self.process = process
        state = Mutex(State(mirrors: mirrors))
    }

    /// Names the download's process and its own lane.
    func begin(named name: String) {
        trace.append([
            metadata("process_name", lane: nil, name: name),
            metadata("thread_name", lane: Self.downloadLane, name: "download"),
            metadata("thread_sort_index", lane: Self.downloadLane, sortIndex: -1)
        ])
    }

    /// Records `event`, emitted now.
    func record(_ event: DownloadEvent) {
        let now = MonotonicClock.now()
        switch event {
        case let .probed(remote):
            instant(
                "probed", at: now,
                args: [
                    "url": .string(remote.url), "size": remote.size.map { .int($0) },
                    "etag": remote.etag.map { .string($0) }, "lastModified": remote.lastModified.map { .string($0) }
                ])
        case let .reusing(bytesDone):
            instant("reusing", at: now, args: ["bytes": .int(bytesDone)])
        case let .restarting(reason):
            instant("restarting", at: now, args: ["reason": .string(reason)])
        case let .progress(progress):
            sample(progress, at: now)
        case let .retry(connection, cause, reason, delay, attempt, attempts):
            let args: TraceJSON.Object = [
                "connection": .int(connection), "cause": .string("\(cause)"), "reason": .string(reason),
                "delay": .number(delay), "attempt": .int(attempt), "attempts": .int(attempts)
            ]
            instant("retry", at: now, args: args)
            if cause == .stall { instant("stall", at: now, args: args) }
        case let .notice(message):
            instant("notice", at: now, args: ["reason": .string(message)])
        case let .mirrorDropped(url, reason):
            instant("mirror dropped", at: now, args: ["mirror": .string(url), "reason": .string(reason)])
        case let .transfer(transfer):
            record(transfer, at: now)
        case .paused:
            instant("paused", at: now, args: [:])
        case .resumed:
            instant("resumed", at: now, args: [:])
        case .fetched:
            state.withLock { $0.fetchedAt = now }
        case .finished:
            let fetchedAt = state.withLock { $0.fetchedAt } ?? now
            trace.append([
                slice(
                    "sync", category: "download", lane: Self.downloadLane, start: trace.timestamp(fetchedAt),
                    end: max(trace.timestamp(fetchedAt), trace.timestamp(now)), args: [:])
            ])
        }
    }

    private func record(_ event: TransferEvent, at now: Double) {
        switch event {
        case let .pieceStarted(connection, range, url):
            state.withLock { $0.started[connection] = Started(at: now, range: range, url: url) }
        case let .transferTimed(connection, timing):
            state.withLock { $0.timed[connection] = timing }
        case let .pieceFinished(connection, written, complete):
            finish(connection, written: written, complete: complete, at: now)
        case let .stolen(from, range):
            instant("stolen", at: now, args: ["from": .int(from), "range": .range(range)])
        case let .connectionsMoved(from, to, count):
            instant(
                "connections moved", at: now, args: ["from": .string(from), "to": .string(to), "count": .int(count)])
        case let .connectionCountChanged(count, reason):
            instant("connection count", at: now, args: ["count": .int(count), "reason": .string(reason)])
        case let .raced(connection, range):
            instant("raced", at: now, args: ["connection": .int(connection), "range": .range(range)])
        case let .checkpoint(bytesDurable):
            instant("checkpoint", at: now, args: ["durable": .int(bytesDurable)])
        case let .pieceChecked(index, range, matches, urls):
            instant(
                "piece checked", at: now,
                args: [
                    "index": .int(index), "range": .range(range), "matches": .bool(matches),
                    "mirrors": .raw("[" + urls.map(TraceJSON.string).joined(separator: ",") + "]")
                ])
        }
    }

    /// The slice of the transfer on `connection` that ended now, on the
    /// lane of its TCP connection, with its setup phases and first byte.
    private func finish(_ connection: Int, written: ByteRange, complete: Bool, at now: Double) {
        let (started, timing, name, mirror) = state.withLock { state -> (Started?, TransferTiming?, Bool, Int) in
            let started = state.started.removeValue(forKey: connection)
            let timing = state.timed.removeValue(forKey: connection)
            let lane = Self.lane(of: connection, timing: timing)
            let mirror = started.map { state.index(of: $0.url) } ?? -1
            if let timing, mirror >= 0 { state.finishedBytes[mirror, default: 0] += timing.bytes }
            return (started, timing, state.named.insert(lane).inserted, mirror)
        }
        guard let started else { return }
        let lane = Self.lane(of: connection, timing: timing)
        var events: [String] = []
        if name {
            let host = HeaderPolicy.origin(of: started.url)
            let label = timing?.localPort.map { "TCP :\($0) \(host)" } ?? "connection \(connection) (no TCP connection)"
            events.append(metadata("thread_name", lane: lane, name: label))
        }
        let start = trace.timestamp(started.at)
        let end = max(start, trace.timestamp(now))
        let args: TraceJSON.Object = [
            "connection": .int(connection), "mirror": .string(started.url), "mirrorIndex": .int(mirror),
            "range": .range(started.range), "written": .range(written),
            "bytes": .int(timing?.bytes ?? written.count),
            "outcome": .string(timing.map { $0.endedEarly ?? "complete" } ?? (complete ? "complete" : "ended early")),
            "status": timing.map { .int($0.status) }, "http": timing?.httpVersion.map { .string($0) },
            "newConnection": timing.map { .bool($0.newConnection) }, "connect": timing.map { .number($0.connect) },
            "tls": timing.map { .number($0.tls) }, "firstByte": timing?.firstByte.map { .number($0) }
        ]
        events.append(
            slice(
                "GET \(started.range.start)-\(started.range.end - 1)", category: "transfer", lane: lane, start: start,
                end: end, args: args))
        if let timing {
            if timing.newConnection, timing.connect > 0 {
                let connected = min(end, start + Int64(timing.connect * 1e6))
                events.append(slice("connect", category: "tcp", lane: lane, start: start, end: connected, args: [:]))
                if timing.tls > timing.connect {
                    let secured = min(end, start + Int64(timing.tls * 1e6))
                    events.append(slice("tls", category: "tcp", lane: lane, start: connected, end: secured, args: [:]))
                }
            }
            if let firstByte = timing.firstByte {
                events.append(
                    event(
                        "first byte", phase: "i", lane: lane, at: min(end, start + Int64(firstByte * 1e6)),
                        args: ["connection": .int(connection)]))
            }
        }
        trace.append(events)
    }

    /// The rate counters: the total, and each mirror's from the bytes its
    /// finished and running transfers received since the last sample.
    private func sample(_ progress: DownloadProgress, at now: Double) {
        let rates = state.withLock { state -> [(String, Double)]? in
            var bytes = state.finishedBytes
            for transfer in progress.transfers {
                guard let url = state.started[transfer.connection]?.url else { continue }
                bytes[state.index(of: url), default: 0] += transfer.bytes
            }
            defer { state.lastSample = (now, bytes) }
            guard let last = state.lastSample, now - last.at > 0.001 else { return nil }
            return bytes.keys.sorted().map { index in
                let delta = max(0, (bytes[index] ?? 0) - (last.bytes[index] ?? 0))
                return ("mirror \(index)", Double(delta) / (now - last.at))
            }
        }
        let ts = trace.timestamp(now)
        var events = [event("done", phase: "C", lane: nil, at: ts, args: ["bytes": .int(progress.bytesDone)])]
        if let rates {
            let args = TraceJSON.Object(
                members: [("total", .number(progress.bytesPerSecond))] + rates.map { ($0, .number($1)) })
            events.append(event("rate", phase: "C", lane: nil, at: ts, args: args))
        }
        trace.append(events, sample: true)
    }

    // MARK: - Events

    private static func lane(of connection: Int, timing: TransferTiming?) -> Int {
        timing?.localPort ?? unconnectedLanes + connection
    }

    private func metadata(_ kind: String, lane: Int?, name: String? = nil, sortIndex: Int? = nil) -> String {
        let args: TraceJSON.Object = ["name": name.map { .string($0) }, "sort_index": sortIndex.map { .int($0) }]
        let event: TraceJSON.Object = [
            "ph": .string("M"), "name": .string(kind), "pid": .int(process), "tid": lane.map { .int($0) },
            "args": .raw(args.text)
        ]
        return event.text
    }

    private func slice(
        _ name: String, category: String, lane: Int, start: Int64, end: Int64, args: TraceJSON.Object
    ) -> String {
        let event: TraceJSON.Object = [
            "ph": .string("X"), "name": .string(name), "cat": .string(category), "pid": .int(process),
            "tid": .int(lane), "ts": .int(start), "dur": .int(end - start), "args": .raw(args.text)
        ]
        return event.text
    }

    /// An instant (`phase` "i", on `lane`) or a counter ("C", of the process).
    private func event(_ name: String, phase: String, lane: Int?, at ts: Int64, args: TraceJSON.Object) -> String {
        let event: TraceJSON.Object = [
            "ph": .string(phase), "s": phase == "i" ? .string("t") : nil, "name": .string(name),
            "pid": .int(process), "tid": lane.map { .int($0) }, "ts": .int(ts), "args": .raw(args.text)
        ]
        return event.text
    }

    /// An instant on the download's own lane.
    private func instant(_ name: String, at now: Double, args: TraceJSON.Object) {
        trace.append([event(name, phase: "i", lane: Self.downloadLane, at: trace.timestamp(now), args: args)])
    }
}
