// ReportModel: a trace's events gathered per download into what the page
// draws (lanes, bars, markers, rate series, the file's map), within fixed
// bounds: a trace may hold a million lanes or events, and the page draws at
// most `Limits`' worth, counting what it left out so the page can say so.
import RangeGet

/// The most the page draws; beyond these, it says what it left out.
struct ReportLimits {
    /// Downloads (trace processes) drawn in full.
    var downloads = 20
    /// Lanes (TCP connections) drawn per download.
    var lanes = 512
    /// Transfers drawn per download, on the timeline and on the file's map.
    var transfers = 5000
    /// Markers (steals, races, retries, stalls, first bytes, ...) drawn per download.
    var markers = 5000
    /// Points per line of a rate chart (more samples are thinned).
    var ratePoints = 800
    /// Mirrors with a line and a row of their own (the rest are summed as "other mirrors").
    var mirrors = 32
}

/// A lane of the timeline: one TCP connection (a trace `tid`).
struct ReportLane {
    var id: Int
    var name: String
    var transfers: [TraceTransfer] = []
    var phases: [(name: String, start: Double, end: Double)] = []
    var markers: [TraceInstant] = []
    /// When its first event starts: lanes are drawn in that order.
    var first = Double.infinity
}

/// A mirror as the page shows it: its color's index, URL and share.
struct ReportMirror {
    /// `mirrorIndex`; -1 for transfers that name none.
    var index: Int
    var url: String?
    var bytes: Int64 = 0
    var transfers = 0
}

/// A line of a rate chart: bytes per second over time.
struct RateSeries {
    /// The mirror's index; nil for the total.
    var mirror: Int?
    var points: [(at: Double, rate: Double)] = []
}

/// One download (trace process) as the page draws it.
struct DownloadReport {
    var process: Int
    var name: String
    /// Microseconds from the trace's start: the first and last moment of its events.
    var start = Double.infinity
    var end = -Double.infinity
    var lanes: [ReportLane] = []
    /// The download's own row: markers not on a drawn lane, and its `sync`.
    var row = ReportLane(id: 0, name: "download")
    var mirrors: [ReportMirror] = []
    var rates: [RateSeries] = []
    /// The file's size as far as the trace shows: the probe's, the bytes
    /// done, or the end of the furthest range.
    var fileSize: Int64 = 0
    /// The `written` ranges of the drawn transfers, adjacent ones of one
    /// mirror merged: the file's map.
    var map: [(range: ByteRange, mirror: Int, connections: Set<Int>)] = []
    /// Counts of everything in the trace, drawn or not.
    var transferCount = 0
    var tcpConnections = 0
    var bytes: Int64 = 0
    /// How many instants of each name the download has (`retry`: 3).
    var eventCounts: [String: Int] = [:]
    /// What was left out, one sentence each.
    var leftOut: [String] = []

    /// The duration covered, in seconds.
    var seconds: Double { end > start ? (end - start) / 1e6 : 0 }
}

/// What the page says of the whole trace.
struct TraceReport {
    var downloads: [DownloadReport]
    /// Downloads in the trace beyond the ones drawn.
    var downloadsLeftOut: Int
    var transferCount: Int { downloads.reduce(0) { $0 + $1.transferCount } }

    /// The downloads of `events`, in process order, within `limits`.
    init(_ events: [TraceEvent], limits: ReportLimits = ReportLimits()) {
        var names: [Int: String] = [:]
        var laneNames: [Int: [Int: String]] = [:]
        var byProcess: [Int: [TraceEvent]] = [:]
        for event in events {
            switch event {
            case let .processName(process, name): names[process] = name
            case let .threadName(process, lane, name): laneNames[process, default: [:]][lane] = name
            case let .transfer(process, _), let .phase(process, _, _, _, _), let .instant(process, _),
                let .rate(process, _, _, _), let .done(process, _, _):
                byProcess[process, default: []].append(event)
            case .ignored: break
            }
        }
        let processes = byProcess.keys.sorted()
        downloads = processes.prefix(limits.downloads).map { process in
            DownloadReport(
                process: process, name: names[process] ?? "download \(process)", events: byProcess[process] ?? [],
                laneNames: laneNames[process] ?? [:], limits: limits)
        }
        downloadsLeftOut = max(0, processes.count - limits.downloads)
    }
}

extension DownloadReport {
    /// Lanes from this number up carry transfers that never had a TCP connection (docs/TRACE.md).
    static let unconnectedLanes = 100_000

