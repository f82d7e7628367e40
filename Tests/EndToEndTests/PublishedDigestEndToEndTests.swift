// A digest the server publishes (issue 40): a `Repr-Digest` or `Digest`
// header on the probe's response is checked as `--checksum` is. The right
// one lets the file in; a wrong one exits 3 and keeps the data in the
// `.part`; `--no-discovery` ignores it; the user's own `--checksum` wins.
import Foundation
import RangeServer
import XCTest

final class PublishedDigestEndToEndTests: EndToEndTestCase {
    /// `hex` as base64, as the headers carry a digest.
    private func base64(_ hex: String) -> String {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return Data(bytes).base64EncodedString()
    }

    func testAPublishedDigestIsCheckedAsAChecksumIs() throws {
        let resource = Resource.generated(size: 3 << 20, seed: 4001)
        server.setResource(resource, at: "f")
        let digest = try sha256(of: resource)
        let wrong = String(repeating: "0", count: 64)

        server.setFaults([FaultRule(.header(name: "Repr-Digest", value: "sha-256=:\(base64(digest)):"))])
        let good = try CLI.run(
            ["-q", "-n", "4", "--min-split", "512K", "-o", path("good"), server.url("f")], in: directory)
        XCTAssertEqual(good.status, 0, good.stderr)
        assertSameBytes(path("good"), resource)

        server.setFaults([FaultRule(.header(name: "Repr-Digest", value: "sha-256=:\(base64(wrong)):"))])
        let bad = try CLI.run(
            ["-q", "-n", "4", "--min-split", "512K", "-o", path("bad"), server.url("f")], in: directory)
        XCTAssertEqual(bad.status, 3, bad.stderr)
        XCTAssertTrue(bad.stderr.contains("expected \(wrong) (the server's Repr-Digest header)"), bad.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("bad")), "no file under the final name")
        assertSameBytes(path("bad.part"), resource)

        let ignored = try CLI.run(
            ["-q", "--no-discovery", "-o", path("ignored"), server.url("f")], in: directory)
        XCTAssertEqual(ignored.status, 0, ignored.stderr)
        assertSameBytes(path("ignored"), resource)

        let own = try CLI.run(
            ["-q", "--checksum", "sha256=\(digest)", "-o", path("own"), server.url("f")], in: directory)
        XCTAssertEqual(own.status, 0, "the user's checksum wins over the server's: \(own.stderr)")

        server.setFaults([FaultRule(.header(name: "Digest", value: "SHA-256=\(base64(wrong))"))])
        let old = try CLI.run(["-q", "-o", path("old"), server.url("f")], in: directory)
        XCTAssertEqual(old.status, 3, old.stderr)
        XCTAssertTrue(old.stderr.contains("the server's Digest header"), old.stderr)
    }
}
