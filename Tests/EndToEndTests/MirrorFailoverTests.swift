// A bad mirror beside a healthy one costs time, never the download (found by
// the seeded soak, issue 36). The piece a bad mirror failed is the healthy
// mirror's to fetch: the failures it met there do not count against it once
// that mirror is dropped.
import Foundation
import RangeGet
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

final class ServerLimitEndToEndTests: EndToEndTestCase {
    /// A mirror that takes 2 requests at once refuses the rest of its share
    /// of 12 connections with 503: its limit, not its failures. It stays in
    /// use beside the other mirror (before, three refusals in a row dropped
    /// it as failing), and both serve the file.
    func testAMirrorsConnectionLimitDoesNotDropIt() throws {
        let resource = Resource.generated(size: 12 << 20, seed: 3621)
        let other = try anotherServer()
        for mirror in [server!, other] {
            mirror.setResource(resource, at: "f")
            mirror.setRatePerConnection(2 << 20)
        }
        server.setConnectionLimit(2)
        let output = path("f")
        let run = try CLI.run(
            ["-q", "--json", "-n", "12", "-o", output, server.url("f"), other.url("f")], in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        XCTAssertGreaterThan(server.statistics.refusedOverLimit, 2, "the limit was met more than twice")
        let mirrors = try XCTUnwrap(try run.jsonObject()["mirrors"] as? [[String: Any]], run.stdout)
        XCTAssertEqual(mirrors.count, 2)
        for mirror in mirrors {
            XCTAssertTrue(mirror["dropped"] == nil || mirror["dropped"] is NSNull, "\(mirrors)")
            XCTAssertGreaterThan(mirror["bytes"] as? Int ?? 0, 0, "\(mirrors)")
        }
    }

    /// Requests beyond a server's limit are refused (503, Retry-After: 1):
    /// the count comes down to the two the server took, never to rise
    /// again, and the refused pieces go to them as they free (before, the
    /// pieces waited out the Retry-After while those connections idled);
    /// the refusals are none of the pieces' attempts. A refusal of a request
    /// sent within the limit (the server had not yet given back a place)
    /// waits a grace of at most the Retry-After.
    func testPiecesRefusedBeyondTheLimitGoToTheConnectionsTheServerTook() throws {
        let resource = Resource.generated(size: 8 << 20, seed: 3622)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(4 << 20)
        server.setConnectionLimit(2)
        let run = runLibrary([server.url("f")], to: path("f")) { $0.connections = 6 }
        let result = try run.result.get()
        assertSameBytes(path("f"), resource)
        let waits = run.events.compactMap { event -> (delay: Double, attempt: Int)? in
            if case let .retry(_, .status(503), _, delay, attempt, _) = event { return (delay, attempt) }
            return nil
        }
        XCTAssertGreaterThanOrEqual(waits.count, 4, "the first 6 requests met a limit of 2")
        XCTAssertEqual(waits.prefix(4).map(\.delay), [0, 0, 0, 0], "\(waits)")
        XCTAssertTrue(waits.allSatisfy { $0.delay <= 1 && $0.attempt == 1 }, "\(waits)")
        XCTAssertEqual(result.connectionCount?.settled, 2)
        let busy = run.events.compactMap { event -> Int? in
            if case let .progress(progress) = event { return progress.activeConnections }
            return nil
        }
        let afterRefusals = busy.drop { $0 > 2 }
        XCTAssertLessThanOrEqual(afterRefusals.max() ?? 0, 2, "\(busy)")
    }
}
