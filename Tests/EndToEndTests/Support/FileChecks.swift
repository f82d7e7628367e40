// What a run left on disk, compared with what the server served: a file
// byte for byte, its SHA-256, its size, the test directory's entries.
import Foundation
import Glibc
import RangeServer
import XCTest

extension EndToEndTestCase {
    /// Asserts the file at `path` holds exactly `resource`'s bytes.
    func assertSameBytes(_ path: String, _ resource: Resource, file: StaticString = #filePath, line: UInt = #line) {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            return XCTFail("\(path) does not exist", file: file, line: line)
        }
        defer { try? handle.close() }
        let actualSize = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? -1
        XCTAssertEqual(actualSize, resource.size, "size of \(path)", file: file, line: line)
        if let offset = handle.firstDifference(from: resource, in: 0..<resource.size) {
            XCTFail("\(path) differs from byte \(offset) on", file: file, line: line)
        }
    }

    /// The SHA-256 of `resource`, lowercase hex, as sha256sum computes it.
    func sha256(of resource: Resource) throws -> String {
        let reference = path("reference-\(UUID().uuidString)")
        try resource.write(to: reference)
        defer { try? FileManager.default.removeItem(atPath: reference) }
        let run = try CLI.run([reference], in: directory, executable: "/usr/bin/sha256sum")
        return String(run.stdout.prefix(64))
    }

    /// Every entry of the test directory except the harness's stdout/stderr files.
    func directoryEntries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { !$0.hasPrefix(".std") }.sorted()
    }

    /// The size of the file at `path`, -1 when absent.
    func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : -1
    }
}

extension FileHandle {
    /// The offset of the first byte in `range` where this file differs from
    /// `resource` (a byte past its end differs), nil when none does.
    func firstDifference(from resource: Resource, in range: Range<Int64>) -> Int64? {
        let block: Int64 = 4 << 20
        var offset = range.lowerBound
        while offset < range.upperBound {
            let count = min(block, range.upperBound - offset)
            try? seek(toOffset: UInt64(offset))
            let actual = [UInt8](readData(ofLength: Int(count)))
            let expected = resource.bytes(in: offset..<(offset + count))
            if actual != expected {
                return offset + Int64(zip(actual, expected).prefix { $0 == $1 }.count)
            }
            offset += count
        }
        return nil
    }
}
