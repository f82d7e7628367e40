// Pieces verified as they land (issue 40): with published piece digests,
// each piece is hashed once written; a bad one is fetched again from a
// mirror that did not write it, and costs that piece alone; a mirror that
// flips a byte is counted against, one that serves another file of the same
// size under the same validators is dropped; the manifest records verified
// pieces, so a resume hashes only the others, and a flipped byte in a done
// range of a `.part` whose pieces were never checked is found and refetched.
import Digests
import Foundation
import Glibc
import RangeServer
import XCTest

@testable import RangeGet

final class PieceCheckTests: EndToEndTestCase {
    private let size: Int64 = 8 << 20
    private let pieceLength: Int64 = 256 << 10
    private lazy var good = Resource.generated(size: size, seed: 4040)
    private lazy var goodBytes = good.bytes(in: 0..<size)

    /// The published digests of `goodBytes`, one per piece.
    private var hashes: PieceHashes {
        let digests = stride(from: 0, to: Int(size), by: Int(pieceLength)).map { start in
            goodBytes[start..<min(start + Int(pieceLength), Int(size))].withUnsafeBytes {
                DigestAlgorithm.sha256.hex(of: $0)
            }
        }
        return PieceHashes(algorithm: .sha256, length: pieceLength, hexDigests: digests)!
    }

    /// `goodBytes` with the byte at `offset` flipped, under the good file's validators.
    private func flipped(at offsets: [Int]) -> Resource {
        var bytes = goodBytes
        for offset in offsets { bytes[offset] ^= 0xFF }
        return sameValidators(Resource.data(bytes))
    }

    private func sameValidators(_ resource: Resource) -> Resource {
        var resource = resource
        resource.etag = "\"same\""
        resource.lastModified = Resource.defaultLastModified
        return resource
    }

    private func checks(_ run: LibraryRun) -> (good: Int, bad: [(Int, [String])]) {
        var good = 0
        var bad: [(Int, [String])] = []
        for case let .transfer(.pieceChecked(index, _, matches, urls)) in run.events {
            if matches { good += 1 } else { bad.append((index, urls)) }
        }
        return (good, bad)
    }

    /// Downloads `urls` to `output` on 8 connections, checking `hashes`.
    private func runWithPieces(_ urls: [String], to output: String) -> LibraryRun {
        runLibrary(urls, to: output) { options in
            options.connections = 8
            options.minimumSplit = 256 << 10
            options.pieces = hashes
        }
    }

    /// Downloads "f" to `path("f")` from the test server, serving `goodBytes`
    /// flipped at `offset`, then another serving the good file, both at
    /// 8 MiB/s per connection.
    private func runWithFlippedFirstMirror(at offset: Int) throws -> (run: LibraryRun, other: RangeServer) {
        let other = try anotherServer()
        server.setResource(flipped(at: [offset]), at: "f")
        other.setResource(sameValidators(good), at: "f")
        server.setRatePerConnection(8 << 20)
        other.setRatePerConnection(8 << 20)
        return (runWithPieces([server.url("f"), other.url("f")], to: path("f")), other)
    }

    func testEveryPieceIsCheckedAndAFlippedByteCostsOnePieceFromAnotherMirror() throws {
        // The first mirror's piece 0, which its opening request always
        // fetches, is wrong by one byte.
        let (run, other) = try runWithFlippedFirstMirror(at: 1234)
        let output = path("f")
        let result = try run.result.get()
        assertSameBytes(output, good)
        let (matched, bad) = checks(run)
        XCTAssertEqual(matched, 32, "every piece verified once")
        XCTAssertEqual(bad.map(\.0), [0])
        XCTAssertEqual(bad.first?.1, [server.url("f")])
        XCTAssertEqual(result.mirrors.first { $0.url == server.url("f") }?.badPieces, [0])
        XCTAssertNil(result.mirrors.first { $0.url == other.url("f") }?.badPieces)
        XCTAssertNil(result.mirrors.first { $0.url == server.url("f") }?.dropped, "one bad piece is one strike")
        // Piece 0 again, from the other mirror; the first mirror's
        // transfer that wrote it keeps what it wrote after it.
        let refetch = other.statistics.requests.filter { $0.rangeHeader?.hasPrefix("bytes=0-") ?? false }
        XCTAssertEqual(refetch.count, 1, "piece 0 fetched again from the mirror that did not write it")
        XCTAssertLessThanOrEqual(result.bytesFetched, size + pieceLength, "one piece again")
        XCTAssertFalse(FileManager.default.fileExists(atPath: output + ".part.json"))
    }

