// ResponseCheck.partialContent: the one check of an answer to a ranged
// request, for every site that sends one (engine, opening request, probe,
// spot check, bench). One table a kind of request.
import XCTest

@testable import RangeGet

final class PartialContentTests: XCTestCase {
    private typealias Verdict = Result<PartialContent, Rejection>

    private func head(_ lines: [String]) -> ResponseHead {
        .collected(lines.map { $0 + "\r\n" } + ["\r\n"])
    }

    private func check(
        _ cases: [(name: String, lines: [String], verdict: Verdict)], request: RangeRequest,
        expected: Expectation, file: StaticString = #filePath, line: UInt = #line
    ) {
        for (name, lines, verdict) in cases {
            XCTAssertEqual(
                ResponseCheck.partialContent(head(lines), answering: request, expected: expected), verdict,
                "\(name): \(lines)", file: file, line: line)
        }
    }

    /// An engine piece: exactly bytes 100-199 of a 1000-byte file with a strong ETag.
    func testAPieceIsAnsweredOnlyByItsExactRangeOfTheSameFile() {
        let piece = PartialContent(served: ByteRange(100, 200), total: 1000)
        let partial = "HTTP/1.1 206 Partial Content"
        check(
            [
                ("206 exact match", [partial, "Content-Range: bytes 100-199/1000", "ETag: \"v1\""], .success(piece)),
                ("206 exact match, no validator sent", [partial, "Content-Range: bytes 100-199/1000"], .success(piece)),
                ("HTTP/2 206", ["HTTP/2 206", "content-range: bytes 100-199/1000"], .success(piece)),
                (
                    "identity is no coding",
                    [partial, "Content-Range: bytes 100-199/1000", "Content-Encoding: identity"],
                    .success(piece)
                ),
                (
                    "206 shifted forward", [partial, "Content-Range: bytes 101-200/1000"],
                    .failure(.contentRange("bytes 101-200/1000"))
                ),
                (
                    "206 shifted back", [partial, "Content-Range: bytes 99-198/1000"],
                    .failure(.contentRange("bytes 99-198/1000"))
                ),
                (
                    "206 one byte long", [partial, "Content-Range: bytes 100-200/1000"],
                    .failure(.contentRange("bytes 100-200/1000"))
                ),
                (
                    "206 one byte short", [partial, "Content-Range: bytes 100-198/1000"],
                    .failure(.contentRange("bytes 100-198/1000"))
                ),
                ("wrong total", [partial, "Content-Range: bytes 100-199/2000"], .failure(.otherTotal(2000))),
                ("wrong total and range", [partial, "Content-Range: bytes 0-99/2000"], .failure(.otherTotal(2000))),
                (
                    "unknown total", [partial, "Content-Range: bytes 100-199/*"],
                    .failure(.contentRange("bytes 100-199/*"))
                ),
                (
                    "inverted range", [partial, "Content-Range: bytes 199-100/1000"],
                    .failure(.contentRange("bytes 199-100/1000"))
                ),
                (
                    "other unit", [partial, "Content-Range: items 100-199/1000"],
                    .failure(.contentRange("items 100-199/1000"))
                ),
                (
                    "unsatisfied form in a 206", [partial, "Content-Range: bytes */1000"],
                    .failure(.contentRange("bytes */1000"))
                ),
                ("missing Content-Range", [partial], .failure(.contentRange(nil))),
                ("multipart", [partial, "Content-Type: multipart/byteranges; boundary=x"], .failure(.multipart)),
                (
                    "multipart with a matching Content-Range",
                    [partial, "Content-Type: Multipart/ByteRanges; boundary=x", "Content-Range: bytes 100-199/1000"],
                    .failure(.multipart)
                ),
                (
                    "gzip-encoded 206", [partial, "Content-Range: bytes 100-199/1000", "Content-Encoding: gzip"],
                    .failure(.encoded("gzip"))
                ),
                (
                    "200 to a ranged request", ["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v1\""],
                    .failure(.rangeIgnored)
                ),
                (
                    "200 of another length", ["HTTP/1.1 200 OK", "Content-Length: 999"],
                    .failure(.changed("its size is now 999 bytes, not 1000"))
                ),
                (
                    "coded 200: its length says nothing",
                    ["HTTP/1.1 200 OK", "Content-Length: 999", "Content-Encoding: br"],
                    .failure(.rangeIgnored)
                ),
                (
                    "416 naming the same total", ["HTTP/1.1 416 Range Not Satisfiable", "Content-Range: bytes */1000"],
                    .failure(.status(416, retryAfter: nil))
                ),
                (
                    "416 naming another total", ["HTTP/1.1 416 Range Not Satisfiable", "Content-Range: bytes */500"],
                    .failure(.otherTotal(500))
                ),
                (
                    "416 without Content-Range", ["HTTP/1.1 416 Range Not Satisfiable"],
                    .failure(.status(416, retryAfter: nil))
                ),
                (
                    "an error with Retry-After", ["HTTP/1.1 503 Busy", "Retry-After: 7"],
                    .failure(.status(503, retryAfter: 7))
                ),
                (
                    "a redirect libcurl did not follow", ["HTTP/1.1 302 Found", "Location: /b"],
                    .failure(.status(302, retryAfter: nil))
                ),
                (
                    "a total beyond the largest size", [partial, "Content-Range: bytes 100-199/4611686018427387905"],
                    .failure(.otherTotal(4_611_686_018_427_387_905))
                )
            ], request: .exactly(ByteRange(100, 200)),
            expected: Expectation(size: 1000, etag: "\"v1\"", lastModified: nil))
    }

