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
            (.expired(index: 1, reason: "403"), false, .renew(index: 1)),
            (.rangesUnsupported("a 200 to a ranged request"), false, .singleStream(reason: "a 200 to a ranged request"))
        ]
        for (outcome, unprobed, expected) in table {
            var policy = OutcomePolicy()
            XCTAssertEqual(
                policy.next(after: outcome, url: url, mirrors: mirrors, unprobed: unprobed, progressed: false),
                expected,
                "\(outcome), unprobed: \(unprobed)")
        }
    }

    func testAFileThatKeepsChangingFailsAfterTwoRestarts() {
        var policy = OutcomePolicy()
        for _ in 0..<OutcomePolicy.restartLimit {
            XCTAssertEqual(
                policy.next(after: .remoteChanged("x"), url: url, mirrors: mirrors, unprobed: false, progressed: false),
                .startOver(reason: "x"))
        }
        XCTAssertEqual(
            policy.next(after: .remoteChanged("y"), url: url, mirrors: mirrors, unprobed: false, progressed: false),
            .fail(.verification("\(url) keeps changing during the download (y)")))
    }

    func testTheProbeOfAnUnprobedResumeIsNotARestart() {
        var policy = OutcomePolicy()
        XCTAssertEqual(
            policy.next(after: .remoteChanged("x"), url: url, mirrors: mirrors, unprobed: true, progressed: false),
            .probe)
        XCTAssertEqual(policy.restarts, 0)
    }

    func testAURLThatKeepsExpiringWithNoByteInBetweenFailsOnItsMirror() {
        var policy = OutcomePolicy()
        let expired = EngineOutcome.expired(index: 1, reason: "403")
        // The run that expired first had brought bytes; the renewals after it bring none.
        XCTAssertEqual(
            policy.next(after: expired, url: url, mirrors: mirrors, unprobed: false, progressed: true),
            .renew(index: 1))
        for _ in 1..<OutcomePolicy.renewalLimit {
            XCTAssertEqual(
                policy.next(after: expired, url: url, mirrors: mirrors, unprobed: false, progressed: false),
                .renew(index: 1))
        }
        XCTAssertEqual(
            policy.next(after: expired, url: url, mirrors: mirrors, unprobed: false, progressed: false),
            .fail(
                .server(
                    url: mirrors[1],
                    message: "403, again: its URL expired 3 times in a row with no byte fetched in between")))
    }

    /// Issue 41: a long download whose signed URL expires again and again
    /// goes on while each renewal brings bytes; the count starts over.
    func testAURLThatExpiresOftenGoesOnWhileEachRenewalBringsBytes() {
        var policy = OutcomePolicy()
        let expired = EngineOutcome.expired(index: 0, reason: "410")
        for round in 0..<20 {
            // Two barren renewals, then one that brings bytes, many times over.
            let progressed = round % 3 == 2
            XCTAssertEqual(
                policy.next(after: expired, url: url, mirrors: mirrors, unprobed: false, progressed: progressed),
                .renew(index: 0), "round \(round)")
        }
        XCTAssertEqual(
            policy.next(after: .complete(size: 9), url: url, mirrors: mirrors, unprobed: false, progressed: true),
            .finish(size: 9))
    }
}
