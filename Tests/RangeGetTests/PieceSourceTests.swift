import XCTest

@testable import RangeGet

/// Where a free connection's next piece comes from (PieceSource), and the
/// engine's answer to the loop's question built on it: does this file wait
/// for its first connection? No clock, no network.
final class PieceSourceTests: TemporaryDirectoryTestCase {
    private let mib: Int64 = 1 << 20

    /// (queued pieces' backoff ends, plain, reserve left, a transfer running) at now = 10 -> the sources, in order.
    func testTheOrderOfSources() {
        let cases: [(notBefore: [Double], plain: Bool, reserve: Bool, running: Bool, sources: [PieceSource])] = [
            ([0], false, true, true, [.queued(index: 0)]),
            ([30, 10, 0], false, true, true, [.queued(index: 1)]), // the first ready piece, not the first queued
            ([30], false, true, true, []), // a backoff holds back steals, the reserve, races
            ([30], false, true, false, []), // issue 36: nor is the reserve work to wait for
            ([30], false, false, false, []),
            ([], false, true, true, [.steal, .reserve, .race]),
            ([], false, false, true, [.steal, .race]),
            ([], false, true, false, [.reserve]), // a file's first connection takes the reserve
            ([], false, false, false, []),
            ([0], true, false, true, [.queued(index: 0)]), // a plain stream's one piece
            ([30], true, false, false, []),
            ([], true, false, true, []) // a plain stream is never cut or raced
        ]
        for (notBefore, plain, reserve, running, sources) in cases {
            XCTAssertEqual(
                PieceSource.order(notBefore: notBefore, now: 10, plain: plain, reserve: reserve, running: running),
                sources, "queue \(notBefore) plain \(plain) reserve \(reserve) running \(running)")
        }
    }

    /// A piece refused beyond a server's connection limit waits without
    /// holding back the connections the server took; any other waiting
    /// piece still holds everything back.
    func testAPieceRefusedBeyondTheLimitHoldsNothingBack() {
        let cases: [(notBefore: [Double], holding: [Bool], sources: [PieceSource])] = [
            ([30], [false], [.steal, .reserve, .race]),
            ([30, 30], [false, true], []),
            ([30, 0], [false, true], [.queued(index: 1)])
        ]
        for (notBefore, holding, sources) in cases {
            XCTAssertEqual(
                PieceSource.order(
                    notBefore: notBefore, holding: holding, now: 10, plain: false, reserve: true, running: true),
                sources, "queue \(notBefore) holding \(holding)")
        }
    }

    /// Issue 36: an engine with no transfer tells the loop it waits for its
    /// first connection exactly when a free connection would get a piece.
    /// A file whose queued pieces all wait out a Retry-After while it keeps
    /// an end reserve said it waited, and the loop held every other file of
    /// a list to one connection for the whole wait, though the file handed
    /// nothing out (the reserve waits behind the backoff).
    func testAFileWaitsForItsFirstConnectionOnlyWhenItWouldStartAPiece() throws {
        let now = 10.0
        let reserve = RangeSet([ByteRange(7 * mib, 8 * mib)])
        let cases: [(name: String, notBefore: [Double], reserve: RangeSet, waits: Bool)] = [
            ("a ready piece", [0], RangeSet(), true),
            ("a ready piece behind one waiting", [now + 30, now], reserve, true),
            ("a piece waiting out a Retry-After", [now + 30], RangeSet(), false),
            ("a piece waiting out a Retry-After, and the end reserve", [now + 30, now + 30], reserve, false),
            ("the end reserve alone", [], reserve, true),
            ("nothing left", [], RangeSet(), false)
        ]
        for (index, item) in cases.enumerated() {
            let engine = try makeEngine(index)
            engine.queue = item.notBefore.enumerated().map { offset, notBefore in
                Piece(range: ByteRange(Int64(offset) * mib, Int64(offset + 1) * mib), failures: 1, notBefore: notBefore)
            }
            engine.unplanned = item.reserve
            XCTAssertEqual(engine.waitsForFirstConnection(now: now), item.waits, item.name)
            XCTAssertEqual(
                engine.nextPiece(thiefRate: nil, now: now) != nil, item.waits,
                "\(item.name): a free connection gets a piece exactly when the file waits for one")
        }
    }

    /// An engine for an 8 MiB file of a near server, 4 connections, on a loop this thread drives and never runs.
    private func makeEngine(_ index: Int) throws -> Engine {
        var settings = DownloadOptions()
        settings.connections = 4
        settings.minimumSplit = 256 << 10
        let head = ResponseHead(status: 206, fields: [:], isComplete: true)
        let remote = RemoteFile(
            url: "http://127.0.0.1:9/f", effectiveURL: nil, head: head, size: 8 * mib, acceptsRanges: true)
        let file = try OutputFile(creating: directory + "/f\(index)", calls: settings.systemCalls)
        let loop = try TransferLoop(threaded: false, multiplex: false, connections: 4)
        // The engine's methods assert they run on the thread driving its loop.
        loop.driveOnThisThread()
        return Engine(
            mirrors: [remote], sink: .file(file), manifest: nil, manifestPath: nil, settings: settings,
            plain: false, loop: loop, onEvent: { _ in })
    }
}