    /// The validators: a strong tag must come back the same, a weak one the
    /// same, weak or strong; a date the same; a response without them is not
    /// taken for a change (If-Range guards those requests).
    func testValidatorsMustMatchWhenExpected() {
        let partial = "HTTP/1.1 206 Partial Content"
        let range = "Content-Range: bytes 0-9/10"
        let served = PartialContent(served: ByteRange(0, 10), total: 10)
        let tables: [(Expectation, [(name: String, lines: [String], verdict: Verdict)])] = [
            (
                Expectation(size: 10, etag: "\"a\"", lastModified: nil),
                [
                    ("strong tag, the same", [partial, range, "ETag: \"a\""], .success(served)),
                    (
                        "strong tag, now another", [partial, range, "ETag: \"b\""],
                        .failure(.changed("its ETag is now \"b\", not \"a\""))
                    ),
                    (
                        "strong tag, now weak", [partial, range, "ETag: W/\"a\""],
                        .failure(.changed("its ETag is now W/\"a\", not \"a\""))
                    ),
                    ("strong tag, none sent", [partial, range], .success(served)),
                    (
                        "a change wins over a bad range", [partial, "Content-Range: bytes 1-9/10", "ETag: \"b\""],
                        .failure(.changed("its ETag is now \"b\", not \"a\""))
                    ),
                    (
                        "a change wins over range ignored", ["HTTP/1.1 200 OK", "ETag: \"b\""],
                        .failure(.changed("its ETag is now \"b\", not \"a\""))
                    ),
                    (
                        "no change read off an error", ["HTTP/1.1 404 Not Found", "ETag: \"b\""],
                        .failure(.status(404, retryAfter: nil))
                    )
                ]
            ),
            (
                Expectation(size: 10, etag: "W/\"a\"", lastModified: nil),
                [
                    ("weak tag, the same", [partial, range, "ETag: W/\"a\""], .success(served)),
                    (
                        "weak tag, now strong", [partial, range, "ETag: \"a\""],
                        .failure(.changed("its ETag is now \"a\", not W/\"a\""))
                    ),
                    (
                        "weak tag, now another", [partial, range, "ETag: W/\"b\""],
                        .failure(.changed("its ETag is now W/\"b\", not W/\"a\""))
                    )
                ]
            ),
            (
                Expectation(size: 10, etag: nil, lastModified: "Mon, 01 Jan 2024 00:00:00 GMT"),
                [
                    (
                        "date, the same", [partial, range, "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT"],
                        .success(served)
                    ),
                    (
                        "date, now another", [partial, range, "Last-Modified: Tue, 02 Jan 2024 00:00:00 GMT"],
                        .failure(
                            .changed(
                                "its Last-Modified is now Tue, 02 Jan 2024 00:00:00 GMT, not Mon, 01 Jan 2024 00:00:00 GMT"
                            ))
                    ),
                    ("a tag where none was seen", [partial, range, "ETag: \"new\""], .success(served))
                ]
            )
        ]
        for (expected, cases) in tables {
            check(cases, request: .exactly(ByteRange(0, 10)), expected: expected)
        }
    }

