// `--trace FILE` (issue 42): a download from three mirrors, each capping its
// connections (2, 8 and 32 MiB/s scaled down), written as a Chrome trace and
// read back as Perfetto would: one lane per TCP connection, a request start,
// first byte and end for each transfer, and the bytes each mirror's
// transfers carried equal to `--json`'s figures. Nothing here is timed.
import Foundation
import RangeGet
import RangeServer
import XCTest

final class TraceTests: EndToEndTestCase {
    /// The trace's events, parsed.
    private func events(of path: String) throws -> [[String: Any]] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual((object["otherData"] as? [String: Any])?["format"] as? String, "rangeget-trace")
        return try XCTUnwrap(object["traceEvents"] as? [[String: Any]])
    }

    func testAThreeMirrorDownloadIsTracedOneLanePerTCPConnection() throws {
        let resource = Resource.generated(size: 24 << 20, seed: 4201)
        let mirrors = try cappedMirrors(serving: resource)
        let output = path("f")
        let trace = path("trace.json")
        let run = try CLI.run(
            ["-q", "--json", "-n", "8", "--trace", trace, "-o", output] + mirrors.map { $0.url("f") },
            in: directory, timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        assertSameBytes(output, resource)
        let events = try events(of: trace)

        // Transfers: complete slices ("X", category "transfer") on TCP lanes.
        let transfers = events.filter { $0["ph"] as? String == "X" && $0["cat"] as? String == "transfer" }
        XCTAssertGreaterThanOrEqual(transfers.count, 8, "every connection fetched")
        let lanes = Set(transfers.compactMap { $0["tid"] as? Int })
        let named = Set(
            events.filter { $0["ph"] as? String == "M" && $0["name"] as? String == "thread_name" }
                .compactMap { $0["tid"] as? Int })
        XCTAssertTrue(lanes.isSubset(of: named), "every lane is named: \(lanes) \(named)")
        XCTAssertTrue(lanes.allSatisfy { (1..<65536).contains($0) }, "each lane is a TCP connection's port: \(lanes)")
        // Each lane opened its connection once: one transfer on it says so, the first.
        for lane in lanes {
            let onLane = transfers.filter { $0["tid"] as? Int == lane }
                .sorted { ($0["ts"] as? Int ?? 0) < ($1["ts"] as? Int ?? 0) }
            let opened = onLane.map { ($0["args"] as? [String: Any])?["newConnection"] as? Bool ?? false }
            XCTAssertEqual(opened.filter { $0 }.count, 1, "lane \(lane): \(opened)")
            XCTAssertEqual(opened.first, true, "lane \(lane) starts with the request that opened it")
        }
        let json = try run.jsonObject()
        let tcpConnections = try XCTUnwrap(json["tcpConnections"] as? Int)
        XCTAssertLessThanOrEqual(lanes.count, tcpConnections)
        // Each transfer: a start and an end, and a first byte on its lane when bytes came.
        var firstBytes = events.filter { $0["ph"] as? String == "i" && $0["name"] as? String == "first byte" }
        for transfer in transfers {
            let start = try XCTUnwrap(transfer["ts"] as? Int)
            let duration = try XCTUnwrap(transfer["dur"] as? Int)
            XCTAssertGreaterThanOrEqual(duration, 0)
            let args = try XCTUnwrap(transfer["args"] as? [String: Any])
            guard (args["bytes"] as? Int ?? 0) > 0 else { continue }
            let lane = transfer["tid"] as? Int
            let first = firstBytes.firstIndex {
                $0["tid"] as? Int == lane
                    && ($0["args"] as? [String: Any])?["connection"] as? Int
                        == args["connection"] as? Int
                    && (start...start + duration).contains($0["ts"] as? Int ?? -1)
            }
            XCTAssertNotNil(first, "a first byte inside \(args)")
            if let first { firstBytes.remove(at: first) }
        }
        // The bytes each mirror's transfers carried are its --json bytes.
        let reported = try XCTUnwrap(json["mirrors"] as? [[String: Any]])
        for mirror in reported {
            let url = try XCTUnwrap(mirror["url"] as? String)
            let traced = transfers.filter { ($0["args"] as? [String: Any])?["mirror"] as? String == url }
                .reduce(0) { $0 + (($1["args"] as? [String: Any])?["bytes"] as? Int ?? 0) }
            XCTAssertEqual(traced, mirror["bytes"] as? Int, "\(url)")
        }
        // The rate is sampled, per mirror too.
        let rates = events.filter { $0["ph"] as? String == "C" && $0["name"] as? String == "rate" }
        XCTAssertFalse(rates.isEmpty)
        XCTAssertTrue(
            rates.contains { ($0["args"] as? [String: Any])?["mirror 2"] != nil }, "a rate for the third mirror")
    }

    /// A trace the file system refuses: the download is done and kept, and
    /// the run says why the trace is missing (exit 4).
    func testATraceThatCannotBeWrittenIsALocalError() throws {
        let resource = Resource.generated(size: 1 << 20, seed: 4202)
        server.setResource(resource, at: "f")
        let run = try CLI.run(
            ["-q", "--trace", path("missing/trace.json"), "-o", path("f"), server.url("f")], in: directory)
        XCTAssertEqual(run.status, 4, run.stderr)
        XCTAssertTrue(run.stderr.contains("--trace"), run.stderr)
        assertSameBytes(path("f"), resource)
    }

    /// The library: one trace shared by two downloads holds both, each its own process.
    func testTwoDownloadsShareOneTrace() throws {
        let resources = [Resource.generated(size: 2 << 20, seed: 4203), Resource.generated(size: 3 << 20, seed: 4204)]
        let trace = DownloadTrace(path: path("both.json"))
        for (index, resource) in resources.enumerated() {
            server.setResource(resource, at: "f\(index)")
            let run = runLibrary([server.url("f\(index)")], to: path("f\(index)")) { $0.trace = trace }
            _ = try run.result.get()
            assertSameBytes(path("f\(index)"), resource)
        }
        try trace.write()
        let events = try events(of: path("both.json"))
        let processes = events.filter { $0["ph"] as? String == "M" && $0["name"] as? String == "process_name" }
        XCTAssertEqual(processes.compactMap { $0["pid"] as? Int }, [1, 2])
        for pid in [1, 2] {
            XCTAssertTrue(
                events.contains { $0["pid"] as? Int == pid && $0["cat"] as? String == "transfer" },
                "process \(pid) has transfers")
        }
    }
}
