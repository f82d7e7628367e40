// Metalink on the command line (issue 40): `rangeget FILE.meta4` and
// `--metalink URL` take the mirrors, size, hash and piece hashes of the
// document; a mirror serving another file or a flipped byte costs pieces,
// not the file; several files go as a list, a bad entry costing only itself;
// hostile documents are refused with one line and exit 2, writing nothing;
// `rangeget verify` checks a file and `--repair` fetches its bad pieces.
import Digests
import Foundation
import Glibc
import RangeServer
import XCTest

final class MetalinkEndToEndTests: EndToEndTestCase {
    private let size: Int64 = 6 << 20
    private let pieceLength = 256 << 10
    private lazy var good = Resource.generated(size: size, seed: 4141)

    private func sha256(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.withUnsafeBytes { DigestAlgorithm.sha256.hex(of: $0) }
    }

    /// A Metalink 4 `<file>` for `resource` named `name` at `urls`, with its pieces.
    private func fileElement(_ name: String, _ resource: Resource, urls: [String]) -> String {
        let bytes = resource.bytes(in: 0..<resource.size)[...]
        let pieces = stride(from: 0, to: bytes.count, by: pieceLength).map {
            "<hash>\(sha256(bytes[$0..<min($0 + pieceLength, bytes.count)]))</hash>"
        }
        let mirrors = urls.enumerated().map { "<url priority=\"\($0.offset + 1)\">\($0.element)</url>" }
        return """
            <file name="\(name)"><size>\(resource.size)</size><hash type="sha-256">\(sha256(bytes))</hash>
            <pieces length="\(pieceLength)" type="sha-256">\(pieces.joined())</pieces>
            \(mirrors.joined(separator: "\n"))</file>
            """
    }

