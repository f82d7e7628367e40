// RELIABILITY.md cases 20-24: local faults. A full or failing disk (through
// the `DownloadOptions.systemCalls` seam in-process, and for real with
// RLIMIT_FSIZE), damaged manifests, two runs on one output, offsets around
// 2^31 and 2^32 in a file above 4 GiB, and bad command lines.
// One file above 350 lines: cases 20-24 are one group of a few tests each.
import Foundation
import Glibc
import RangeGet
import RangeServer
import XCTest

final class ReliabilityLocalFaultTests: EndToEndTestCase {
    // MARK: 20. Disk full, EFBIG, EIO on write or fsync (through the seam)

    /// pwrite fails (ENOSPC, EIO, EFBIG) part-way: `DownloadError.io` with that
    /// errno, the manifest still matches the disk, and the same download resumes.
    func test20WriteFailureStopsWithIOErrorAndTheManifestMatchesTheDisk() throws {
        let size: Int64 = 8 << 20
        for (index, code) in [ENOSPC, EIO, EFBIG].enumerated() {
            let resource = Resource.generated(size: size, seed: 200 + UInt64(index))
            let name = "f\(index)"
            server.setResource(resource, at: name)
            server.setRatePerConnection(4 << 20)
            let output = path(name)
            let probe = DiskProbe(
                resource: resource,
                pwriteFault: { _, _, writtenBefore in
                    writtenBefore >= 5 << 20 ? code : nil
                })
            let failed = runLibrary([server.url(name)], to: output, probe: probe) { options in
                options.connections = 4
                options.minimumSplit = 512 << 10
            }
            guard case let .io(error)? = failed.error else {
                XCTFail("errno \(code): expected DownloadError.io, got \(String(describing: failed.error))")
                continue
            }
            XCTAssertEqual(error.code, code, "\(error)")
            XCTAssertEqual(probe.snapshot.wrongWrites, [])
            XCTAssertFalse(FileManager.default.fileExists(atPath: output), "no final file")
            assertManifestMatchesDisk(output + ".part.json", data: output + ".part", resource)
            assertManifestWithinDurable(output + ".part.json", probe)
            // Durable, not only in this boot's journal: the final checkpoint recorded them.
            XCTAssertFalse(ManifestFile.done(output + ".part.json").isEmpty, "errno \(code): nothing durable was saved")
            let saved = (try? ManifestFile.trusted(output + ".part.json")) ?? nil ?? []

            server.setRatePerConnection(nil)
            server.resetStatistics()
            let resumed = runLibrary([server.url(name)], to: output) { $0.connections = 4 }
            XCTAssertNil(resumed.error)
            assertSameBytes(output, resource)
            assertNotAskedAgain(saved, in: server.requestedRanges.filter { $0 != 0..<1 }, saved: "in the manifest")
        }
    }

