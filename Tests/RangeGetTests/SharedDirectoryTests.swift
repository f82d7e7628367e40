// SharedDirectory: a list's directory read once. A name is vouched for as
// absent (its download looks nothing up) only when neither it nor any name
// beside it (.part, .part.json, .part.journal, .part.mark) was listed, and
// no download of the run took it, or a name it meets, before. A download
// waiting for another's output goes on only once that one is released.
@testable import RangeGet
import Dispatch
import Foundation
import Synchronization
import XCTest

final class SharedDirectoryTests: XCTestCase {
    private var directory: String!
    /// Stand-ins for the downloads that take names.
    private let first = Owner(), second = Owner()

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "rangeget-shared-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for name in ["done.bin", "partial.bin.part", "manifest.bin.part.json", "journal.bin.part.journal",
                     "mark.bin.part.mark", "é.bin"] {
            _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data())
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
            XCTAssertFalse(shared.take(directory + "/" + listed, for: first, waiting: false), listed)
        }
        XCTAssertTrue(shared.take(directory + "/new.bin", for: first, waiting: false))
        XCTAssertTrue(shared.take(directory + "/" + "e\u{301}.bin", for: first, waiting: false),
                      "names are bytes: a decomposed é is another name")
        XCTAssertFalse(shared.take(directory + "/sub/new2.bin", for: first, waiting: false), "another directory")
        XCTAssertFalse(shared.take("new3.bin", for: first, waiting: false), "no directory")
    }

    func testTheDirectoryMatchesWithOrWithoutATrailingSlash() throws {
        let shared = try XCTUnwrap(SharedDirectory(directory: directory + "//", limit: 100))
        XCTAssertTrue(shared.take(directory + "/new.bin", for: first, waiting: false))
        XCTAssertFalse(shared.take(directory + "/done.bin", for: first, waiting: false))
    }

    func testADirectoryThatCannotBeReadOrHoldsTooManyNamesGivesNoSnapshot() {
        XCTAssertNil(SharedDirectory(directory: directory + "/missing", limit: 100))
        // Six files, "." and "..".
        XCTAssertNil(SharedDirectory(directory: directory, limit: 7))
        XCTAssertNotNil(SharedDirectory(directory: directory, limit: 8))
    }

    /// Once taken, a name and the names it meets are looked up by every
    /// later taker, the taker itself included (a second attempt).
    func testANameTakenOnceIsLookedUpAfterwards() throws {
        let shared = try shared()
        XCTAssertTrue(shared.take(directory + "/a", for: first, waiting: false))
        XCTAssertFalse(shared.take(directory + "/a", for: first, waiting: true), "its own second attempt")
        XCTAssertFalse(shared.take(directory + "/a.part", for: second, waiting: false), "a's data file")
        XCTAssertFalse(shared.take(directory + "/a.part.json", for: second, waiting: false), "a's manifest")
        XCTAssertTrue(shared.take(directory + "/b.part", for: second, waiting: false))
        shared.release(heldBy: second)
        XCTAssertFalse(shared.take(directory + "/b", for: second, waiting: false), "b's data file was taken as a name")
        XCTAssertTrue(shared.take(directory + "/ab", for: second, waiting: false))
        shared.release(heldBy: first)
        XCTAssertFalse(shared.take(directory + "/a", for: second, waiting: true), "released, a is still taken before")
    }

    /// A download taking a name another holds waits until it is released,
    /// then looks it up; one that may not wait looks it up at once.
    func testATakerWaitsForTheHolderOfItsName() throws {
        let shared = try shared()
        XCTAssertTrue(shared.take(directory + "/x", for: first, waiting: true))
        XCTAssertFalse(shared.take(directory + "/x", for: second, waiting: false), "not waiting: looked up")
        let (third, path) = (Owner(), directory + "/x.part")
        let taken = DispatchSemaphore(value: 0)
        let fresh = Mutex<Bool?>(nil)
        Thread.detachNewThread {
            let answer = shared.take(path, for: third, waiting: true)
            fresh.withLock { $0 = answer }
            taken.signal()
        }
        XCTAssertEqual(taken.wait(timeout: .now() + 0.2), .timedOut, "went on while x was held")
        shared.release(heldBy: first)
        XCTAssertEqual(taken.wait(timeout: .now() + 10), .success, "still waiting after x was released")
        XCTAssertEqual(fresh.withLock { $0 }, false)
    }
}

/// A download, as far as SharedDirectory knows one: an object to hold names.
private final class Owner: Sendable {}
