import RangeServer
import XCTest

final class FaultRuleParsingTests: XCTestCase {
    func testParsesEveryFaultAndTrigger() throws {
        let cases: [(String, FaultRule)] = [
            ("ignore-range", FaultRule(.ignoreRange)),
            ("ignore-range@from=2", FaultRule(.ignoreRange, when: .fromRequest(2))),
            ("range-shift:-1", FaultRule(.wrongContentRangeShift(-1))),
            ("range-total:99@range-start=100", FaultRule(.wrongContentRangeTotal(99), when: .rangeStart(100))),
            ("range-inverted", FaultRule(.invertedContentRange)),
            ("cut:100", FaultRule(.cutAfter(100))),
            ("cut-random:7@p=0.3,seed=1", FaultRule(.cutAtRandom(seed: 7), when: .probability(0.3, seed: 1))),
            ("cut-random:7@seed=9,p=1", FaultRule(.cutAtRandom(seed: 7), when: .probability(1, seed: 9))),
            ("stall:1048576@request=3", FaultRule(.stallAfter(1_048_576), when: .nthRequest(3))),
            ("status:503", FaultRule(.status(503, retryAfter: nil))),
            ("status:503:2@from=2", FaultRule(.status(503, retryAfter: 2), when: .fromRequest(2))),
            ("head-status:405", FaultRule(.headStatus(405))),
            ("head-hang@method=head", FaultRule(.headHang, when: .method("HEAD"))),
            ("delay:1200@range-start=7", FaultRule(.delay(milliseconds: 1200), when: .rangeStart(7))),
            ("head-no-length", FaultRule(.headNoLength)),
            ("no-accept-ranges", FaultRule(.noAcceptRanges)),
            ("accept-ranges-none", FaultRule(.acceptRangesNone)),
            ("gzip", FaultRule(.gzipEncoding)),
            ("multipart", FaultRule(.multipart)),
            ("chunked@always", FaultRule(.chunkedNoLength)),
            ("change-content@request=5", FaultRule(.changeContent, when: .nthRequest(5))),
            ("change-size:10", FaultRule(.changeSize(10))),
            ("weak-etag", FaultRule(.weakETag)),
            ("redirect:/other@request=1", FaultRule(.redirect(to: "/other"), when: .nthRequest(1))),
            ("redirect:/other:301", FaultRule(.redirect(to: "/other", status: 301))),
            ("redirect:http://127.0.0.1:8080/x", FaultRule(.redirect(to: "http://127.0.0.1:8080/x"))),
            (
                "redirect:http://u@h:8080/x:307@p=0.5",
                FaultRule(.redirect(to: "http://u@h:8080/x", status: 307), when: .probability(0.5, seed: 1))
            ),
            ("  cut:0  ", FaultRule(.cutAfter(0))),
            (
                "retry-after:503:99999999999999999999",
                FaultRule(.retryAfter(status: 503, value: "99999999999999999999"))
            ),
            (
                "retry-after:503:Sun, 06 Nov 99999999999 08:49:37 GMT@request=2",
                FaultRule(.retryAfter(status: 503, value: "Sun, 06 Nov 99999999999 08:49:37 GMT"), when: .nthRequest(2))
            ),
            ("claim-length:9000000000000000000", FaultRule(.claimLength("9000000000000000000"))),
            ("overlong:1000@from=3", FaultRule(.overlong(1000), when: .fromRequest(3))),
            ("header:ETag:\"v%1B[2J\"", FaultRule(.header(name: "ETag", value: "\"v\u{1B}[2J\""))),
            ("header:X-Note:a:b%25c%40d", FaultRule(.header(name: "X-Note", value: "a:b%c@d")))
        ]
        for (spec, expected) in cases {
            XCTAssertEqual(try FaultRule(parsing: spec), expected, spec)
        }
    }

    func testDescriptionsParseBack() throws {
        let rules = [
            FaultRule(.status(429, retryAfter: 1), when: .nthRequest(2)),
            FaultRule(.redirect(to: "http://127.0.0.1:1/a", status: 308), when: .probability(0.25, seed: 3)),
            FaultRule(.redirect(to: "/b")),
            FaultRule(.wrongContentRangeShift(-7), when: .method("GET")),
            FaultRule(.cutAtRandom(seed: 42), when: .rangeStart(1 << 33)),
            FaultRule(.retryAfter(status: 503, value: "Sun, 06 Nov 99999999999 08:49:37 GMT"), when: .fromRequest(2)),
            FaultRule(.claimLength("99999999999999999999999")),
            FaultRule(.overlong(7), when: .nthRequest(3)),
            FaultRule(
                .header(name: "Content-Range", value: "bytes\u{1B}]0;x\u{7}\u{9B} 0-1/2 100% @from=1"), when: .always)
        ]
        for rule in rules {
            XCTAssertEqual(try FaultRule(parsing: rule.description), rule, rule.description)
        }
        XCTAssertEqual(FaultRule(.stallAfter(5), when: .nthRequest(3)).description, "stall:5@request=3")
    }

    func testRejectsBadSpecsWithAReason() {
        let cases: [(String, String)] = [
            ("", "missing fault name"),
            ("explode", "unknown fault 'explode'"),
            ("cut", "expected cut:BYTES"),
            ("cut:x", "'x' is not a non-negative integer"),
            ("cut:-1", "'-1' is not a non-negative integer"),
            ("gzip:1", "'gzip' takes no arguments"),
            ("status:101", "'101' is not a status code in 200...599"),
            ("status:503:1:2", "expected status:CODE[:RETRY_AFTER]"),
            ("cut:1@request=0", "'0' is not a positive integer"),
            ("cut:1@p=2", "'2' is not a probability between 0 and 1"),
            ("cut:1@request=1,from=2", "unknown trigger 'request=1,from=2'"),
            ("cut:1@method=G-T", "'G-T' is not a method name"),
            ("redirect:", "expected redirect:LOCATION[:3XX]"),
            ("retry-after:503", "expected retry-after:CODE:VALUE"),
            ("claim-length:12a", "'12a' is not digits"),
            ("overlong:-1", "'-1' is not a non-negative integer"),
            ("header:Bad Name:x", "'Bad Name' is not a header name"),
            ("header:X:a%0D%0AInjected: 1", "'a%0D%0AInjected: 1' is not a value without CR or LF"),
            ("header:X:%G1", "'%G1' is not a value with valid %XX escapes")
        ]
        for (spec, reason) in cases {
            XCTAssertThrowsError(try FaultRule(parsing: spec), spec) { error in
                guard let error = error as? FaultSpecError else { return XCTFail("\(error)") }
                XCTAssertEqual(error.spec, spec)
                XCTAssertTrue(error.reason.hasPrefix(reason), "\(spec): \(error.reason)")
                XCTAssertTrue(error.description.hasPrefix("invalid fault spec '\(spec)': "))
            }
        }
    }

    func testSynopsesNameEveryFault() {
        for synopsis in FaultRule.faultSynopses {
            let name = String(synopsis.prefix { $0 != ":" })
            do {
                _ = try FaultRule(parsing: name + ":1:2:3:4")
            } catch {
                XCTAssertFalse(error.reason.contains("unknown fault"), synopsis)
            }
        }
    }
}