    init(process: Int, name: String, events: [TraceEvent], laneNames: [Int: String], limits: ReportLimits) {
        self.process = process
        self.name = name
        var lanes: [Int: ReportLane] = [:]
        func touch(_ lane: Int, at time: Double) {
            let first = min(lanes[lane]?.first ?? .infinity, time)
            lanes[lane, default: ReportLane(id: lane, name: laneNames[lane] ?? "lane \(lane)")].first = first
        }
        var instants: [TraceInstant] = []
        var samples: [(at: Double, total: Double?, mirrors: [Int: Double])] = []
        var mirrorTable: [Int: ReportMirror] = [:]
        func cover(_ from: Double, _ to: Double) {
            start = min(start, from)
            end = max(end, to)
        }
        for event in events {
            switch event {
            case let .transfer(_, transfer):
                cover(transfer.start, transfer.end)
                transferCount += 1
                let index = max(-1, transfer.mirrorIndex ?? -1)
                var mirror = mirrorTable[index] ?? ReportMirror(index: index)
                if mirror.url == nil { mirror.url = transfer.mirror }
                let carried = transfer.bytes ?? transfer.written.map(\.count) ?? 0
                mirror.bytes = mirror.bytes.saturatingAdding(carried)
                mirror.transfers += 1
                mirrorTable[index] = mirror
                bytes = bytes.saturatingAdding(carried)
                fileSize = max(fileSize, transfer.written?.end ?? 0, transfer.range?.end ?? 0)
                guard transfer.lane != 0 else { continue }
                touch(transfer.lane, at: transfer.start)
                lanes[transfer.lane]?.transfers.append(transfer)
            case let .phase(_, lane, phase, from, duration):
                cover(from, from + duration)
                if lane == 0 {
                    row.phases.append((phase, from, from + duration))
                } else {
                    touch(lane, at: from)
                    lanes[lane]?.phases.append((phase, from, from + duration))
                }
            case let .instant(_, instant):
                cover(instant.at, instant.at)
                if let size = instant.size { fileSize = max(fileSize, size) }
                eventCounts[instant.name, default: 0] += 1
                instants.append(instant)
            case let .rate(_, at, total, mirrors):
                cover(at, at)
                samples.append((at, total, mirrors))
            case let .done(_, at, done):
                cover(at, at)
                fileSize = max(fileSize, done)
            case .processName, .threadName, .ignored:
                break
            }
        }
        if start > end { (start, end) = (0, 0) }
        tcpConnections = lanes.keys.filter { $0 > 0 && $0 < Self.unconnectedLanes }.count
        mirrors = mirrorTable.values.sorted {
            ($0.index < 0 ? Int.max : $0.index) < ($1.index < 0 ? Int.max : $1.index)
        }
        if mirrors.count > limits.mirrors {
            leftOut.append(
                "\(mirrors.count - limits.mirrors) of \(mirrors.count) mirrors are not listed: the page lists the "
                    + "first \(limits.mirrors).")
            mirrors.removeLast(mirrors.count - limits.mirrors)
        }
        place(lanes: lanes, instants: instants, limits: limits)
        rates = Self.series(samples, limits: limits)
        map = Self.fileMap(self.lanes.flatMap(\.transfers))
    }

    /// Chooses the lanes drawn (the first `limits.lanes` to start), caps
    /// their transfers, and puts each marker on the lane of the connection it
    /// names, else on the download's row.
    private mutating func place(lanes all: [Int: ReportLane], instants: [TraceInstant], limits: ReportLimits) {
        let ordered = all.values.sorted { ($0.first, $0.id) < ($1.first, $1.id) }
        lanes = Array(ordered.prefix(limits.lanes))
        if ordered.count > limits.lanes {
            let hidden = ordered.dropFirst(limits.lanes).reduce(0) { $0 + $1.transfers.count }
            leftOut.append(
                "\(ordered.count - limits.lanes) of \(ordered.count) lanes (and their \(hidden) transfers) are "
                    + "not drawn: the page draws the first \(limits.lanes) to start.")
        }
        var transfersLeft = limits.transfers
        var cut = 0
        for index in lanes.indices {
            lanes[index].transfers.sort { $0.start < $1.start }
            let kept = min(lanes[index].transfers.count, max(0, transfersLeft))
            cut += lanes[index].transfers.count - kept
            lanes[index].transfers.removeLast(lanes[index].transfers.count - kept)
            transfersLeft -= kept
        }
        if cut > 0 {
            leftOut.append("\(cut) transfers on drawn lanes are not drawn: the page draws at most \(limits.transfers).")
        }
        // Connect, TLS and sync phases: as many as transfers, at most.
        var phasesLeft = limits.transfers
        var phasesCut = 0
        for index in -1..<lanes.count {
            var phases = index < 0 ? row.phases : lanes[index].phases
            let kept = min(phases.count, max(0, phasesLeft))
            phasesCut += phases.count - kept
            phasesLeft -= kept
            phases.removeLast(phases.count - kept)
            if index < 0 { row.phases = phases } else { lanes[index].phases = phases }
        }
        if phasesCut > 0 {
            leftOut.append(
                "\(phasesCut) connect, TLS and sync phases are not drawn: the page draws at most \(limits.transfers).")
        }
        // Where each rangeget connection was, and when: its transfers' lanes.
        var spans: [Int: [(start: Double, end: Double, lane: Int)]] = [:]
        for (index, lane) in lanes.enumerated() {
            for transfer in lane.transfers {
                guard let connection = transfer.connection else { continue }
                spans[connection, default: []].append((transfer.start, transfer.end, index))
            }
        }
        let laneIndex = Dictionary(lanes.enumerated().map { ($1.id, $0) }, uniquingKeysWith: { first, _ in first })
        // A stall is also a retry (docs/TRACE.md): one marker for the pair.
        let stalls = Set(instants.filter { $0.name == "stall" }.map { "\($0.at) \($0.connection ?? -1)" })
        var markersLeft = limits.markers
        var skipped = 0
        for instant in instants.sorted(by: { $0.at < $1.at }) {
            guard Self.drawn.contains(instant.name) else { continue }
            if instant.name == "retry", stalls.contains("\(instant.at) \(instant.connection ?? -1)") { continue }
            guard markersLeft > 0 else {
                skipped += 1
                continue
            }
            markersLeft -= 1
            if instant.lane != 0 {
                if let index = laneIndex[instant.lane] {
                    lanes[index].markers.append(instant)
                } else {
                    skipped += 1
                }
            } else if let connection = instant.connection, let spans = spans[connection],
                let index = Self.lane(at: instant.at, among: spans)
            {
                lanes[index].markers.append(instant)
            } else {
                row.markers.append(instant)
            }
        }
        if skipped > 0 {
            leftOut.append("\(skipped) events are not drawn (past \(limits.markers) markers, or on lanes left out).")
        }
    }

