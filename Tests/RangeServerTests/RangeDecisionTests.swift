import Foundation
import XCTest

@testable import RangeServer

final class RangeDecisionTests: XCTestCase {
    func testParsesRangeHeaders() {
        let cases: [(String, [RangeSpec]?)] = [
            ("bytes=0-99", [.closed(first: 0, last: 99)]),
            ("bytes=100-", [.from(first: 100)]),
            ("bytes=-5", [.suffix(length: 5)]),
            ("Bytes = 1-2 , 5-6", [.closed(first: 1, last: 2), .closed(first: 5, last: 6)]),
            ("bytes=0-1,,", [.closed(first: 0, last: 1)]),
            ("bytes=0-99999999999999999999999", [.closed(first: 0, last: .max)]),
            ("bytes=5-4", nil),
            ("bytes=-", nil),
            ("bytes=a-b", nil),
            ("bytes=1", nil),
            ("bytes=", nil),
            ("items=0-1", nil),
            ("bytes 0-1", nil),
            ("bytes=+1-2", nil)
        ]
        for (header, expected) in cases {
            XCTAssertEqual(RangeSpec.parseHeader(header), expected, header)
        }
    }

    func testResolvesAgainstTheSize() {
        XCTAssertEqual(RangeSpec.closed(first: 10, last: 19).resolved(size: 100), 10..<20)
        XCTAssertEqual(RangeSpec.closed(first: 90, last: 1000).resolved(size: 100), 90..<100)
        XCTAssertEqual(RangeSpec.from(first: 99).resolved(size: 100), 99..<100)
        XCTAssertEqual(RangeSpec.suffix(length: 5).resolved(size: 100), 95..<100)
        XCTAssertEqual(RangeSpec.suffix(length: 500).resolved(size: 100), 0..<100)
        XCTAssertNil(RangeSpec.from(first: 100).resolved(size: 100))
        XCTAssertNil(RangeSpec.suffix(length: 0).resolved(size: 100))
        XCTAssertNil(RangeSpec.suffix(length: 5).resolved(size: 0))
        XCTAssertNil(RangeSpec.closed(first: 0, last: 0).resolved(size: 0))
    }

    func testDecisions() {
        let date = Date(timeIntervalSince1970: 1_704_067_200)
        func decide(_ range: String?, method: String = "GET", ifRange: String? = nil, size: Int64 = 100)
            -> RangeDecision
        {
            RangeDecision.decide(
                method: method, range: range, ifRange: ifRange, size: size, etag: "\"e1\"", lastModified: date)
        }
        XCTAssertEqual(decide(nil), .full)
        XCTAssertEqual(decide("bytes=0-9"), .partial(0..<10))
        XCTAssertEqual(decide("bytes=0-9", method: "HEAD"), .full)
        XCTAssertEqual(decide("bytes=garbage"), .full)
        XCTAssertEqual(decide("bytes=100-"), .unsatisfiable)
        XCTAssertEqual(decide("bytes=0-", size: 0), .unsatisfiable)
        XCTAssertEqual(decide("bytes=0-1,5-6"), .multiple([0..<2, 5..<7]))
        XCTAssertEqual(decide("bytes=0-9", ifRange: "\"e1\""), .partial(0..<10))
        XCTAssertEqual(decide("bytes=0-9", ifRange: "\"e2\""), .full)
        XCTAssertEqual(decide("bytes=0-9", ifRange: "W/\"e1\""), .full)
        XCTAssertEqual(decide("bytes=0-9", ifRange: "Mon, 01 Jan 2024 00:00:00 GMT"), .partial(0..<10))
        XCTAssertEqual(decide("bytes=0-9", ifRange: "Mon, 01 Jan 2024 00:00:01 GMT"), .full)
        XCTAssertEqual(decide("bytes=0-9", ifRange: "not a date"), .full)
        // If-Range false means the Range is ignored, so no 416 either.
        XCTAssertEqual(decide("bytes=500-", ifRange: "\"other\""), .full)
    }

    func testIfRangeNeverMatchesAWeakCurrentETag() {
        XCTAssertFalse(RangeDecision.ifRangeMatches("\"e1\"", etag: "W/\"e1\"", lastModified: nil))
        XCTAssertFalse(RangeDecision.ifRangeMatches("\"e1\"", etag: nil, lastModified: nil))
        XCTAssertTrue(RangeDecision.ifRangeMatches(" \"e1\" ", etag: "\"e1\"", lastModified: nil))
    }

    func testHTTPDates() {
        let date = Date(timeIntervalSince1970: 784_111_777)
        XCTAssertEqual(HTTPDate.format(date), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 0)), "Thu, 01 Jan 1970 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: 951_782_400.9)), "Tue, 29 Feb 2000 00:00:00 GMT")
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), date)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), date)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), date)
        XCTAssertEqual(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT"), Date(timeIntervalSince1970: 951_782_400))
        for bad in [
            "", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT", "\"etag\""
        ] {
            XCTAssertNil(HTTPDate.parse(bad), bad)
        }
        // A file's mtime may be anything up to Int64.max seconds (tmpfs keeps it): the
        // nearest date an IMF-fixdate can write, never a trap.
        let latest = "Fri, 31 Dec 9999 23:59:59 GMT"
        let earliest = "Mon, 01 Jan 0001 00:00:00 GMT"
        for (seconds, expected) in [
            (Double(Int64.max), latest), (9.3e18, latest), (1e300, latest), (.infinity, latest),
            (Double(Int64.min), earliest), (-1e300, earliest), (-.infinity, earliest),
            (253_402_300_799, latest), (-62_135_596_800, earliest), (.nan, "Thu, 01 Jan 1970 00:00:00 GMT")
        ] {
            XCTAssertEqual(HTTPDate.format(Date(timeIntervalSince1970: seconds)), expected, "\(seconds)")
        }
        for seconds in stride(from: -86_400 * 400, to: 4_102_444_800, by: 7_777_777) {
            let date = Date(timeIntervalSince1970: Double(seconds))
            XCTAssertEqual(HTTPDate.parse(HTTPDate.format(date)), date)
        }
    }
}
