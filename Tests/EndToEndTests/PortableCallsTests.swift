// The store's portable ways, run on Linux (issue 38, item 7): with the
// calls only Linux has switched off (`SystemCalls.portable`: no unnamed
// files, no renameat2, no syncfs, no sync_file_range, no posix_fallocate,
// no extended attributes), a download, a resume after a stop and a list of
// small files committed as a batch give the server's bytes, through the
// portable calls that stand in (link then unlink, fdatasync per file,
// ftruncate); a rerun over a finished file, which has no record to be proved
// by, asks for a checksum.
import Foundation
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class PortableCallsTests: EndToEndTestCase {
    /// Counts of the portable calls that stand in for Linux's, and of any Linux-only call that got through.
    private final class Counts: Sendable {
        let links = Atomic<Int>(0)
        let dataSyncs = Atomic<Int>(0)
        let truncates = Atomic<Int>(0)
    }

    private func portableCalls(counting counts: Counts) -> SystemCalls {
        var calls = SystemCalls.portable
        let (link, fdatasync, ftruncate) = (calls.link, calls.fdatasync, calls.ftruncate)
        calls.link = {
            counts.links.add(1, ordering: .relaxed)
            return link($0, $1)
        }
        calls.fdatasync = {
            counts.dataSyncs.add(1, ordering: .relaxed)
            return fdatasync($0)
        }
        calls.ftruncate = {
            counts.truncates.add(1, ordering: .relaxed)
            return ftruncate($0, $1)
        }
        return calls
    }

    func testADownloadStoppedAndResumedOnThePortableCalls() async throws {
        let resource = Resource.generated(size: 6 << 20, seed: 3900)
        server.setResource(resource, at: "big")
        server.setRatePerConnection(2 << 20)
        let counts = Counts()
        var options = DownloadOptions()
        options.connections = 4
        options.minimumSplit = 256 << 10
        options.systemCalls = portableCalls(counting: counts)
        let first = Download(url: server.url("big"), destination: .file(path("big")), options: options)
        first.start()
        XCTAssertTrue(wait(timeout: 10) { server.statistics.bodyBytesSent > 1 << 20 }, "the download is under way")
        first.stop()
        do {
            _ = try await first.run()
            XCTFail("a stopped download ends interrupted")
        } catch {
            XCTAssertEqual(error, .interrupted(keptResumeState: true))
        }
        server.setRatePerConnection(nil)
        let result = try await Download(url: server.url("big"), destination: .file(path("big")), options: options).run()
        XCTAssertGreaterThan(result.bytesReused, 0, "the second download went on from the first one's bytes")
        assertSameBytes(path("big"), resource)
        XCTAssertGreaterThan(
            counts.truncates.load(ordering: .relaxed), 0, "ftruncate sized the file (no posix_fallocate)")
        XCTAssertGreaterThan(
            counts.links.load(ordering: .relaxed), 0, "a link and an unlink put it in place (no renameat2)")
        XCTAssertGreaterThan(counts.dataSyncs.load(ordering: .relaxed), 0)

        // Without extended attributes there is no record of the save, so a
        // rerun does not call the file complete on its size: it refuses and
        // leaves the file alone, and a checksum is what proves it.
        do {
            _ = try await Download(url: server.url("big"), destination: .file(path("big")), options: options).run()
            XCTFail("a file with no record is not called complete")
        } catch {
            guard case let .usage(message, _) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("not shown to be the server's file"), message)
        }
        assertSameBytes(path("big"), resource)
        options.checksum = try XCTUnwrap(Checksum(algorithm: .sha256, hex: try sha256(of: resource)))
        let proved = try await Download(url: server.url("big"), destination: .file(path("big")), options: options).run()
        XCTAssertTrue(proved.alreadyComplete, "the checksum proves the file that is there")
    }

    func testAListOfSmallFilesCommitsOnThePortableCalls() async throws {
        let resources = (0..<12).map { Resource.generated(size: Int64(8 + $0) << 10, seed: 3910 + UInt64($0)) }
        for (index, resource) in resources.enumerated() { server.setResource(resource, at: "s\(index).bin") }
        let counts = Counts()
        var options = DownloadOptions()
        options.systemCalls = portableCalls(counting: counts)
        let entries = resources.indices.map { DownloadList.Entry(urls: [server.url("s\($0).bin")]) }
        let summary = await DownloadSession(configuration: .init(connections: 4)).list(
            entries, into: path("out"),
            options: options
        ).run()
        XCTAssertEqual(summary.complete, 12)
        XCTAssertEqual(summary.failed, [])
        for (index, resource) in resources.enumerated() { assertSameBytes(path("out/s\(index).bin"), resource) }
        XCTAssertGreaterThanOrEqual(counts.dataSyncs.load(ordering: .relaxed), 12, "each file fdatasynced (no syncfs)")
        XCTAssertGreaterThanOrEqual(
            counts.links.load(ordering: .relaxed), 12, "each linked to its name (no unnamed files)")
        let left = try FileManager.default.contentsOfDirectory(atPath: path("out")).sorted()
        XCTAssertEqual(left, resources.indices.map { "s\($0).bin" }.sorted(), "nothing else is left in the directory")
    }
}