    func testABadPieceFromAProvenMirrorStopsOnlyTheTransferThatWroteIt() throws {
        // The first mirror is proven by piece 0 (its opening request), then
        // runs seven connections at once; piece 9 lies in the second of
        // their ranges (1.75 to 2.75 MiB), in the middle of the run.
        let run = try runWithFlippedFirstMirror(at: 9 * Int(pieceLength) + 99).run
        let result = try run.result.get()
        assertSameBytes(path("f"), good)
        XCTAssertEqual(checks(run).bad.map(\.0), [9])
        // What the bad verdict stopped: the transfers that end right after
        // it (each with its timing).
        let after = run.events.drop { event in
            guard case .transfer(.pieceChecked(_, _, false, _)) = event else { return true }
            return false
        }.dropFirst().filter { event in
            guard case .transfer(.transferTimed) = event else { return true }
            return false
        }
        let stopped = after.prefix { event in
            guard case .transfer(.pieceFinished(_, _, false)) = event else { return false }
            return true
        }
        XCTAssertLessThanOrEqual(stopped.count, 1, "only the transfer that wrote the bad piece: \(Array(stopped))")
        XCTAssertEqual(result.mirrors.first { $0.url == server.url("f") }?.badPieces, [9])
        XCTAssertNil(result.mirrors.first { $0.url == server.url("f") }?.dropped)
    }

    func testPiecesOneTransferWritesWholeAreHashedAsTheyAreWrittenNotReadBack() throws {
        // Cuts fall on piece boundaries, so each piece has one writer, which
        // hashes it on the write path; only a piece a steal or a race split
        // between two transfers is read back from the file.
        server.setResource(good, at: "f")
        server.setRatePerConnection(8 << 20)
        let output = path("f")
        let (streamedBefore, readBefore) = (
            PieceCheck.hashedAsWritten.load(ordering: .relaxed), PieceCheck.readBack.load(ordering: .relaxed)
        )
        let run = runWithPieces([server.url("f")], to: output)
        _ = try run.result.get()
        assertSameBytes(output, good)
        let streamed = PieceCheck.hashedAsWritten.load(ordering: .relaxed) - streamedBefore
        let read = PieceCheck.readBack.load(ordering: .relaxed) - readBefore
        XCTAssertEqual(checks(run).good, 32, "every piece verified once")
        XCTAssertGreaterThanOrEqual(streamed, 28, "read back: \(read)")
        XCTAssertLessThanOrEqual(read, 4, "hashed as written: \(streamed)")
    }

    func testAMirrorServingAnotherFileUnderTheSameValidatorsIsDroppedAndTheFileIsRight() throws {
        let other = try anotherServer()
        server.setResource(sameValidators(good), at: "f")
        other.setResource(sameValidators(Resource.generated(size: size, seed: 999)), at: "f")
        server.setRatePerConnection(4 << 20)
        other.setRatePerConnection(4 << 20)
        let output = path("f")
        let run = runWithPieces([server.url("f"), other.url("f")], to: output)
        let result = try run.result.get()
        assertSameBytes(output, good)
        let report = try XCTUnwrap(result.mirrors.first { $0.url == other.url("f") })
        let dropped = try XCTUnwrap(report.dropped, "\(result.mirrors)")
        XCTAssertTrue(
            dropped.contains("failed their checks") || dropped.contains("another file"), dropped)
        XCTAssertGreaterThanOrEqual(report.badPieces?.count ?? 0, 1)
        XCTAssertNil(result.mirrors.first { $0.url == server.url("f") }?.badPieces)
        // On trial, it fetched one piece at a time, each checked before the
        // next: two bad pieces (a trial piece may start mid-piece) and it was out.
        XCTAssertLessThanOrEqual(report.bytes, 4 * pieceLength, "\(result.mirrors)")
        XCTAssertLessThanOrEqual(result.bytesFetched, size + 4 * pieceLength)
    }

