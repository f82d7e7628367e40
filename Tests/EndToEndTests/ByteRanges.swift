// Byte ranges as the tests meet them in the requests a server recorded.
import Foundation

extension EndToEndTestCase {
    /// `bytes=a-b` as a half-open range.
    func requestedRange(_ header: String?) -> Range<Int64>? {
        guard let header, header.hasPrefix("bytes=") else { return nil }
        let bounds = header.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]) else { return nil }
        return first..<(last + 1)
    }
}
