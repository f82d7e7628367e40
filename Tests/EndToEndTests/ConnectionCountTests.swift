// `-n auto`: the connection count learned from the total against real
// servers on loopback: a shared uplink sheds to one or two, a cap on each
// connection keeps them all, and --json says what it settled at and why.
import Foundation
import RangeGet
import RangeServer
import XCTest

final class ConnectionCountTests: EndToEndTestCase {
    private func connectionCount(_ run: Run) throws -> [String: Any] {
        try XCTUnwrap(try run.jsonObject()["connectionCount"] as? [String: Any], run.stdout)
    }

    /// `rangeget -n auto --max-per-host MOST` of `resource`, checked right; its --json.
    private func downloadAuto(_ resource: Resource, most: Int) throws -> Run {
        server.setResource(resource, at: "f")
        let output = path("f")
        let run = try CLI.run(
            ["-q", "--json", "-n", "auto", "--max-per-host", "\(most)", "-o", output, server.url("f")],
            in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        return run
    }

    /// Connections that share one uplink add nothing: the count sheds to
    /// what one or two deliver, from the ceiling it starts at.
    func testASharedUplinkShedsConnections() throws {
        server.setTotalRate(8_000_000)
        let run = try downloadAuto(Resource.generated(size: 16 << 20, seed: 401), most: 8)
        let count = try connectionCount(run)
        XCTAssertEqual(count["mode"] as? String, "auto")
        XCTAssertEqual(count["peak"] as? Int, 8, "starts at the ceiling")
        XCTAssertLessThanOrEqual(try XCTUnwrap(count["settled"] as? Int), 2, "\(count)")
        XCTAssertTrue((count["reason"] as? String ?? "").contains("kept"), "\(count)")
    }

    /// Where each connection is capped, every connection counts: the count
    /// stays at the ceiling (`--max-per-host`), never above it.
    func testACapOnEachConnectionKeepsThemAll() throws {
        server.setRatePerConnection(2 << 20)
        let run = try downloadAuto(Resource.generated(size: 20 << 20, seed: 402), most: 6)
        let count = try connectionCount(run)
        XCTAssertEqual(count["settled"] as? Int, 6, "\(count)")
        XCTAssertEqual(count["peak"] as? Int, 6, "\(count)")
        XCTAssertLessThanOrEqual(try XCTUnwrap(run.jsonObject()["connectionsUsed"] as? Int), 6)
        XCTAssertTrue((count["reason"] as? String ?? "").contains("lost"), "\(count)")
    }

    /// A server that takes 3 requests at once answers the others 503: the
    /// count stays at what it accepted, and the download completes.
    func testAServersConnectionLimitCapsTheCount() throws {
        server.setRatePerConnection(2 << 20)
        server.setConnectionLimit(3)
        let run = try downloadAuto(Resource.generated(size: 12 << 20, seed: 405), most: 8)
        let count = try connectionCount(run)
        XCTAssertLessThanOrEqual(try XCTUnwrap(count["settled"] as? Int), 3, "\(count)")
        XCTAssertTrue((count["reason"] as? String ?? "").contains("refused more than"), "\(count)")
        XCTAssertGreaterThan(server.statistics.refusedOverLimit, 0, "the limit was reached")
    }

    /// A fixed count says so; `-n auto` on a list keeps the fixed count it
    /// starts from (the list's connections are shared).
    func testAFixedCountIsReportedAsFixed() throws {
        let resource = Resource.generated(size: 4 << 20, seed: 403)
        server.setResource(resource, at: "f")
        let run = try CLI.run(["-q", "--json", "-n", "3", "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 0, run.stderr)
        let count = try connectionCount(run)
        XCTAssertEqual(count["mode"] as? String, "fixed")
        XCTAssertEqual(count["settled"] as? Int, 3)
        XCTAssertEqual(count["reason"] as? String, "fixed at 3")
    }

    /// The library: the count's changes come as events, and the result
    /// reports where it settled.
    func testTheLibraryReportsEachChangeOfCount() throws {
        let resource = Resource.generated(size: 16 << 20, seed: 404)
        server.setResource(resource, at: "f")
        server.setTotalRate(8_000_000)
        let run = runLibrary([server.url("f")], to: path("f")) { options in
            options.automaticConnections = true
            options.maxPerHost = 8
        }
        let result = try run.result.get()
        assertSameBytes(path("f"), resource)
        let report = try XCTUnwrap(result.connectionCount)
        XCTAssertTrue(report.automatic)
        XCTAssertEqual(report.peak, 8)
        XCTAssertLessThanOrEqual(report.settled, 2)
        let changes = run.events.compactMap { event -> Int? in
            if case let .transfer(.connectionCountChanged(count, _)) = event { return count }
            return nil
        }
        XCTAssertEqual(changes.first, 6, "the first round sheds a quarter: \(changes)")
        XCTAssertTrue(changes.allSatisfy { (1...8).contains($0) }, "\(changes)")
    }
}
