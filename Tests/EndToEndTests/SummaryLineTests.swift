// Issue 37, item 6: the line that ends a download. A run whose bytes all
// came from an earlier run said `0 B/s`, which reads as a stalled run; `-n 8`
// reported 10 TCP connections with no word of why.
import XCTest

@testable import RangeGet
@testable import rangeget

final class SummaryLineTests: XCTestCase {
    private func result(fetched: Int64, reused: Int64, tcpConnections: Int) -> DownloadResult {
        DownloadResult(
            path: "big.iso", size: fetched + reused, seconds: 0.2, bytesFetched: fetched, bytesReused: reused,
            retries: 0,
            mirrors: [
                MirrorReport(
                    url: "http://h/big.iso", bytes: fetched, seconds: 0.2, errors: 0,
                    dropped: nil, tcpConnections: tcpConnections, httpVersion: "1.1")
            ],
            connectionsUsed: min(tcpConnections, 8), tcpConnections: tcpConnections)
    }

    func testAFullyReusedRunNamesNoRate() {
        let line = GetCommand.summary(
            result(fetched: 0, reused: 8 << 20, tcpConnections: 1), retries: RetryKinds(),
            connections: 8)
        XCTAssertEqual(
            line,
            "saved big.iso (8.0 MiB) in 0.2 s, all 8.0 MiB reused from an earlier run, "
                + "1 TCP connection over HTTP/1.1")
        let part = GetCommand.summary(
            result(fetched: 4 << 20, reused: 4 << 20, tcpConnections: 8), retries: RetryKinds(),
            connections: 8)
        XCTAssertEqual(
            part,
            "saved big.iso (8.0 MiB) in 0.2 s, 20.0 MiB/s, 4.0 MiB reused from an earlier run, "
                + "8 TCP connections over HTTP/1.1")
    }

    func testMoreTCPConnectionsThanConnectionsSaysWhy() {
        let line = GetCommand.summary(
            result(fetched: 8 << 20, reused: 0, tcpConnections: 10), retries: RetryKinds(),
            connections: 8)
        XCTAssertTrue(
            line.hasSuffix(
                ", 10 TCP connections over HTTP/1.1 (at most 8 at once: a transfer cut short, "
                    + "by the server, a steal or a race, closes its connection)"), line)
    }
}