    /// Writes a Metalink 4 of `files` to `name` in the test directory; its path.
    private func metalink(_ files: [String], named name: String = "f.meta4") throws -> String {
        let document = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
            \(files.joined(separator: "\n"))
            </metalink>
            """
        try document.write(toFile: path(name), atomically: true, encoding: .utf8)
        return path(name)
    }

    private func sameValidators(_ resource: Resource) -> Resource {
        var resource = resource
        resource.etag = "\"same\""
        resource.lastModified = Resource.defaultLastModified
        return resource
    }

    func testThreeMirrorsOneAnotherFileOneAFlippedByteGiveTheRightFile() throws {
        let different = try anotherServer()
        let flipping = try anotherServer()
        server.setResource(sameValidators(good), at: "f")
        different.setResource(sameValidators(.generated(size: size, seed: 77)), at: "f")
        var bytes = good.bytes(in: 0..<size)
        bytes[Int(3 << 20) + 5] ^= 0x01
        flipping.setResource(sameValidators(.data(bytes)), at: "f")
        for mirror in [server!, different, flipping] { mirror.setRatePerConnection(6 << 20) }
        let document = try metalink([
            fileElement("out.bin", good, urls: [flipping.url("f"), different.url("f"), server.url("f")])
        ])
        let run = try CLI.run(["--json", "-n", "6", "--min-split", "256K", document], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("out.bin"), good)
        let object = try run.jsonObject()
        let mirrors = try XCTUnwrap(object["mirrors"] as? [[String: Any]])
        let byURL = Dictionary(uniqueKeysWithValues: mirrors.map { ($0["url"] as! String, $0) })
        XCTAssertNotNil(byURL[different.url("f")]?["dropped"] as? String, "\(mirrors)")
        XCTAssertEqual(byURL[server.url("f")]?["badPieces"] as? [Int], [])
        let fetched = try XCTUnwrap(object["bytesFetched"] as? Int)
        XCTAssertLessThanOrEqual(fetched, Int(size) + 8 * pieceLength, "at most 8 pieces fetched again")
    }

    func testAMetalinkURLIsFetchedAndItsFileDownloaded() throws {
        server.setResource(good, at: "f")
        let document = try metalink([fileElement("g.bin", good, urls: [server.url("f")])])
        server.setResource(.data(Array(try Data(contentsOf: URL(fileURLWithPath: document)))), at: "g.meta4")
        let run = try CLI.run(["-q", "-d", path("d"), server.url("g.meta4")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(path("d/g.bin"), good)
    }

    func testSeveralFilesGoAsAListAndABadEntryCostsOnlyItself() throws {
        let small = Resource.generated(size: 300_000, seed: 5)
        server.setResource(good, at: "a")
        server.setResource(small, at: "b")
        let document = try metalink([
            fileElement("a.bin", good, urls: [server.url("a")]),
            fileElement("b.bin", small, urls: [server.url("b")]),
            fileElement("../escape.bin", small, urls: [server.url("b")]),
            fileElement("c.bin", small, urls: ["file:///etc/passwd", "javascript:alert(1)"])
        ])
        let run = try CLI.run(["-q", "-d", path("d"), "--metalink", document], in: directory)
        XCTAssertNotEqual(run.status, 0)
        assertSameBytes(path("d/a.bin"), good)
        assertSameBytes(path("d/b.bin"), small)
        XCTAssertTrue(run.stderr.contains("../escape.bin"), run.stderr)
        XCTAssertTrue(run.stderr.contains("no http or https URL"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("escape.bin")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("d/c.bin")))
    }

    func testAListLineNamingAMetalinkStandsForItsFiles() throws {
        let small = Resource.generated(size: 300_000, seed: 6)
        server.setResource(good, at: "a")
        server.setResource(small, at: "plain")
        let document = try metalink([fileElement("from-meta.bin", good, urls: [server.url("a")])])
        server.setResource(.data(Array(try Data(contentsOf: URL(fileURLWithPath: document)))), at: "m.meta4")
        try "\(server.url("plain"))\n\(server.url("m.meta4"))\n\(server.url("missing.meta4"))\n"
            .write(toFile: path("list"), atomically: true, encoding: .utf8)
        let run = try CLI.run(["-q", "-d", path("d"), "-i", path("list")], in: directory)
        XCTAssertNotEqual(run.status, 0)
        assertSameBytes(path("d/plain"), small)
        assertSameBytes(path("d/from-meta.bin"), good)
        XCTAssertTrue(run.stderr.contains("input line 3"), run.stderr)
    }

    func testAMetalinkTheServerPointsToChecksEveryPiece() throws {
        // The server serves a flipped byte in piece 2, and points to a Metalink of the right file.
        var bytes = good.bytes(in: 0..<size)
        bytes[2 * pieceLength + 9] ^= 0x40
        server.setResource(.data(bytes), at: "f")
        let document = try metalink([fileElement("f", good, urls: [server.url("f")])])
        server.setResource(.data(Array(try Data(contentsOf: URL(fileURLWithPath: document)))), at: "f.meta4")
        server.setFaults([
            FaultRule(
                .header(
                    name: "Link",
                    value: "<\(server.url("f.meta4"))>; rel=describedby; type=\"application/metalink4+xml\""))
        ])
        let bad = try CLI.run(["--retries", "1", "-o", path("bad"), server.url("f")], in: directory)
        XCTAssertEqual(bad.status, 3, bad.stderr)
        XCTAssertTrue(bad.stderr.contains("checking its 24 pieces from the Metalink"), bad.stderr)
        XCTAssertTrue(bad.stderr.contains("piece 2"), bad.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("bad")))

        server.setResource(good, at: "f")
        let right = try CLI.run(["-o", path("right"), server.url("f")], in: directory)
        XCTAssertEqual(right.status, 0, right.stderr)
        assertSameBytes(path("right"), good)

        let ignored = try CLI.run(["-q", "--no-discovery", "-o", path("ignored"), server.url("f")], in: directory)
        XCTAssertEqual(ignored.status, 0, ignored.stderr)
        XCTAssertEqual(server.statistics.requests(to: "f.meta4").count, 2, "fetched by the first two runs only")
    }

    func testASmallFileTheOpeningBroughtWholeIsCheckedByTheDescribedPieces() throws {
        let small = Resource.generated(size: 100_000, seed: 8)
        var bytes = small.bytes(in: 0..<small.size)
        bytes[500] ^= 0x01
        server.setResource(.data(bytes), at: "s")
        let document = try metalink([fileElement("s", small, urls: [server.url("s")])])
        server.setResource(.data(Array(try Data(contentsOf: URL(fileURLWithPath: document)))), at: "s.meta4")
        server.setFaults([
            FaultRule(
                .header(
                    name: "Link", value: "<\(server.url("s.meta4"))>; rel=describedby; type=application/metalink4+xml"))
        ])
        let run = try CLI.run(["-o", path("s"), server.url("s")], in: directory)
        XCTAssertEqual(run.status, 3, run.stderr)
        XCTAssertTrue(run.stderr.contains("the whole file came in one response"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("s")))
    }

    func testHostileDocumentsAreRefusedWithOneLineAndNothingWritten() throws {
        let secret = path("secret")
        try "TOP-SECRET-42".write(toFile: secret, atomically: true, encoding: .utf8)
        let documents = [
            "laughs.meta4": """
            <?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">
            <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;">]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="x"><url>http://127.0.0.1:1/&lol3;</url></file></metalink>
            """,
            "xxe.meta4": """
            <?xml version="1.0"?><!DOCTYPE m [<!ENTITY s SYSTEM "file://\(secret)">]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="&s;"><url>http://127.0.0.1:1/x</url></file></metalink>
            """,
            "broken.meta4": "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"x\">",
            "other.meta4": "<?xml version=\"1.0\"?><html><body/></html>"
        ]
        for (name, text) in documents {
            try text.write(toFile: path(name), atomically: true, encoding: .utf8)
            let run = try CLI.run(["-d", path("d-\(name)"), path(name)], in: directory)
            XCTAssertEqual(run.status, 2, "\(name): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, "\(name): one line: \(run.stderr)")
            XCTAssertTrue(run.stderr.contains("cannot read Metalink"), run.stderr)
            XCTAssertFalse(run.stderr.contains("TOP-SECRET"), run.stderr)
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("d-\(name)/x")))
        }
    }

    func testASizeTheServerDisagreesWithFailsBeforeAnyByte() throws {
        server.setResource(.generated(size: size + 1, seed: 4141), at: "f")
        let document = try metalink([fileElement("h.bin", good, urls: [server.url("f")])])
        let run = try CLI.run(["-q", document], in: directory)
        XCTAssertEqual(run.status, 1, run.stderr)
        XCTAssertTrue(run.stderr.contains("published as \(size) bytes"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("h.bin.part")))
    }

    func testVerifyFindsABadPieceAndRepairFetchesOnlyIt() throws {
        server.setResource(good, at: "f")
        let document = try metalink([fileElement("v.bin", good, urls: [server.url("f")])])
        XCTAssertEqual(try CLI.run(["-q", document], in: directory).status, 0)
        let intact = try CLI.run(["verify", "-M", document, path("v.bin")], in: directory)
        XCTAssertEqual(intact.status, 0, intact.stderr)
        XCTAssertTrue(intact.stdout.contains("24 pieces match"), intact.stdout)

        let descriptor = open(path("v.bin"), O_RDWR)
        var byte: UInt8 = 0xAA
        XCTAssertEqual(pwrite(descriptor, &byte, 1, off_t(5 * pieceLength + 17)), 1)
        close(descriptor)
        let bad = try CLI.run(["verify", "-M", document, path("v.bin")], in: directory)
        XCTAssertEqual(bad.status, 3, bad.stderr)
        XCTAssertTrue(bad.stdout.contains("1 of 24 pieces bad (5)"), bad.stdout)

        server.resetStatistics()
        let repaired = try CLI.run(["verify", "--repair", "--json", "-M", document, path("v.bin")], in: directory)
        XCTAssertEqual(repaired.status, 0, repaired.stderr)
        let report = try repaired.jsonObject()
        XCTAssertEqual(report["badPieces"] as? [Int], [5])
        XCTAssertEqual(report["bytesFetched"] as? Int, pieceLength)
        assertSameBytes(path("v.bin"), good)
        XCTAssertEqual(server.statistics.bodyBytesSent, Int64(pieceLength), "one piece, and nothing else")
        XCTAssertEqual(directoryEntries().filter { $0.hasPrefix("v.bin") }, ["v.bin"])

        let unhashed = try CLI.run(["verify", path("v.bin")], in: directory)
        XCTAssertEqual(unhashed.status, 2)
        XCTAssertTrue(unhashed.stderr.contains("no hashes to check it against"), unhashed.stderr)
    }

    /// A finished `v.bin` of `good` with one byte flipped in piece 5, and its Metalink.
    private func damagedFile() throws -> String {
        server.setResource(good, at: "f")
        let document = try metalink([fileElement("v.bin", good, urls: [server.url("f")])])
        XCTAssertEqual(try CLI.run(["-q", document], in: directory).status, 0)
        let descriptor = open(path("v.bin"), O_RDWR)
        var byte: UInt8 = 0xAA
        XCTAssertEqual(pwrite(descriptor, &byte, 1, off_t(5 * pieceLength + 17)), 1)
        close(descriptor)
        return document
    }

    private func identity(_ path: String) -> (inode: UInt, mode: UInt32) {
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0)
        return (UInt(info.st_ino), info.st_mode & 0o7777)
    }

    func testARepairFixesTheFileItselfNotACopy() throws {
        let document = try damagedFile()
        XCTAssertEqual(chmod(path("v.bin"), 0o640), 0)
        let before = identity(path("v.bin"))
        let repaired = try CLI.run(["verify", "--repair", "-q", "-M", document, path("v.bin")], in: directory)
        XCTAssertEqual(repaired.status, 0, repaired.stderr)
        assertSameBytes(path("v.bin"), good)
        let after = identity(path("v.bin"))
        XCTAssertEqual(after.inode, before.inode, "the same file, its good pieces never copied")
        XCTAssertEqual(after.mode, 0o640, "its mode kept")
        XCTAssertEqual(directoryEntries().filter { $0.hasPrefix("v.bin") }, ["v.bin"])
    }

    func testARepairThatCannotFetchPutsTheFileBackUnderItsName() throws {
        let document = try damagedFile()
        let damaged = try Data(contentsOf: URL(fileURLWithPath: path("v.bin")))
        // The only mirror now serves the piece with the same bad byte.
        server.setResource(.data([UInt8](damaged)), at: "f")
        let failed = try CLI.run(["verify", "--repair", "-q", "-M", document, path("v.bin")], in: directory)
        XCTAssertEqual(failed.status, 3, failed.stderr)
        XCTAssertTrue(failed.stderr.contains("piece 5"), failed.stderr)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path("v.bin"))), damaged, "as it was")
        XCTAssertEqual(directoryEntries().filter { $0.hasPrefix("v.bin") }, ["v.bin"], "no .part, no manifest")
        // Once the mirror is right again, the same command repairs it.
        server.setResource(good, at: "f")
        XCTAssertEqual(
            try CLI.run(["verify", "--repair", "-q", "-M", document, path("v.bin")], in: directory).status, 0)
        assertSameBytes(path("v.bin"), good)
    }

    func testAFileWithOtherHardLinksOrALinkIsNotRepairedBehindThem() throws {
        let document = try damagedFile()
        XCTAssertEqual(link(path("v.bin"), path("other-name")), 0)
        let refused = try CLI.run(["verify", "--repair", "-q", "-M", document, path("v.bin")], in: directory)
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("2 hard links"), refused.stderr)
        XCTAssertEqual(identity(path("v.bin")).inode, identity(path("other-name")).inode, "both names kept")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("v.bin.part")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("v.bin.part.json")))
        // A symbolic link: the rename would move the link, not the file.
        XCTAssertEqual(unlink(path("other-name")), 0)
        XCTAssertEqual(symlink(path("v.bin"), path("link.bin")), 0)
        let viaLink = try CLI.run(["verify", "--repair", "-q", "-M", document, path("link.bin")], in: directory)
        XCTAssertEqual(viaLink.status, 2, viaLink.stderr)
        XCTAssertTrue(viaLink.stderr.contains("not a regular file"), viaLink.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("link.bin.part")))
    }

    func testARepairKilledMidwayIsResumedByTheSameCommand() throws {
        let document = try damagedFile()
        // Slow enough that the bad piece is still on its way at the kill.
        server.setRatePerConnection(32 << 10)
        server.resetStatistics()
        let killed = try interrupted(
            ["verify", "--repair", "-q", "-M", document, path("v.bin")], by: SIGKILL,
            once: "the bad piece is being fetched"
        ) { server.statistics.bodyBytesSent > 0 }
        XCTAssertEqual(killed.status, 128 + SIGKILL)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("v.bin")), "the file is its .part while repaired")
        XCTAssertTrue(FileManager.default.fileExists(atPath: path("v.bin.part.json")))
        server.setRatePerConnection(nil)
        server.resetStatistics()
        let resumed = try CLI.run(["verify", "--repair", "--json", "-M", document, path("v.bin")], in: directory)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        assertSameBytes(path("v.bin"), good)
        XCTAssertEqual(try resumed.jsonObject()["repaired"] as? Bool, true)
        // The bad piece (or its rest), and the probe's and samples' few KiB.
        XCTAssertLessThanOrEqual(server.statistics.bodyBytesSent, Int64(pieceLength + (64 << 10)))
        XCTAssertEqual(directoryEntries().filter { $0.hasPrefix("v.bin") }, ["v.bin"])
    }
}
