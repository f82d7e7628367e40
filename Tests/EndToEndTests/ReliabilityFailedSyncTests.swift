// RELIABILITY.md case 20 (issue 36): an fdatasync that fails at the end of a
// download, where the data is made durable before it is published or kept
// as complete. Linux reports a writeback error once: a rerun's own
// fdatasync then returns 0 over pages the kernel may have dropped, so a
// failed sync must leave nothing a rerun trusts beyond the last durable
// save. The DiskProbe drops those pages (they read back as zeros): a rerun
// that trusted them would publish zeros.
import Foundation
import Glibc
import RangeGet
import RangeServer
import XCTest

final class ReliabilityFailedSyncTests: EndToEndTestCase {
    /// The commit's fdatasync fails (no checkpoint before it, so nothing is
    /// durable): the write journal goes with it, as a checkpoint's failure
    /// takes it, and the rerun fetches the whole file again rather than
    /// publishing the lost pages. The same for a commit handed off to a group.
    func test20AFailedSyncAtTheCommitMakesTheRerunFetchAgain() throws {
        let resource = serve(seed: 360)
        for group in [nil, SyncGroup()] {
            let output = path(group == nil ? "waited" : "handed-off")
            let probe = DiskProbe(
                resource: resource, fdatasyncFault: { $0 == 0 ? EIO : nil },
                losesPagesAtFailedSync: true)
            let failed = runLibrary(
                [server.url("f")], to: output, probe: probe, handingOffTo: group, configure: Self.fast)
            XCTAssertEqual(failed.error?.description, "cannot sync \(output).part: \(String(cString: strerror(EIO)))")
            XCTAssertEqual(probe.snapshot.failedSyncs, 1)
            XCTAssertFalse(FileManager.default.fileExists(atPath: output), "a final file after a failed sync")
            assertManifestWithinDurable(output + ".part.json", probe)
            assertRerunFetchesEverything(output, resource)
        }
    }

    /// A download kept as complete without being published (a checksum that
    /// does not match; a checksum list with no entry for it) is made durable
    /// before its manifest lists it as done. When that fdatasync fails, the
    /// manifest stays as it was and the journal goes: the rerun, with the
    /// right checksum, fetches the file again rather than verifying and
    /// publishing the lost pages.
    func test20AFailedSyncOfADownloadKeptAsCompleteMakesTheRerunFetchAgain() throws {
        let resource = serve(seed: 361)
        let right = try XCTUnwrap(Checksum(algorithm: .sha256, hex: try sha256(of: resource)))
        let wrong = try XCTUnwrap(Checksum(algorithm: .sha256, hex: String(repeating: "0", count: 64)))
        let cases: [(name: String, unverified: (inout DownloadOptions) -> Void)] = [
            ("mismatch", { $0.checksum = wrong }),
            ("unlisted", { $0.checksumList = ["other": right] })
        ]
        for (name, unverified) in cases {
            let output = path(name)
            let probe = DiskProbe(
                resource: resource, fdatasyncFault: { $0 == 0 ? EIO : nil },
                losesPagesAtFailedSync: true)
            let failed = runLibrary([server.url("f")], to: output, probe: probe) { options in
                Self.fast(&options)
                unverified(&options)
            }
            XCTAssertEqual(
                failed.error?.description, "cannot sync \(output).part: \(String(cString: strerror(EIO)))",
                name)
            XCTAssertEqual(probe.snapshot.failedSyncs, 1, name)
            assertManifestWithinDurable(output + ".part.json", probe)
            assertRerunFetchesEverything(output, resource, checksum: right)
        }
    }

    /// Serves a 2 MiB file at "f".
    private func serve(seed: UInt64) -> Resource {
        let resource = Resource.generated(size: 2 << 20, seed: seed)
        server.setResource(resource, at: "f")
        return resource
    }

    /// Four connections, and no checkpoint before the end.
    private static func fast(_ options: inout DownloadOptions) {
        options.connections = 4
        options.minimumSplit = 256 << 10
        options.checkpointInterval = 1000
    }

    /// A rerun without faults finishes with the right bytes, every one fetched again.
    private func assertRerunFetchesEverything(
        _ output: String, _ resource: Resource, checksum: Checksum? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let rerun = runLibrary([server.url("f")], to: output) { options in
            options.connections = 4
            options.checksum = checksum
        }
        guard case let .success(result) = rerun.result else {
            return XCTFail("the rerun: \(String(describing: rerun.error))", file: file, line: line)
        }
        XCTAssertEqual(result.bytesReused, 0, "the rerun trusted bytes that were never durable", file: file, line: line)
        XCTAssertEqual(result.bytesFetched, resource.size, file: file, line: line)
        assertSameBytes(output, resource, file: file, line: line)
    }
}
