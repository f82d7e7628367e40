// Mirror placement end to end (issue 11): real downloads through the library
// from two RangeServers on 127.0.0.1 that cap each connection, share one
// uplink among all connections, or one of each, judged from the engine's own
// event record. Which mirror
// each connection fetches from at every moment is rebuilt from
// pieceStarted/pieceFinished; moves are the connectionsMoved events.
// Nothing here asserts how long anything took: rates and sizes leave wide
// margins, and the only timestamps used tell a connection between two pieces
// (microseconds) from a mirror left without one (the rest of the download).
import Foundation
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class MirrorPlacementEndToEndTests: EndToEndTestCase {
    private let mib = 1 << 20
    private let connections = 4
    /// The setup's `server` and one more, each serving `resource` at `/f`.
    private func twoMirrors(serving resource: Resource) throws -> (RangeServer, RangeServer) {
        let other = try anotherServer()
        for mirror in [server!, other] { mirror.setResource(resource, at: "f") }
        return (server, other)
    }

    // MARK: - Per-connection caps

    /// A mirror capping each connection at 4 MiB/s and one capping each at
    /// 0.5 MiB/s: every connection added to the fast one adds 4 MiB/s, so
    /// all four belong there. The engine starts two on each, then moves the
    /// slow mirror's connections over; once the last has moved, nothing new
    /// starts on the slow mirror, the fast one runs all four, and the slow one
    /// carried a few percent of the bytes (an even spread with work stealing
    /// gives it 1/9, about 11%). 32 MiB: about 2 s at 16 MiB/s, and moves pay
    /// while more than about 0.8 s of work is left. Fails without placement
    /// (no move at all).
    func testPerConnectionCapsMoveEveryConnectionToTheFasterMirror() throws {
        let size: Int64 = 32 << 20
        let resource = Resource.generated(size: size, seed: 1101)
        let (slow, fast) = try twoMirrors(serving: resource)
        slow.setRatePerConnection(mib / 2)
        fast.setRatePerConnection(4 * mib)
        // The slow mirror first: it also gets the opening request.
        let (slowURL, fastURL) = (slow.url("f"), fast.url("f"))
        let record = try download([slowURL, fastURL], resource)

        let shares = record.shares
        XCTAssertLessThan(shares[0], 0.06, "the slow mirror carried a small share: \(record.summary)")
        XCTAssertGreaterThan(shares[1], 0.94, "the fast mirror carried nearly all: \(record.summary)")
        let moves = record.moves
        XCTAssertTrue(
            moves.contains { $0.from == slowURL && $0.to == fastURL && $0.count > 0 },
            "connections moved from the slow mirror to the fast one: \(record.summary)")
        guard let last = moves.last else { return }
        XCTAssertEqual(last.from, slowURL, "the last move left the slow mirror: \(record.summary)")
        XCTAssertEqual(last.to, fastURL, "the last move went to the fast mirror: \(record.summary)")
        // A transfer about to finish is left to finish rather than cancelled (its
        // connection goes to the fast mirror next), so at most one such is left.
        let running = record.running(after: last.index)
        XCTAssertLessThanOrEqual(
            running[slowURL, default: 0], 1, "the last move emptied the slow mirror: \(record.summary)")
        let startedOnSlowLater = record.starts.filter { $0.index > last.index && $0.url == slowURL }
        XCTAssertTrue(
            startedOnSlowLater.isEmpty,
            "no transfer started on the slow mirror after the last move: \(startedOnSlowLater), \(record.summary)")
        XCTAssertEqual(
            record.mostRunning(on: fastURL, after: last.index), connections,
            "the fast mirror ran every connection after the last move: \(record.summary)")
    }

    /// Three mirrors paced as nginx paces by default, capping each
    /// connection at 0.5, 2 and 8 MiB/s: each connection gets 512 KiB at
    /// once, then nothing until its cap has paid for it (a second, a
    /// quarter, a sixteenth). A tenth of a second saw a slow mirror at its
    /// burst's speed (5 MiB/s a connection) or at zero. Judged over their
    /// pauses, the two slower carry little. A guard: on this small scale the
    /// old 0.1 s windows passed it too; what they cost shows in
    /// `Benchmarks/` (mirrors-bursty, 1 GiB from nginx) and in
    /// MirrorPlacementTests (the curve's latest total, upper bounds).
    func testBurstyPerConnectionCapsMoveConnectionsToTheFastestMirror() throws {
        let size: Int64 = 48 << 20
        let resource = Resource.generated(size: size, seed: 1105)
        let (slow, middle) = try twoMirrors(serving: resource)
        let fast = try anotherServer()
        fast.setResource(resource, at: "f")
        for (mirror, rate) in [(slow, mib / 2), (middle, 2 * mib), (fast, 8 * mib)] {
            mirror.setRatePerConnection(rate)
            mirror.setBurst(mib / 2)
        }
        let record = try download([slow.url("f"), middle.url("f"), fast.url("f")], resource)
        XCTAssertGreaterThan(record.shares[2], 0.8, "the fast mirror carried most: \(record.summary)")
    }

    // MARK: - Shared uplinks

    /// Two mirrors whose connections share one uplink each, 2 MiB/s and
    /// 6 MiB/s, with no cap per connection: one connection fills either, so a
    /// mirror emptied by a move would lose its whole uplink. From the first
    /// transfer on a mirror until the last stretch of the download (where
    /// connections run out of work), each mirror keeps a transfer running
    /// (short of the instant between one piece and the next), no move leaves
    /// its donor empty, and each mirror carried at least half its uplink's
    /// share of the bytes (25% and 75%). A regression guard: the even start
    /// (two and two) is already a best placement here, so this passes with
    /// the placement disabled too; it fails when placement takes an uplink
    /// mirror for one that caps each connection and empties it.
    func testSharedUplinksKeepEveryMirrorInUse() throws {
        let size: Int64 = 16 << 20
        let resource = Resource.generated(size: size, seed: 1102)
        let (small, large) = try twoMirrors(serving: resource)
        small.setTotalRate(2 * mib)
        large.setTotalRate(6 * mib)
        let urls = [small.url("f"), large.url("f")]
        let record = try download(urls, resource)

        for move in record.moves {
            XCTAssertGreaterThan(
                record.running(after: move.index)[move.from, default: 0], 0,
                "the move at event \(move.index) emptied \(move.from): \(record.summary)")
        }
        assertEveryMirrorKeepsATransferUntilTheLastStretch(record, urls)
        let shares = record.shares
        XCTAssertGreaterThanOrEqual(shares[0], 0.5 * 0.25, "the 2 MiB/s uplink was used: \(record.summary)")
        XCTAssertGreaterThanOrEqual(shares[1], 0.5 * 0.75, "the 6 MiB/s uplink was used: \(record.summary)")
    }

    /// An uplink mirror (2 MiB/s shared, no cap per connection) and one
    /// capping each connection at 2 MiB/s: two and two give 2 + 4 MiB/s,
    /// one and three 2 + 6. The uplink mirror gives up the connection it
    /// does not need and keeps the one that fills it: a move from it to the
    /// capped mirror, which then runs three at once, while the uplink mirror
    /// is never left without a transfer and carries about a quarter of the
    /// bytes. Fails without placement (no move, never three on the capped
    /// mirror).
    func testUplinkMirrorGivesUpTheConnectionsItDoesNotNeedButKeepsOne() throws {
        let size: Int64 = 16 << 20
        let resource = Resource.generated(size: size, seed: 1104)
        let (uplink, capped) = try twoMirrors(serving: resource)
        uplink.setTotalRate(2 * mib)
        capped.setRatePerConnection(2 * mib)
        let (uplinkURL, cappedURL) = (uplink.url("f"), capped.url("f"))
        let record = try download([uplinkURL, cappedURL], resource)

        XCTAssertTrue(
            record.moves.contains { $0.from == uplinkURL && $0.to == cappedURL && $0.count > 0 },
            "a connection moved from the uplink mirror to the capped one: \(record.summary)")
        XCTAssertEqual(
            record.mostRunning(on: cappedURL, after: 0), connections - 1,
            "the capped mirror ran all connections but one: \(record.summary)")
        for move in record.moves {
            XCTAssertGreaterThan(
                record.running(after: move.index)[move.from, default: 0], 0,
                "the move at event \(move.index) emptied \(move.from): \(record.summary)")
        }
        assertEveryMirrorKeepsATransferUntilTheLastStretch(record, [uplinkURL, cappedURL])
        XCTAssertGreaterThanOrEqual(record.shares[0], 0.5 * 0.25, "the uplink was used: \(record.summary)")
    }

    // MARK: - Equal mirrors

    /// Two mirrors capping each connection at 2 MiB/s: no placement beats
    /// two and two, so nothing moves, short of one probe of a single
    /// connection (when a 15% difference is measured by chance), perhaps
    /// undone (when the sum then measures 5% lower by chance), and both carry
    /// a good part of the bytes. A regression guard against placement that
    /// moves on noise: it passes with the placement disabled too.
    func testEqualMirrorsKeepTheirConnections() throws {
        let size: Int64 = 12 << 20
        let resource = Resource.generated(size: size, seed: 1103)
        let (first, second) = try twoMirrors(serving: resource)
        for mirror in [first, second] { mirror.setRatePerConnection(2 * mib) }
        let record = try download([first.url("f"), second.url("f")], resource)

        let moves = record.moves
        XCTAssertTrue(moves.allSatisfy { $0.count == 1 }, "a probe moves one connection: \(record.summary)")
        XCTAssertLessThanOrEqual(moves.count, 2, "at most one probe move and its undo: \(record.summary)")
        if moves.count == 2 {
            XCTAssertEqual(
                [moves[1].from, moves[1].to], [moves[0].to, moves[0].from],
                "the second move undoes the probe: \(record.summary)")
        }
        XCTAssertTrue(record.shares.allSatisfy { $0 > 0.15 }, "both mirrors carried bytes: \(record.summary)")
    }

    // MARK: - Running a download and reading its record

    /// Downloads `resource` from `urls` with four connections, records every
    /// event with the seconds since the start, and checks the output.
    private func download(
        _ urls: [String], _ resource: Resource,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> EventRecord {
        var options = DownloadOptions()
        options.connections = connections
        options.minimumSplit = 256 << 10
        let download = Download(mirrors: urls, destination: .file(path("f")), options: options)
        let recorder = Recorder()
        let result = try download.run { event in recorder.add(event) }
        assertSameBytes(result.path, resource, file: file, line: line)
        XCTAssertEqual(result.mirrors.map(\.url), urls, file: file, line: line)
        XCTAssertTrue(result.mirrors.allSatisfy { $0.dropped == nil }, "\(result.mirrors)", file: file, line: line)
        return EventRecord(events: recorder.events, result: result, connections: connections)
    }

    /// From each mirror's first transfer until the last stretch, the mirror
    /// is never without a running transfer for more than a moment.
    private func assertEveryMirrorKeepsATransferUntilTheLastStretch(
        _ record: EventRecord, _ urls: [String], file: StaticString = #filePath, line: UInt = #line
    ) {
        guard let end = record.lastStretch else {
            return XCTFail("never ran every connection: \(record.summary)", file: file, line: line)
        }
        // The last stretch starts late: before it, every connection had work.
        XCTAssertGreaterThanOrEqual(
            record.bytesDone(at: end.time), record.result.size / 2,
            "the last stretch began past half the file: \(record.summary)", file: file, line: line)
        for url in urls {
            guard let first = record.starts.first(where: { $0.url == url }) else {
                XCTFail("nothing ran on \(url): \(record.summary)", file: file, line: line)
                continue
            }
            let gap = record.longestGap(on: url, from: first.index, to: end.index)
            XCTAssertLessThan(
                gap, 0.1, "\(url) had no transfer for \(gap) s before the last stretch: \(record.summary)",
                file: file, line: line)
        }
    }
}

/// Collects events with the seconds since its creation, from any thread.
private final class Recorder: Sendable {
    private let start = ContinuousClock.now
    private let list = Mutex<[(time: Double, event: DownloadEvent)]>([])

    func add(_ event: DownloadEvent) {
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        list.withLock { $0.append((seconds, event)) }
    }

    var events: [(time: Double, event: DownloadEvent)] { list.withLock { $0 } }
}

/// A download's events, and which mirror each connection fetched from when.
private struct EventRecord {
    struct Move: CustomStringConvertible {
        var index: Int
        var time: Double
        var from: String
        var to: String
        var count: Int

        var description: String { "#\(index) \(String(format: "%.2f", time)) s: \(count) \(from) -> \(to)" }
    }

    struct Start: CustomStringConvertible {
        var index: Int
        var connection: Int
        var url: String

        var description: String { "#\(index) c\(connection) \(url)" }
    }

    let events: [(time: Double, event: DownloadEvent)]
    let result: DownloadResult
    let connections: Int
    let moves: [Move]
    let starts: [Start]
    /// After each event: the mirror each running transfer fetches from, by connection.
    let placement: [[Int: String]]

    init(events: [(time: Double, event: DownloadEvent)], result: DownloadResult, connections: Int) {
        self.events = events
        self.result = result
        self.connections = connections
        var moves: [Move] = []
        var starts: [Start] = []
        var placement: [[Int: String]] = []
        var current: [Int: String] = [:]
        for (index, (time, event)) in events.enumerated() {
            switch event {
            case let .transfer(.pieceStarted(connection, _, url)):
                current[connection] = url
                starts.append(Start(index: index, connection: connection, url: url))
            case let .transfer(.pieceFinished(connection, _, _)):
                current[connection] = nil
            case let .transfer(.connectionsMoved(from, to, count)):
                moves.append(Move(index: index, time: time, from: from, to: to, count: count))
            default:
                break
            }
            placement.append(current)
        }
        self.moves = moves
        self.starts = starts
        self.placement = placement
    }

    /// Running transfers per mirror right after event `index`.
    func running(after index: Int) -> [String: Int] {
        placement[index].values.reduce(into: [:]) { $0[$1, default: 0] += 1 }
    }

    /// The most transfers running on `url` at once after event `index`.
    func mostRunning(on url: String, after index: Int) -> Int {
        placement[index...].map { $0.values.count(where: { $0 == url }) }.max() ?? 0
    }

    /// The event that begins the last stretch: from it on, fewer transfers
    /// than connections run until the end (connections out of work). Nil if
    /// the connections never all ran at once.
    var lastStretch: (index: Int, time: Double)? {
        guard let full = placement.lastIndex(where: { $0.count >= connections }),
            full + 1 < events.count
        else { return nil }
        return (full + 1, events[full + 1].time)
    }

    /// The longest time `url` had no running transfer between events `first` and `last`.
    func longestGap(on url: String, from first: Int, to last: Int) -> Double {
        var longest = 0.0
        var emptySince: Double?
        for index in first...last {
            let empty = !placement[index].values.contains(url)
            if empty, emptySince == nil { emptySince = events[index].time }
            if !empty || index == last, let since = emptySince {
                longest = max(longest, events[index].time - since)
                emptySince = nil
            }
        }
        return longest
    }

    /// Bytes done by the latest progress event at or before `time`.
    func bytesDone(at time: Double) -> Int64 {
        events.last { entry in
            guard entry.time <= time, case .progress = entry.event else { return false }
            return true
        }.map { entry in
            guard case let .progress(progress) = entry.event else { return 0 }
            return progress.bytesDone
        } ?? 0
    }

    /// Each mirror's share of the bytes fetched, in the order the URLs were given.
    var shares: [Double] {
        let total = result.mirrors.map(\.bytes).reduce(0, +)
        return result.mirrors.map { total > 0 ? Double($0.bytes) / Double(total) : 0 }
    }

    /// What a failure message shows: moves, bytes per mirror, duration.
    var summary: String {
        let bytes = result.mirrors.map { "\($0.bytes)" }.joined(separator: "/")
        let shares = shares.map { String(format: "%.3f", $0) }.joined(separator: "/")
        return "moves \(moves), bytes \(bytes) (shares \(shares)), \(String(format: "%.2f", result.seconds)) s"
    }
}
