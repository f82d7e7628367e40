// What a run left in the test directory: its entries and file sizes.
import Foundation
import Glibc

extension EndToEndTestCase {
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