    func testTheOnlyMirrorServingABadPieceFailsTheDownloadAndKeepsThePart() throws {
        server.setResource(flipped(at: [Int(3 * pieceLength)]), at: "f")
        let output = path("f")
        let run = runLibrary([server.url("f")], to: output) { options in
            options.connections = 4
            options.retries = 2
            options.pieces = hashes
        }
        guard case let .verification(message, _)? = run.error else {
            return XCTFail("expected a verification failure, got \(run.result)")
        }
        XCTAssertTrue(message.contains("piece 3"), message)
        XCTAssertTrue(message.contains("3 times"), message)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output))
        XCTAssertTrue(FileManager.default.fileExists(atPath: output + ".part"))
    }

    func testASizeThatDisagreesWithThePiecesIsRefusedBeforeAnyByte() throws {
        server.setResource(Resource.generated(size: size + 1, seed: 4040), at: "f")
        let run = runLibrary([server.url("f")], to: path("f")) { options in
            options.pieces = hashes
        }
        guard case let .server(_, message, _)? = run.error else { return XCTFail("\(run.result)") }
        XCTAssertTrue(message.contains("describe another size"), message)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("f.part")))

        let published = runLibrary([server.url("f")], to: path("g")) { options in
            options.expectedSize = size
        }
        guard case let .server(_, other, _)? = published.error else { return XCTFail("\(published.result)") }
        XCTAssertTrue(other.contains("published as \(size) bytes"), other)
    }

    func testAResumeChecksOnlyThePiecesNotVerifiedAndRefetchesAFlippedOne() throws {
        server.setResource(sameValidators(good), at: "f")
        server.setRatePerConnection(2 << 20)
        let output = path("f")
        // A first run without piece hashes, stopped halfway: nothing verified.
        let halfway: @Sendable (DownloadEvent) -> Bool = { event in
            if case let .progress(progress) = event { return progress.bytesDone >= 4 << 20 }
            return false
        }
        let first = runLibrary([server.url("f")], to: output, stopWhen: halfway) { options in
            options.connections = 4
        }
        XCTAssertEqual(first.error, .interrupted(keptResumeState: true))
        let done = try XCTUnwrap(ManifestFile.done(output + ".part.json").first)
        // Flip a byte inside a done range, as a disk or another tool might.
        let flippedOffset = done.lowerBound + 1000
        try flip(byteAt: flippedOffset, of: output + ".part")
        server.setRatePerConnection(nil)
        let second = runLibrary([server.url("f")], to: output) { options in
            options.connections = 4
            options.pieces = hashes
        }
        _ = try second.result.get()
        assertSameBytes(output, good)
        let (_, bad) = checks(second)
        XCTAssertEqual(bad.map(\.0), [Int(flippedOffset / pieceLength)])
    }

    /// Flips the byte at `offset` of the file at `path` in place.
    private func flip(byteAt offset: Int64, of path: String) throws {
        let descriptor = open(path, O_RDWR)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        defer { close(descriptor) }
        var byte: UInt8 = 0
        XCTAssertEqual(pread(descriptor, &byte, 1, off_t(offset)), 1)
        byte ^= 0xFF
        XCTAssertEqual(pwrite(descriptor, &byte, 1, off_t(offset)), 1)
    }
}
