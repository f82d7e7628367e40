// OutcomePolicy: the step after each engine outcome, as a table, and the
// limits on files that keep changing and signed URLs that keep expiring.
import XCTest

@testable import RangeGet

final class OutcomePolicyTests: XCTestCase {
    private let url = "http://127.0.0.1/f"
    private let mirrors = ["http://127.0.0.1/f", "http://127.0.0.1:8080/f"]

    func testEachOutcomeHasItsStep() {
        let table: [(EngineOutcome, unprobed: Bool, NextStep)] = [
            (.complete(size: 42), false, .finish(size: 42)),
            (.stopped, false, .fail(.stopped)),
            (.failed(.verification("bad")), false, .fail(.verification("bad"))),
            (.remoteChanged("new ETag"), false, .startOver(reason: "new ETag")),
            // A resume that trusted its manifest probes before it concludes anything.
            (.remoteChanged("new ETag"), true, .probe),
            (.expired(index: 1, reason: "403"), false, .resolve(index: 1)),
            (.rangesUnsupported("a 200 to a ranged request"), false, .singleStream(reason: "a 200 to a ranged request"))
        ]
        for (outcome, unprobed, expected) in table {
            var policy = OutcomePolicy()
            XCTAssertEqual(
                policy.next(after: outcome, url: url, mirrors: mirrors, unprobed: unprobed), expected,
                "\(outcome), unprobed: \(unprobed)")
        }
    }

    func testAFileThatKeepsChangingFailsAfterTwoRestarts() {
        var policy = OutcomePolicy()
        for _ in 0..<OutcomePolicy.restartLimit {
            XCTAssertEqual(
                policy.next(after: .remoteChanged("x"), url: url, mirrors: mirrors, unprobed: false),
                .startOver(reason: "x"))
        }
        XCTAssertEqual(
            policy.next(after: .remoteChanged("y"), url: url, mirrors: mirrors, unprobed: false),
            .fail(.verification("\(url) keeps changing during the download (y)")))
    }

    func testTheProbeOfAnUnprobedResumeIsNotARestart() {
        var policy = OutcomePolicy()
        XCTAssertEqual(policy.next(after: .remoteChanged("x"), url: url, mirrors: mirrors, unprobed: true), .probe)
        XCTAssertEqual(policy.restarts, 0)
    }

    func testAURLThatKeepsExpiringFailsOnItsMirror() {
        var policy = OutcomePolicy()
        for _ in 0..<OutcomePolicy.resolveLimit {
            XCTAssertEqual(
                policy.next(after: .expired(index: 1, reason: "403"), url: url, mirrors: mirrors, unprobed: false),
                .resolve(index: 1))
        }
        XCTAssertEqual(
            policy.next(after: .expired(index: 1, reason: "403"), url: url, mirrors: mirrors, unprobed: false),
            .fail(.server(url: mirrors[1], message: "403, again after resolving it anew")))
    }
}
