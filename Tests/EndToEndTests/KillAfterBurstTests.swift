// Issue 14: kill -9 loses nothing that was written. A server that paces in
// bursts, as nginx's limit_rate does by default, hands a connection a whole
// burst at once and then pauses; the client writes the burst within
// milliseconds. Killed the moment the burst is on disk, the next run must
// fetch again at most one write per connection (not yet recorded when the
// kill came) plus what was still in the sockets. A progress record made on
// a timer (the quick save twenty times a second before the write journal)
// lost the whole burst: these tests fail on it.
import Foundation
import Glibc
import RangeGet
import RangeServer
import XCTest

final class KillAfterBurstTests: EndToEndTestCase {
    private let burst: Int64 = 2 << 20
    /// The most a kill may cost a connection besides what its socket held:
    /// the one write whose position was not recorded yet.
    private let oneWrite: Int64 = 64 << 10

    /// One connection, 24 MiB at 4 MiB/s in 2 MiB bursts (nginx's default
    /// chunk; `-k 2M` makes the opening request one burst too), killed four
    /// times, each time as soon as the run's second burst is in the `.part`
    /// (a run's first burst comes at once, the second half a second later):
    /// the server is in its pause then, and the socket holds nothing. All
    /// five runs together are served the file and at most one write more
    /// per kill. A record made on a timer is lucky when it runs after the
    /// burst's last write and before the kill; four kills in a row make that
    /// luck rare (the quick save twenty times a second passed 1 run in 20
    /// with three kills, none in 20 with four).
    ///
    /// What a run was served is the sum of its requests' body bytes when it
    /// ended: once its pause is over, a killed run's server writes the next
    /// burst into the dead socket, and the kernel takes some of it before
    /// the reset comes back; those bytes reach no client.
    func testKillsRightAfterABurstCostAtMostOneWriteEach() throws {
        let size: Int64 = 24 << 20
        let resource = Resource.generated(size: size, seed: 1410)
        server.setResource(resource, at: "f")
        server.setBurst(Int(burst))
        let output = path("f")
        let arguments = ["-n", "1", "-k", "2M", "-o", output, server.url("f")]
        let kills = 4
        var watched: [Int64] = []
        var served: Int64 = 0
        /// Where a run may start at the earliest: the last burst's end, less the one write a kill may cost.
        var resumesFrom: Int64 = 0
        for kill in 1...kills {
            server.setRatePerConnection(Int(2 * burst))
            let requestsBefore = server.statistics.requests.count
            let child = try launch(arguments)
            // Where this run starts: its first ranged request (the opening request from 0, or a resume).
            var first: Int64?
            XCTAssertTrue(
                wait(timeout: 20) {
                    first =
                        server.statistics.requests.dropFirst(requestsBefore).lazy
                        .compactMap { requestedRange($0.rangeHeader)?.lowerBound }.first
                    return first != nil
                }, "kill \(kill): the run asks for data")
            let start = try XCTUnwrap(first)
            XCTAssertGreaterThanOrEqual(
                start, resumesFrom, "kill \(kill): the run asks again for bytes of the last burst")
            let end = start + 2 * burst
            // Asked every millisecond, so that the kill comes right after the write.
            XCTAssertTrue(
                wait(timeout: 20, every: 0.001) { isWritten(output + ".part", resource, endingAt: end) },
                "kill \(kill): the second burst reached the .part")
            child.kill9()
            watched.append(end)
            let sent = server.statistics.requests.dropFirst(requestsBefore).reduce(0) { $0 + $1.bodyBytesSent }
            // The kill came in the pause after the burst: the socket held nothing.
            XCTAssertEqual(sent, end - start, "kill \(kill): the server had sent this run two bursts, no more")
            served += sent
            resumesFrom = end - oneWrite
        }

        server.setRatePerConnection(nil)
        let requestsBefore = server.statistics.requests.count
        let run = try CLI.run(arguments, in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertTrue(run.stderr.contains("resuming"), run.stderr)
        let last = server.statistics.requests.dropFirst(requestsBefore)
        served += last.reduce(0) { $0 + $1.bodyBytesSent }
        XCTAssertLessThanOrEqual(
            served, size + Int64(kills) * oneWrite,
            "served \(served) bytes for \(size): a burst written before a kill was fetched again "
                + "(the runs' second bursts ended at \(watched))")
        XCTAssertGreaterThanOrEqual(
            last.compactMap { requestedRange($0.rangeHeader)?.lowerBound }.first ?? -1,
            resumesFrom, "the last run asks again for bytes of the last burst")
        XCTAssertEqual(directoryEntries(), ["f"])
    }

    /// Three connections, 24 MiB at 4 MiB/s each in 2 MiB bursts: their
    /// first bursts come at once, their second ones together half a second
    /// later. The kill comes as soon as every byte the server has sent is in
    /// the `.part` (the end of each response so far is on disk) and the
    /// second bursts are among them: every socket is empty then. The next
    /// run fetches again at most one write per connection of the bytes the
    /// `.part` held, and both runs together are served the file, that, and
    /// what the server sent that never reached the file.
    func testAKillRightAfterTheBurstsOfThreeConnectionsCostsAtMostOneWriteEach() throws {
        let size: Int64 = 24 << 20
        let connections = 3
        let resource = Resource.generated(size: size, seed: 1411)
        server.setResource(resource, at: "f")
        server.setBurst(Int(burst))
        server.setRatePerConnection(Int(2 * burst))
        let output = path("f")
        let arguments = ["-n", "\(connections)", "-k", "2M", "-o", output, server.url("f")]
        let child = try launch(arguments)
        let everythingWritten = wait(timeout: 20, every: 0.001) {
            let requests = server.statistics.requests
            return requests.reduce(0) { $0 + $1.bodyBytesSent } >= 2 * Int64(connections) * burst
                && requests.allSatisfy { request in
                    guard request.bodyBytesSent > 0, let range = requestedRange(request.rangeHeader) else {
                        return true
                    }
                    return isWritten(output + ".part", resource, endingAt: range.lowerBound + request.bodyBytesSent)
                }
        }
        child.kill9()
        XCTAssertTrue(everythingWritten, "the second bursts of every connection reached the .part")
        let first = server.statistics.requests
        let sent = first.reduce(0) { $0 + $1.bodyBytesSent }
        // What the .part held at the kill: from where each response started, the bytes that are the file's.
        var onDisk = RangeSet()
        for start in first.compactMap({ requestedRange($0.rangeHeader)?.lowerBound }) {
            let prefix = writtenPrefix(output + ".part", resource, from: start)
            onDisk.insert(ByteRange(prefix.lowerBound, prefix.upperBound))
        }

        server.setRatePerConnection(nil)
        let run = try CLI.run(arguments, in: directory, timeout: 30)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let last = server.statistics.requests.dropFirst(first.count)
        var fetchedAgain: Int64 = 0
        for request in last {
            guard let range = requestedRange(request.rangeHeader) else { continue }
            let fetched = ByteRange(range.lowerBound, range.lowerBound + request.bodyBytesSent)
            var missing = RangeSet([fetched])
            for range in onDisk.ranges { missing.remove(range) }
            fetchedAgain += fetched.count - missing.byteCount
        }
        XCTAssertLessThanOrEqual(
            fetchedAgain, Int64(connections) * oneWrite,
            "fetched again \(fetchedAgain) bytes the .part held at the kill (\(onDisk))")
        let served = sent + last.reduce(0) { $0 + $1.bodyBytesSent }
        let neverWritten = sent - onDisk.byteCount
        XCTAssertLessThanOrEqual(
            served, size + Int64(connections) * oneWrite + neverWritten,
            "served \(served) bytes for \(size), \(neverWritten) of them never reached the .part")
    }

    /// Whether the `.part` at `path` holds `resource`'s last 16 bytes before
    /// `end` (a preallocated `.part` reads zeros where nothing was written,
    /// and generated bytes are random-looking).
    private func isWritten(_ path: String, _ resource: Resource, endingAt end: Int64) -> Bool {
        guard end >= 16 else { return end == 0 }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, 16, off_t(end - 16)) }
        return count == 16 && buffer == resource.bytes(in: (end - 16)..<end)
    }

    /// The bytes of `resource` the `.part` at `path` holds from `start` on:
    /// up to the first byte that differs (a preallocated `.part` reads zeros
    /// where nothing was written).
    private func writtenPrefix(_ path: String, _ resource: Resource, from start: Int64) -> Range<Int64> {
        guard let handle = FileHandle(forReadingAtPath: path) else { return start..<start }
        defer { try? handle.close() }
        return start..<(handle.firstDifference(from: resource, in: start..<resource.size) ?? resource.size)
    }
}
