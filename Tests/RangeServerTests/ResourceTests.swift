import Foundation
import XCTest

@testable import RangeServer

final class ResourceTests: XCTestCase {
    func testGeneratedContentIsAFunctionOfSeedAndOffset() {
        let resource = Resource.generated(size: 3 << 20, seed: 1)
        let whole = resource.bytes(in: 0..<resource.size)
        XCTAssertEqual(whole.count, 3 << 20)
        XCTAssertEqual(Resource.generated(size: 10, seed: 1).bytes(in: 0..<10), Array(whole[0..<10]))
        // Any range equals the same slice of the whole, across the pattern's wrap.
        let wrap = Int64(Resource.patternLength)
        for range: Range<Int64> in [0..<1, 5..<100, (wrap - 3)..<(wrap + 5), (2 * wrap - 1)..<(3 << 20)] {
            XCTAssertEqual(resource.bytes(in: range), Array(whole[Int(range.lowerBound)..<Int(range.upperBound)]))
        }
        XCTAssertNotEqual(Resource.generated(size: 64, seed: 2).bytes(in: 0..<64), Array(whole[0..<64]))
        // A shifted range does not compare equal, even by a power of two.
        for shift in [1, 4096, 1 << 20] {
            XCTAssertNotEqual(Array(whole[shift..<shift + 4096]), Array(whole[0..<4096]), "shift \(shift)")
        }
        XCTAssertEqual(resource.bytes(in: (3 << 20) - 2..<(4 << 20)).count, 2, "clamped to the size")
    }

    func testDataAndFileContent() throws {
        let bytes: [UInt8] = Array(0..<200).map { UInt8($0) }
        let data = Resource.data(bytes)
        XCTAssertEqual(data.size, 200)
        XCTAssertEqual(data.bytes(in: 10..<20), Array(bytes[10..<20]))

        let path = NSTemporaryDirectory() + "rangeserver-resource-\(getpid()).bin"
        defer { unlink(path) }
        try data.write(to: path)
        let file = Resource.file(path)
        XCTAssertEqual(file.size, 200)
        XCTAssertEqual(file.bytes(in: 0..<200), bytes)
        XCTAssertEqual(file.bytes(in: 150..<300), Array(bytes[150...]))
        XCTAssertNotNil(file.lastModified)
        XCTAssertFalse(Resource.file(path + ".missing").isAvailable)
    }

    func testWriteMaterialisesGeneratedContent() throws {
        let resource = Resource.generated(size: (1 << 20) * 2 + 12_345, seed: 9)
        let path = NSTemporaryDirectory() + "rangeserver-write-\(getpid()).bin"
        defer { unlink(path) }
        try resource.write(to: path)
        let written = try Data(contentsOf: URL(fileURLWithPath: path))
        XCTAssertEqual(written.count, Int(resource.size))
        XCTAssertTrue(written.elementsEqual(resource.bytes(in: 0..<resource.size)))
        XCTAssertThrowsError(try resource.write(to: "/nonexistent-dir/x")) { error in
            XCTAssertTrue("\(error)".contains("No such file or directory"), "\(error)")
        }
    }

    func testETags() {
        XCTAssertEqual(Resource.generated(size: 5, seed: 3).etag, "\"rg-3-5-0\"")
        XCTAssertEqual(Resource.generated(size: 5, seed: 3).etag, Resource.generated(size: 5, seed: 3).etag)
        XCTAssertNotEqual(Resource.data([1, 2]).etag, Resource.data([1, 3]).etag)
        var custom = Resource.data([1])
        custom.etag = "W/\"weak\""
        XCTAssertEqual(custom.etag, "W/\"weak\"")
        custom.etag = nil
        XCTAssertNil(custom.etag)
    }

    func testReplacementChangesContentAndValidators() {
        let original = Resource.generated(size: 1000, seed: 4)
        let changed = original.replaced(newSize: nil)
        XCTAssertEqual(changed.size, 1000)
        XCTAssertNotEqual(changed.etag, original.etag)
        XCTAssertNotEqual(changed.bytes(in: 0..<1000), original.bytes(in: 0..<1000))
        XCTAssertEqual(changed.lastModified, original.lastModified!.addingTimeInterval(60))

        let grown = original.replaced(newSize: 1500)
        XCTAssertEqual(grown.size, 1500)
        XCTAssertNotEqual(grown.etag, original.etag)
        XCTAssertEqual(grown.bytes(in: 0..<1000), original.bytes(in: 0..<1000), "an append keeps the prefix")

        var tagged = Resource.data([1, 2, 3])
        tagged.etag = "\"v1\""
        XCTAssertEqual(tagged.replaced(newSize: nil).etag, "\"v1.1\"")
    }
}