    /// The probe's first byte, before anything is known: the total must be
    /// known, and believable.
    func testAProbeNeedsAKnownBelievableTotal() {
        let partial = "HTTP/1.1 206 Partial Content"
        check(
            [
                (
                    "the first byte", [partial, "Content-Range: bytes 0-0/5", "ETag: \"x\""],
                    .success(PartialContent(served: ByteRange(0, 1), total: 5))
                ),
                (
                    "the largest size", [partial, "Content-Range: bytes 0-0/4611686018427387904"],
                    .success(PartialContent(served: ByteRange(0, 1), total: RemoteFile.largestSize))
                ),
                (
                    "a total beyond the largest size", [partial, "Content-Range: bytes 0-0/4611686018427387905"],
                    .failure(.implausibleTotal(4_611_686_018_427_387_905))
                ),
                (
                    "a total near Int64.max", [partial, "Content-Range: bytes 0-0/9223372036854775807"],
                    .failure(.implausibleTotal(Int64.max))
                ),
                ("unknown total", [partial, "Content-Range: bytes 0-0/*"], .failure(.contentRange("bytes 0-0/*"))),
                (
                    "more than the first byte", [partial, "Content-Range: bytes 0-1/5"],
                    .failure(.contentRange("bytes 0-1/5"))
                ),
                (
                    "gzip-encoded 206", [partial, "Content-Range: bytes 0-0/5", "Content-Encoding: gzip"],
                    .failure(.encoded("gzip"))
                ),
                ("200 of any length", ["HTTP/1.1 200 OK", "Content-Length: 5"], .failure(.rangeIgnored)),
                (
                    "416 of an empty file", ["HTTP/1.1 416 Range Not Satisfiable", "Content-Range: bytes */0"],
                    .failure(.status(416, retryAfter: nil))
                )
            ], request: .exactly(ByteRange(0, 1)), expected: .unknown)
    }

    /// The opening request for bytes 0-99: any answer from byte 0 that ends within it.
    func testTheOpeningRequestTakesAnyPrefixOfItsRange() {
        let partial = "HTTP/1.1 206 Partial Content"
        check(
            [
                (
                    "all of it", [partial, "Content-Range: bytes 0-99/1000"],
                    .success(PartialContent(served: ByteRange(0, 100), total: 1000))
                ),
                (
                    "a file shorter than the request", [partial, "Content-Range: bytes 0-49/50"],
                    .success(PartialContent(served: ByteRange(0, 50), total: 50))
                ),
                (
                    "a one-byte file", [partial, "Content-Range: bytes 0-0/1"],
                    .success(PartialContent(served: ByteRange(0, 1), total: 1))
                ),
                (
                    "past the request", [partial, "Content-Range: bytes 0-100/1000"],
                    .failure(.contentRange("bytes 0-100/1000"))
                ),
                (
                    "not from byte 0", [partial, "Content-Range: bytes 1-99/1000"],
                    .failure(.contentRange("bytes 1-99/1000"))
                ),
                (
                    "multipart",
                    [partial, "Content-Type: multipart/byteranges; boundary=x", "Content-Range: bytes 0-99/1000"],
                    .failure(.multipart)
                ),
                (
                    "gzip-encoded 206", [partial, "Content-Range: bytes 0-99/1000", "Content-Encoding: gzip"],
                    .failure(.encoded("gzip"))
                ),
                (
                    "a total beyond the largest size", [partial, "Content-Range: bytes 0-99/9223372036854775807"],
                    .failure(.implausibleTotal(Int64.max))
                ),
                ("200 with the whole file", ["HTTP/1.1 200 OK", "Content-Length: 1000"], .failure(.rangeIgnored))
            ], request: .prefix(of: ByteRange(0, 100)), expected: .unknown)
    }
}
