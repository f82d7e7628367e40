import XCTest

@testable import RangeGet

final class ChecksumTests: XCTestCase {
    func testDigestsMatchKnownVectors() throws {
        let path = NSTemporaryDirectory() + "checksum-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: path, contents: Data("abc".utf8))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let vectors: [(Checksum.Algorithm, String)] = [
            (.md5, "900150983cd24fb0d6963f7d28e17f72"),
            (.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (.sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        ]
        for (algorithm, hex) in vectors {
            XCTAssertEqual(try Checksum.digest(of: path, algorithm: algorithm), hex, "\(algorithm)")
        }
    }

    func testParsesAlgorithmAndHex() {
        XCTAssertEqual(Checksum("SHA256=" + String(repeating: "A", count: 64))?.hex, String(repeating: "a", count: 64))
        XCTAssertEqual(Checksum("sha-1=" + String(repeating: "0", count: 40))?.algorithm, .sha1)
        XCTAssertNil(Checksum("sha256=abc"), "wrong length")
        XCTAssertNil(Checksum("sha256=" + String(repeating: "g", count: 64)), "not hex")
        XCTAssertNil(Checksum("crc32=00000000"), "unknown algorithm")
        XCTAssertNil(Checksum("sha256"))
    }
}
