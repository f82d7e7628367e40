// A bad mirror beside a healthy one costs time, never the download (found by
// the seeded soak, issue 36). The piece a bad mirror failed is the healthy
// mirror's to fetch: the failures it met there do not count against it once
// that mirror is dropped.
import Foundation
import RangeServer
import XCTest

final class MirrorFailoverTests: EndToEndTestCase {
    /// One connection, two retries; the first mirror answers every request
    /// badly (a body past its Content-Range, a cut before the first byte, a
    /// Content-Range one byte off). It is dropped, and the second mirror
    /// serves the whole file. (Soak seeds 200084 and 1796489124: the piece's
    /// failures on the dropped mirror were counted, and the run gave up
    /// "after 3 attempts" with the healthy mirror unused.)
    func testABadMirrorIsDroppedAndTheHealthyOneServesTheFile() throws {
        let resource = Resource.generated(size: 999, seed: 3620)
        let healthy = try anotherServer()
        healthy.setResource(resource, at: "f")
        server.setResource(resource, at: "f")
        let faults: [(Fault, String)] = [
            (.overlong(100), "overlong"), (.cutAfter(0), "cut"),
            (.wrongContentRangeShift(1), "range-shift")
        ]
        for (index, (fault, name)) in faults.enumerated() {
            server.setFaults([FaultRule(fault, when: .method("GET"))])
            let output = path("f\(index)")
            let run = try CLI.run(
                ["--json", "-n", "1", "--retries", "2", "-o", output, server.url("f"), healthy.url("f")],
                in: directory, timeout: 60)
            XCTAssertEqual(run.status, 0, "\(name): \(run.stderr)")
            assertSameBytes(output, resource)
            let mirrors = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]], run.stdout)
            XCTAssertNotNil(mirrors.first?["dropped"] as? String, "\(name): \(mirrors)")
            XCTAssertEqual(mirrors.last?["bytes"] as? Int, Int(resource.size), "\(name): \(mirrors)")
        }
    }
}