    /// One fdatasync fails with EIO (later ones would succeed, as Linux reports a
    /// writeback error once): the download stops with an I/O error and no byte
    /// that was waiting on the failed sync is ever recorded as done.
    func test20FailedFdatasyncNeverMarksBytesDone() throws {
        let size: Int64 = 16 << 20
        let resource = Resource.generated(size: size, seed: 210)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let probe = DiskProbe(resource: resource, fdatasyncFault: { call in call == 1 ? EIO : nil })
        let run = runLibrary([server.url("f")], to: output, probe: probe) { options in
            options.connections = 4
            options.minimumSplit = 512 << 10
            options.checkpointInterval = 0.3
        }
        guard case let .io(error)? = run.error else {
            return XCTFail("expected DownloadError.io, got \(String(describing: run.error))")
        }
        XCTAssertEqual(error.code, EIO)
        XCTAssertEqual(probe.snapshot.failedSyncs, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output))
        assertManifestMatchesDisk(output + ".part.json", data: output + ".part", resource, mayBeEmpty: true)
        assertManifestWithinDurable(output + ".part.json", probe)
    }

    /// Every fdatasync fails (ENOSPC): exit with the I/O error; nothing is ever recorded as done.
    func test20FdatasyncThatAlwaysFailsRecordsNothing() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 211)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(2 << 20)
        let output = path("f")
        let probe = DiskProbe(resource: resource, fdatasyncFault: { _ in ENOSPC })
        let run = runLibrary([server.url("f")], to: output, probe: probe) {
            $0.connections = 4
            $0.checkpointInterval = 0.3
        }
        guard case let .io(error)? = run.error else {
            return XCTFail("expected DownloadError.io, got \(String(describing: run.error))")
        }
        XCTAssertEqual(error.code, ENOSPC)
        XCTAssertEqual(claimedBytes(output + ".part.json"), 0, "a failed fdatasync marked bytes done")
        XCTAssertFalse(FileManager.default.fileExists(atPath: output))
    }

    /// The manifest's own fsync fails (EIO) at a checkpoint: I/O error; the
    /// manifest on disk is an older, valid one that still matches the data.
    func test20ManifestFsyncFailureKeepsTheOldManifest() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 212)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        // fsync 0 and 1: the first manifest (file, directory); 2 and 3: the first checkpoint.
        let probe = DiskProbe(resource: resource, fsyncFault: { call in call >= 4 ? EIO : nil })
        let run = runLibrary([server.url("f")], to: output, probe: probe) {
            $0.connections = 4
            $0.checkpointInterval = 0.3
        }
        guard case let .io(error)? = run.error else {
            return XCTFail("expected DownloadError.io, got \(String(describing: run.error))")
        }
        XCTAssertEqual(error.code, EIO)
        XCTAssertNotNil(try Manifest.load(from: output + ".part.json"), "the old manifest is intact")
        assertManifestMatchesDisk(output + ".part.json", data: output + ".part", resource)
        assertManifestWithinDurable(output + ".part.json", probe)
    }

    // MARK: 20. For real: RLIMIT_FSIZE (EFBIG), through the binary

    /// `ulimit -f` below the file size: preallocation (or the first write past
    /// the limit) fails with EFBIG. rangeget must ignore SIGXFSZ, exit 4 and say why.
    func test20FileSizeLimitOnAFreshDownloadExitsFourWithAClearMessage() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 213)
        server.setResource(resource, at: "f")
        let output = path("f")
        let run = try runWithFileSizeLimit(blocks: 2048, ["-q", "-n", "4", "-o", output, server.url("f")])
        XCTAssertEqual(
            run.status, 4,
            "exit \(run.status) (\(run.status > 128 ? "killed by signal \(run.status - 128)" : "")): \(run.stderr)")
        XCTAssertTrue(run.stderr.contains("File too large"), run.stderr)
        XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: output))
    }

    /// A resumed download (no preallocation) whose writes hit RLIMIT_FSIZE:
    /// exit 4, the manifest still matches the disk, and without the limit it finishes.
    func test20FileSizeLimitDuringWritesExitsFourAndTheManifestMatchesTheDisk() throws {
        let size: Int64 = 16 << 20
        let resource = Resource.generated(size: size, seed: 214)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let stopped = try interrupted(["-q", "-n", "1", "-o", output, server.url("f")]) {
            claimedBytes(output + ".part.json") > 0
        }
        XCTAssertEqual(stopped.status, 130)
        server.setRatePerConnection(nil)

        // 8 MiB: the part beyond it cannot be written.
        let limited = try runWithFileSizeLimit(blocks: 16384, ["-q", "-n", "4", "-o", output, server.url("f")])
        XCTAssertEqual(limited.status, 4, "exit \(limited.status): \(limited.stderr)")
        XCTAssertTrue(limited.stderr.contains("File too large"), limited.stderr)
        assertManifestMatchesDisk(output + ".part.json", data: output + ".part", resource)
        XCTAssertFalse(ManifestFile.done(output + ".part.json").isEmpty, "the final checkpoint saved what was written")

        let run = try CLI.run(["-q", "-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
    }

    // MARK: 21. Damaged manifests

    /// Each damaged manifest: exit 4, one line naming the problem and --restart,
    /// the data file untouched; then --restart starts over and gets the right file.
    func test21DamagedManifestsAreReportedAndRestartRecovers() throws {
        let size: Int64 = 1 << 20
        let resource = Resource.generated(size: size, seed: 215)
        server.setResource(resource, at: "f")
        let url = server.url("f")
        let etag = resource.etag!
        let good: [String: Any] = [
            "version": 1, "url": url, "size": size, "etag": etag,
            "lastModified": defaultLastModifiedHeader, "done": [[0, 4096]]
        ]
        func json(_ changes: [String: Any]) -> Data {
            var object = good
            for (key, value) in changes { object[key] = value }
            return try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        }
        let valid = json([:])
        var garbage = SplitMix64(seed: 21)
        let cases: [(name: String, data: Data, problem: String)] = [
            ("empty", Data(), "empty"),
            ("zero-filled", Data(repeating: 0, count: 4096), "zero"),
            ("truncated", valid.prefix(valid.count / 2), "not a valid manifest"),
            ("invalid JSON", Data("{\"version\":1,,}".utf8), "not a valid manifest"),
            (
                "random bytes", Data((0..<512).map { _ in UInt8.random(in: 0...255, using: &garbage) }),
                "not a valid manifest"
            ),
            ("JSON null", Data("null".utf8), "not a valid manifest"),
            // Another URL may resume it only by proving it serves the same file (issue 14).
            (
                "another URL and ETag", json(["url": "http://127.0.0.1:1/other", "etag": "\"other\""]),
                "was started from"
            ),
            ("newer version", json(["version": 2]), "format version 2"),
            ("bytes past the end", json(["done": [[0, size + 1]]]), "beyond"),
            ("inverted range", json(["done": [[10, 5]]]), "not a valid manifest"),
            ("negative offset", json(["done": [[-5, 5]]]), "not a valid manifest"),
            ("wrong types", json(["size": "big"]), "not a valid manifest")
        ]
        let output = path("f")
        for item in cases {
            _ = FileManager.default.createFile(atPath: output + ".part", contents: Data(repeating: 7, count: 4096))
            _ = FileManager.default.createFile(atPath: output + ".part.json", contents: item.data)
            let run = try CLI.run(["-q", "-n", "4", "-o", output, url], in: directory)
            XCTAssertEqual(run.status, 4, "\(item.name): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "\(item.name): one line: \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(item.problem), "\(item.name): names the problem: \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("--restart"), "\(item.name): says how to recover: \(run.stderr)")
            XCTAssertEqual(
                FileManager.default.contents(atPath: output + ".part"), Data(repeating: 7, count: 4096),
                "\(item.name): the data file is not touched")
            XCTAssertFalse(FileManager.default.fileExists(atPath: output))

            let restarted = try CLI.run(["-q", "--restart", "-n", "4", "-o", output, url], in: directory)
            XCTAssertEqual(restarted.status, 0, "\(item.name): \(restarted.stderr)")
            assertSameBytes(output, resource)
            XCTAssertEqual(directoryEntries(), ["f"], "\(item.name)")
            try FileManager.default.removeItem(atPath: output)
        }
    }

    /// A manifest with the right URL and validators but another size cannot
    /// describe this file: not trusted. It was reported as damage (exit 4,
    /// --restart); since the soak found a server whose one lying answer left
    /// such a manifest (seed 200033), the download starts over, saying why.
    func test21ManifestWithAnotherSizeStartsOver() throws {
        let size: Int64 = 1 << 20
        let resource = Resource.generated(size: size, seed: 216)
        server.setResource(resource, at: "f")
        let output = path("f")
        _ = FileManager.default.createFile(atPath: output + ".part", contents: Data(repeating: 7, count: 4096))
        try ManifestFile.write(
            output + ".part.json", url: server.url("f"), size: size / 2, etag: resource.etag,
            lastModified: defaultLastModifiedHeader, done: [0..<4096])
        let run = try CLI.run(["-n", "4", "-o", output, server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(
            run.stderr.contains("its size changed from \(size / 2) to \(size) bytes; starting over"), run.stderr)
        assertSameBytes(output, resource)
        XCTAssertFalse(
            run.stderr.contains("reused"), "the 4096 bytes the manifest listed were not trusted: \(run.stderr)")
    }

    // MARK: 22. Two runs on the same output

    func test22SecondRunOnTheSameOutputRefusesAndLeavesTheFirstAlone() throws {
        let size: Int64 = 16 << 20
        let resource = Resource.generated(size: size, seed: 217)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(1 << 20)
        let output = path("f")
        let first = try launch(["-q", "-n", "4", "-o", output, server.url("f")])
        XCTAssertTrue(wait(timeout: 20) { claimedBytes(output + ".part.json") > 0 })
        var before = stat()
        XCTAssertEqual(stat(output + ".part", &before), 0)
        for extra in [[], ["--restart"], ["--force"], ["--restart", "--force", "-n", "1"]] {
            let second = try CLI.run(["-q"] + extra + ["-o", output, server.url("f")], in: directory, timeout: 30)
            XCTAssertEqual(second.status, 5, "\(extra): \(second.stderr)")
            XCTAssertTrue(second.stderr.contains("another rangeget"), "\(extra): \(second.stderr)")
            XCTAssertEqual(second.stderr.split(separator: "\n").count, 1, "\(extra): \(second.stderr)")
            XCTAssertTrue(first.isRunning, "\(extra): the first run goes on")
            var after = stat()
            XCTAssertEqual(stat(output + ".part", &after), 0)
            XCTAssertEqual(after.st_ino, before.st_ino, "\(extra): the data file was not replaced")
            XCTAssertEqual(Int64(after.st_size), size, "\(extra): the data file was not truncated")
            XCTAssertGreaterThan(claimedBytes(output + ".part.json"), 0, "\(extra): the manifest was not removed")
        }
        server.setRatePerConnection(nil)
        let run = first.finish(timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        // A refused run sends nothing but a HEAD, and only with --restart:
        // without it the manifest stands in for the probe (a resume sends its
        // ranged requests with If-Range at once), and the lock refuses before
        // any of them. The first run probed with its first GET. (Bytes served
        // are not compared: when the throttle lifts, work stealing cuts pieces
        // whose socket buffers already hold megabytes, which the server counts as sent.)
        XCTAssertEqual(server.statistics.requests.filter { $0.method == "HEAD" }.count, 2)
    }

    // MARK: 23. Offsets around 2^31 and 2^32, a file above 4 GiB

    /// A 5 GiB file whose manifest marks all but windows at 2^31-1, 2^31,
    /// 2^32-1, 2^32 and the end as done (a sparse data file): exactly those
    /// bytes are requested, written at the right offsets, and the file is whole.
    func test23OffsetsAroundTwoAndFourGiBAreExact() throws {
        let size: Int64 = (5 << 30) + 13
        let resource = Resource.generated(size: size, seed: 218)
        server.setResource(resource, at: "big")
        let output = path("big")
        let missing: [Range<Int64>] = [
            ((1 << 31) - 1)..<((1 << 31) + 70_000),
            ((1 << 32) - 1)..<((1 << 32) + 70_000),
            (size - 70_000)..<size
        ]
        var done: [Range<Int64>] = []
        var cursor: Int64 = 0
        for range in missing {
            done.append(cursor..<range.lowerBound)
            cursor = range.upperBound
        }
        let descriptor = open(output + ".part", O_RDWR | O_CREAT, 0o644)
        XCTAssertGreaterThanOrEqual(descriptor, 0)
        XCTAssertEqual(ftruncate(descriptor, off_t(size)), 0)
        close(descriptor)
        try ManifestFile.write(
            output + ".part.json", url: server.url("big"), size: size, etag: resource.etag,
            lastModified: defaultLastModifiedHeader, done: done)
        let run = try CLI.run(["-q", "-n", "4", "-o", output, server.url("big")], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(fileSize(output), size)
        let handle = try XCTUnwrap(FileHandle(forReadingAtPath: output))
        defer { try? handle.close() }
        for range in missing {
            // The window plus a byte on each side of it that must still be the sparse zero.
            try handle.seek(toOffset: UInt64(range.lowerBound))
            let bytes = [UInt8](handle.readData(ofLength: range.count))
            XCTAssertEqual(bytes, resource.bytes(in: range), "bytes \(range)")
            try handle.seek(toOffset: UInt64(range.lowerBound - 1))
            XCTAssertEqual([UInt8](handle.readData(ofLength: 1)), [0], "nothing written before \(range)")
        }
        let requested = server.requestedRanges.filter { $0 != 0..<1 }
        XCTAssertEqual(Set(requested), Set(missing), "exactly the missing bytes were requested")
        XCTAssertEqual(server.statistics.bodyBytesSent, missing.reduce(0) { $0 + Int64($1.count) })
        XCTAssertTrue(server.statistics.requests.contains { $0.rangeHeader == "bytes=2147483647-2147553647" })
        XCTAssertTrue(server.statistics.requests.contains { $0.rangeHeader == "bytes=4294967295-4295037295" })
    }

    // MARK: 24. Bad user input

    func test24BadInputGetsOneLineExitTwoAndWritesNothing() throws {
        let url = server.url("f")
        server.setResource(Resource.generated(size: 1000, seed: 219), at: "f")
        _ = FileManager.default.createFile(atPath: path("plain-file"), contents: Data("x".utf8))
        try FileManager.default.createDirectory(atPath: path("a-directory"), withIntermediateDirectories: false)
        var cases: [[String]] = [
            ["-n", "0", url], ["-n", "-1", url], ["-n", "257", url], ["--connections=abc", url], ["-n", "", url],
            ["--retries", "-1", url], ["--retries", "x", url], ["--retry-wait", "0", url], ["--retry-wait", "-1", url],
            ["--stall-timeout", "nan", url], ["--connect-timeout", "inf", url], ["--connect-timeout", "0", url],
            ["--min-split", "0", url], ["--min-split", "1X", url], ["--min-split", "-1M", url],
            ["--max-per-host", "0", url], ["-H", "NoColon", url],
            ["--bogus", url], ["-Z", url], ["--quiet=yes", url], ["-n"], ["-o"],
            ["http://"], ["http:///path"], ["://x"], ["http//127.0.0.1/x"], ["127.0.0.1/x"], ["http://[::1"],
            ["file:///etc/passwd"], ["ftp://127.0.0.1/x"], ["javascript:alert(1)"], [""],
            ["-d", path("plain-file"), url], ["-d", path("plain-file/missing"), url],
            // (-o's missing directory is created since issue 37, as -d's: CommandLineMessagesTests.)
            ["-o", path("plain-file/out"), url], ["-o", path("a-directory"), url]
        ]
        // A read-only directory. Root passes permission checks, so as root the
        // child runs without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv):
        // the checks then apply to it too, and these cases run everywhere.
        let locked = path("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: false)
        chmod(locked, 0o555)
        let unprivileged: Set<[String]> = [["-d", locked, url], ["-o", locked + "/out", url]]
        cases += unprivileged
        let before = directoryEntries()
        for arguments in cases {
            server.resetStatistics()
            let run =
                unprivileged.contains(arguments)
                ? try CLI.runWithoutPermissionOverride(arguments, in: directory)
                : try CLI.run(arguments, in: directory)
            XCTAssertEqual(run.status, 2, "\(arguments): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "\(arguments): one line, got \(run.stderr)")
            XCTAssertTrue(run.stderr.hasPrefix("rangeget: "), "\(arguments): \(run.stderr)")
            XCTAssertEqual(run.stdout, "", "\(arguments)")
            XCTAssertEqual(directoryEntries(), before, "\(arguments): nothing written")
            XCTAssertEqual(
                server.statistics.requests.filter { $0.method == "GET" }.count, 0, "\(arguments): no download")
        }
    }
}
