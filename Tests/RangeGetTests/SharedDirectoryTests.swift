// SharedDirectory: a list's directory read once. A name is vouched for as
// absent (its download looks nothing up) only when neither it nor any name
// beside it (.part, .part.json, .part.journal, .part.mark) was listed, and
// no download of the run took it, or a name it meets, before.
@testable import RangeGet
import Foundation
import XCTest

final class SharedDirectoryTests: XCTestCase {
    private var directory: String!

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "rangeget-shared-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for name in ["done.bin", "partial.bin.part", "manifest.bin.part.json", "journal.bin.part.journal",
                     "mark.bin.part.mark", "é.bin"] {
            XCTAssertTrue(FileManager.default.createFile(atPath: directory + "/" + name, contents: Data()))
        }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
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
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: directory).count, 6,
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
    /// (as a listed name is hashed), which Hasher.combine(bytes:) documents.
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
