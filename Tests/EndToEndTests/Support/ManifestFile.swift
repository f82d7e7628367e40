// A download's manifest (`X.part.json`) read and written from the outside:
// what a resumed run would trust, and whether the data file holds it.
import Foundation
import RangeGet
import RangeServer
import XCTest

/// A manifest on disk, read as the tests need it.
enum ManifestFile {
    /// The ranges the manifest at `path` lists as done (durable), [] when it
    /// is absent or unreadable.
    static func done(_ path: String) -> [Range<Int64>] {
        guard let data = FileManager.default.contents(atPath: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let list = object["done"] as? [[Int64]]
        else { return [] }
        return list.compactMap { $0.count == 2 && $0[0] <= $0[1] ? $0[0]..<$0[1] : nil }
    }

    /// The bytes the manifest at `path` lists as done, 0 when it is absent or unreadable.
    static func doneBytes(_ path: String) -> Int64 { done(path).reduce(0) { $0 + Int64($1.count) } }

    /// The write journal beside the manifest at `path` (`X.part.journal` for `X.part.json`).
    static func journalPath(_ path: String) -> String { String(path.dropLast(".json".count)) + ".journal" }

    /// The ranges a run in this boot would trust beyond the durable ones
    /// (the write journal's, through `Manifest.load`), [] when there are none.
    static func journalWritten(_ path: String) -> [Range<Int64>] {
        guard let trusted = try? Manifest.load(from: path) else { return [] }
        var extra = trusted.done
        for range in done(path) { extra.remove(ByteRange(range)) }
        return extra.ranges.map(Range.init)
    }

    /// What a resumed run would trust: `Manifest.load`'s done bytes (durable
    /// ones, plus those written in this boot). Nil when there is no manifest;
    /// throws when it is damaged.
    static func trusted(_ path: String) throws -> [Range<Int64>]? {
        guard let manifest = try Manifest.load(from: path) else { return nil }
        return manifest.done.ranges.map(Range.init)
    }

    /// Writes a version-1 manifest by hand (for damaged and large-offset cases).
    static func write(
        _ path: String, url: String, size: Int64, etag: String?, lastModified: String?,
        done: [Range<Int64>], version: Int = 1
    ) throws {
        var object: [String: Any] = [
            "version": version, "url": url, "size": size,
            "done": done.map { [$0.lowerBound, $0.upperBound] }
        ]
        if let etag { object["etag"] = etag }
        if let lastModified { object["lastModified"] = lastModified }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// The Last-Modified RangeServer sends for generated resources.
let defaultLastModifiedHeader = "Mon, 01 Jan 2024 00:00:00 GMT"

extension EndToEndTestCase {
    /// Every byte the manifest lists as done was made durable by an fdatasync
    /// that did not follow a failed one for the same bytes, and no byte that
    /// waited on a failed fdatasync is listed as written (trusted in this boot).
    func assertManifestWithinDurable(
        _ manifestPath: String, _ probe: DiskProbe,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let snapshot = probe.snapshot
        for range in ManifestFile.done(manifestPath) {
            XCTAssertTrue(
                snapshot.durable.contains(ByteRange(range)),
                "manifest lists \(range) as done but only \(snapshot.durable) was made durable "
                    + "(failed syncs: \(snapshot.failedSyncs))", file: file, line: line)
        }
        for range in ManifestFile.journalWritten(manifestPath) {
            for lost in snapshot.pendingAtFailedSync.ranges
            where lost.start < range.upperBound && range.lowerBound < lost.end {
                XCTFail(
                    "manifest lists \(range) as written, but \(lost) waited on a failed fdatasync", file: file,
                    line: line)
            }
        }
    }

    /// Every range the manifest makes a resumed run trust (durable, and written in
    /// this boot) holds the resource's bytes in the data file ("the manifest
    /// never runs ahead of the disk"). Fails when the manifest is missing, or
    /// lists nothing unless `mayBeEmpty` (a run whose every sync failed).
    /// Returns the bytes listed.
    @discardableResult
    func assertManifestMatchesDisk(
        _ manifestPath: String, data dataPath: String, _ resource: Resource,
        mayBeEmpty: Bool = false,
        file: StaticString = #filePath, line: UInt = #line
    ) -> Int64 {
        let ranges: [Range<Int64>]
        do {
            guard let trusted = try ManifestFile.trusted(manifestPath) else {
                XCTFail("no manifest at \(manifestPath)", file: file, line: line)
                return 0
            }
            ranges = trusted
        } catch {
            XCTFail("the manifest cannot be loaded: \(error)", file: file, line: line)
            return 0
        }
        guard !ranges.isEmpty else {
            if !mayBeEmpty { XCTFail("the manifest lists no byte: nothing would be reused", file: file, line: line) }
            return 0
        }
        guard let handle = FileHandle(forReadingAtPath: dataPath) else {
            XCTFail("\(dataPath) is missing but its manifest lists \(ranges)", file: file, line: line)
            return 0
        }
        defer { try? handle.close() }
        var listed: Int64 = 0
        for range in ranges {
            XCTAssertLessThanOrEqual(
                range.upperBound, resource.size, "manifest range \(range) past the end", file: file, line: line)
            listed += Int64(range.count)
            if let offset = handle.firstDifference(from: resource, in: range.clamped(to: 0..<resource.size)) {
                XCTFail(
                    "manifest lists \(range) but the data file differs from byte \(offset) on", file: file, line: line)
                return listed
            }
        }
        return listed
    }

    /// Bytes the manifest at `path` claims: durable ("done") and those a run in
    /// this boot would also trust (in the write journal beside it); 0 if unreadable.
    func claimedBytes(_ manifestPath: String) -> Int64 {
        let claimed = ManifestFile.done(manifestPath) + ManifestFile.journalWritten(manifestPath)
        return RangeSet(claimed.map(ByteRange.init)).byteCount
    }
}