    /// The instants drawn as markers; the rest (checkpoints, samples of
    /// pieces checked) are too many to mark and say little on a timeline.
    static let drawn: Set<String> = [
        "stolen", "raced", "retry", "stall", "first byte", "mirror dropped", "connections moved", "connection count",
        "probed", "reusing", "restarting", "paused", "resumed", "notice"
    ]

    /// The lane of the span that holds `time`, else of the one nearest it.
    private static func lane(at time: Double, among spans: [(start: Double, end: Double, lane: Int)]) -> Int? {
        spans.min { distance(time, $0) < distance(time, $1) }?.lane
    }

    private static func distance(_ time: Double, _ span: (start: Double, end: Double, lane: Int)) -> Double {
        time < span.start ? span.start - time : time > span.end ? time - span.end : 0
    }

    /// The rate lines: the total, then each mirror's, each thinned to
    /// `limits.ratePoints` points; mirrors past `limits.mirrors` are left out.
    private static func series(
        _ samples: [(at: Double, total: Double?, mirrors: [Int: Double])], limits: ReportLimits
    ) -> [RateSeries] {
        let sorted = samples.sorted { $0.at < $1.at }
        let stride = max(1, (sorted.count + limits.ratePoints - 1) / max(1, limits.ratePoints))
        let thinned = sorted.enumerated().filter { $0.offset % stride == 0 || $0.offset == sorted.count - 1 }.map {
            $0.element
        }
        var total = RateSeries(mirror: nil)
        total.points = thinned.compactMap { sample in sample.total.map { (sample.at, $0) } }
        let indexes = Set(thinned.flatMap { $0.mirrors.keys }).sorted().prefix(limits.mirrors)
        let lines = indexes.map { index in
            RateSeries(
                mirror: index, points: thinned.compactMap { sample in sample.mirrors[index].map { (sample.at, $0) } })
        }
        return (total.points.isEmpty ? [] : [total]) + lines
    }

    /// The written ranges of `transfers`, in file order, adjacent or
    /// overlapping ranges of one mirror merged into one. Bytes two
    /// transfers both wrote (a race: the same bytes, from both) are drawn
    /// once, for the one whose range starts first: the map covers each byte once.
    private static func fileMap(_ transfers: [TraceTransfer]) -> [(
        range: ByteRange, mirror: Int, connections: Set<Int>
    )] {
        let pieces = transfers.compactMap { transfer -> (ByteRange, Int, Int?)? in
            guard let written = transfer.written, written.count > 0 else { return nil }
            return (written, max(-1, transfer.mirrorIndex ?? -1), transfer.connection)
        }.sorted { $0.0.start < $1.0.start }
        var merged: [(range: ByteRange, mirror: Int, connections: Set<Int>)] = []
        for (whole, mirror, connection) in pieces {
            let start = max(whole.start, merged.last?.range.end ?? 0)
            guard start < whole.end else { continue }
            let range = ByteRange(start, whole.end)
            if let last = merged.last, last.mirror == mirror, range.start <= last.range.end {
                merged[merged.count - 1].range = ByteRange(last.range.start, max(last.range.end, range.end))
                if let connection { merged[merged.count - 1].connections.insert(connection) }
            } else {
                merged.append((range, mirror, connection.map { Set([$0]) } ?? Set()))
            }
        }
        return merged
    }
}
