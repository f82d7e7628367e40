// Checkpointer.retract (issue 36 g): bytes that turn out not to count leave
// the manifest as soon as they are known, where a checkpoint listed them;
// a resume after a kill reads the manifest as it is then.
import Foundation
import Synchronization
import XCTest

@testable import RangeGet

final class CheckpointerTests: TemporaryDirectoryTestCase {
    /// A manifest this run saved with the bytes is saved again without them,
    /// before `retract` returns, without a sync of the data (listing fewer
    /// bytes never runs ahead of the disk); one that lists none of them (the
    /// manifest the run started from, or a range it never listed) is left alone.
    func testRetractedBytesLeaveASavedManifestAtOnce() throws {
        let files = PartialFiles(output: directory + "/f")
        XCTAssertTrue(FileManager.default.createFile(atPath: files.data, contents: Data(count: 100)))
        let remote = RemoteFile(
            url: "http://h/f", effectiveURL: "http://h/f", size: 100, etag: "\"e\"",
            lastModified: nil, acceptsRanges: true, contentDisposition: nil)
        var manifest = Manifest(remote: remote, size: 100)
        manifest.done = RangeSet([ByteRange(0, 10)])
        try manifest.save(to: files.manifest)
        let counts = Mutex((dataSyncs: 0, fileSyncs: 0))
        var calls = SystemCalls.live
        calls.fdatasync = { descriptor in
            counts.withLock { $0.dataSyncs += 1 }
            return SystemCalls.live.fdatasync(descriptor)
        }
        calls.fsync = { descriptor in
            counts.withLock { $0.fileSyncs += 1 }
            return SystemCalls.live.fsync(descriptor)
        }
        let data = try OutputFile(existing: files.data, calls: calls)
        let checkpointer = Checkpointer(file: data, manifest: manifest, manifestPath: files.manifest, calls: calls)
        func listed() throws -> RangeSet? { try Manifest.load(from: files.manifest)?.done }

        checkpointer.retract(ByteRange(40, 60))
        XCTAssertEqual(try listed(), RangeSet([ByteRange(0, 10)]))
        XCTAssertEqual(counts.withLock { $0.fileSyncs }, 0, "a manifest that lists none of them was saved again")

        try checkpointer.saveNow(RangeSet([ByteRange(0, 60)]))
        let before = counts.withLock { $0 }
        checkpointer.retract(ByteRange(40, 60))
        XCTAssertEqual(try listed(), RangeSet([ByteRange(0, 40)]))
        let after = counts.withLock { $0 }
        XCTAssertEqual(after.dataSyncs, before.dataSyncs, "the data was synced for a manifest that lists less")
        XCTAssertGreaterThan(after.fileSyncs, before.fileSyncs, "the manifest without them is not durable")

        checkpointer.retract(ByteRange(70, 80))
        XCTAssertEqual(
            counts.withLock { $0.fileSyncs }, after.fileSyncs, "a manifest that lists none of them was saved again")
        XCTAssertNil(checkpointer.failure)
    }
}
