// What the tests of RELIABILITY.md cases 1-13 (ReliabilityServerTests,
// ReliabilityServerHeaderTests, ReliabilityServerTransferTests) share: the
// ranged GETs the test's RangeServer received.
import RangeServer

extension EndToEndTestCase {
    /// The GETs with a Range header that `server` received, in order.
    var rangedGETs: [RequestRecord] {
        server.statistics.requests.filter { $0.method == "GET" && $0.rangeHeader != nil }
    }
}
