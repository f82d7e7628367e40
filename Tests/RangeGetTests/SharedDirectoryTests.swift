import Foundation
import Glibc
import XCTest

// SharedDirectory: a list's directory read once. A name is vouched for as
// absent (its download looks nothing up) only when neither it nor any name
// beside it (.part, .part.json, .part.journal, .part.mark) was listed, and
// no download of the run took it, or a name it meets, before.
@testable import RangeGet

final class SharedDirectoryTests: TemporaryDirectoryTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        for name in [
            "done.bin", "partial.bin.part", "manifest.bin.part.json", "journal.bin.part.journal",
            "mark.bin.part.mark", "é.bin"
        ] {
            XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/" + name, contents: Data()))
        }
    }

    private func shared(limit: Int = 100) throws -> SharedDirectory {
        try XCTUnwrap(SharedDirectory(directory: directory, limit: limit))
    }

    func testANameIsFreshOnlyWhenNothingOfItWasListed() throws {
        let shared = try shared()
        for listed in ["done.bin", "partial.bin", "manifest.bin", "journal.bin", "mark.bin", "é.bin"] {
            XCTAssertFalse(shared.take(directory + "/" + listed), listed)
        }
        XCTAssertTrue(shared.take(directory + "/new.bin"))
        XCTAssertTrue(shared.take(directory + "/" + "e\u{301}.bin"), "names are bytes: a decomposed é is another name")
        XCTAssertFalse(shared.take(directory + "/sub/new2.bin"), "another directory")
        XCTAssertFalse(shared.take("new3.bin"), "no directory")
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: directory).count, 6,
            "the test of the directory's case left a file behind")
    }

    /// `-d dir/` and `-d dir//` name the files `dir/x` and `dir//x`.
    func testTheDirectoryMatchesWithTrailingSlashes() throws {
        let shared = try XCTUnwrap(SharedDirectory(directory: directory + "//", limit: 100))
        XCTAssertTrue(shared.take(directory + "//new.bin"))
        XCTAssertTrue(shared.take(directory + "/new2.bin"))
        XCTAssertFalse(shared.take(directory + "//done.bin"))
        XCTAssertFalse(shared.take(directory + "/done.bin"))
    }

    func testADirectoryThatCannotBeReadOrHoldsTooManyNamesGivesNoSnapshot() {
        XCTAssertNil(SharedDirectory(directory: directory + "/missing", limit: 100))
        // Six files, "." and "..".
        XCTAssertNil(SharedDirectory(directory: directory, limit: 7))
        XCTAssertNotNil(SharedDirectory(directory: directory, limit: 8))
    }

    /// A directory where a name in capitals is the same name in small
    /// letters (vfat, SMB, casefolded ext4) would make the hashes miss
    /// names: it gets no snapshot. Stood in for by the capitalised name of
    /// the probe's file being there already.
    func testADirectoryThatDoesNotTellCaseApartGivesNoSnapshot() {
        let capitals = directory + "/.RANGEGET-WRITE-TEST-\(getpid())-A"
        XCTAssertTrue(FileManager.default.createFile(atPath: capitals, contents: Data()))
        XCTAssertNil(SharedDirectory(directory: directory, limit: 100))
        XCTAssertTrue(FileManager.default.fileExists(atPath: capitals))
        XCTAssertFalse(
            FileManager.default.fileExists(atPath: directory + "/.rangeget-write-test-\(getpid())-a"),
            "the probe's own file was left behind")
    }

    /// `OutputFile.isSaved`: a file that took a small file's name meanwhile
    /// counts as it only when it is a regular file with the same bytes; a
    /// FIFO there is not opened (it would block), nor followed through a link.
    func testAFileThereCountsAsSavedOnlyWithTheSameBytes() throws {
        let bytes = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let mine = try OutputFile(creating: directory + "/mine", calls: .live)
        try bytes.withUnsafeBytes { try mine.write($0.baseAddress!, count: $0.count, at: 0) }
        let size = Int64(bytes.count)
        func place(_ name: String, _ content: [UInt8]) -> String {
            let path = directory + "/" + name
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(content)))
            return path
        }
        XCTAssertTrue(mine.isSaved(as: place("same", bytes), size: size))
        var other = bytes
        other[4999] ^= 1
        XCTAssertFalse(mine.isSaved(as: place("last byte differs", other), size: size))
        XCTAssertFalse(mine.isSaved(as: place("shorter", Array(bytes.dropLast())), size: size))
        XCTAssertFalse(mine.isSaved(as: directory + "/missing", size: size))
        try FileManager.default.createSymbolicLink(
            atPath: directory + "/link", withDestinationPath: directory + "/same")
        XCTAssertFalse(mine.isSaved(as: directory + "/link", size: size))
        XCTAssertEqual(mkfifo(directory + "/fifo", 0o600), 0)
        XCTAssertFalse(mine.isSaved(as: directory + "/fifo", size: size))
    }

    /// Once taken, a name and the names it meets are looked up by every
    /// later taker (another entry, or a second attempt).
    func testANameTakenOnceIsLookedUpAfterwards() throws {
        let shared = try shared()
        XCTAssertTrue(shared.take(directory + "/a"))
        XCTAssertFalse(shared.take(directory + "/a"), "a second attempt")
        XCTAssertFalse(shared.take(directory + "/a.part"), "a's data file")
        XCTAssertFalse(shared.take(directory + "/a.part.json"), "a's manifest")
        XCTAssertTrue(shared.take(directory + "/b.part"))
        XCTAssertFalse(shared.take(directory + "/b"), "b's data file was taken as a name")
        XCTAssertTrue(shared.take(directory + "/ab"))
    }

    /// The names beside an output are hashed by feeding the output's bytes,
    /// then the suffix's, to one Hasher: the same hash as their bytes joined
    /// (as a listed name is hashed). The standard library does so (its
    /// hasher buffers the bytes, and counts them all at the end); pinned here.
    func testHashingANameThenItsSuffixHashesTheJoinedName() {
        var random = SystemRandomNumberGenerator()
        for length in 0..<80 {
            let name = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            for suffix in PartialFiles.besideSuffixes.map({ Array($0.utf8) }) {
                var split = Hasher()
                name.withUnsafeBytes { split.combine(bytes: $0) }
                suffix.withUnsafeBytes { split.combine(bytes: $0) }
                let joined = (name + suffix).withUnsafeBytes(SharedDirectory.hash)
                XCTAssertEqual(split.finalize(), joined, "length \(length)")
            }
        }
    }
}
