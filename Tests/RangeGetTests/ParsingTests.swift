import Foundation
import SystemSupport
import XCTest

@testable import RangeGet

final class ContentRangeTests: XCTestCase {
    func testParsesValidAndRejectsInvalidValues() {
        let cases: [(String, ByteRange?, Int64?, Bool)] = [
            // value, range, total, parses
            ("bytes 0-0/1", ByteRange(0, 1), 1, true),
            ("bytes 0-99/1000", ByteRange(0, 100), 1000, true),
            ("bytes 100-199/*", ByteRange(100, 200), nil, true),
            ("bytes */1000", nil, 1000, true),
            ("bytes */0", nil, 0, true),
            ("  bytes 5-9/10 ", ByteRange(5, 10), 10, true),
            ("bytes 2147483647-2147483648/4294967297", ByteRange(2_147_483_647, 2_147_483_649), 4_294_967_297, true),
            ("bytes 4294967295-4294967296/4294967297", ByteRange(4_294_967_295, 4_294_967_297), 4_294_967_297, true),
            ("bytes 5368709120-5368709121/6442450944", ByteRange(5_368_709_120, 5_368_709_122), 6_442_450_944, true),
            ("bytes 9-5/10", nil, nil, false), // last < first
            ("bytes 5-10/10", nil, nil, false), // last beyond total
            ("items 0-1/2", nil, nil, false), // other unit
            ("bytes 0-1", nil, nil, false), // no total
            ("bytes -1-5/10", nil, nil, false),
            ("bytes 0-1/x", nil, nil, false),
            ("bytes */*", nil, nil, false),
            ("bytes 0-99999999999999999999/1", nil, nil, false),
            ("", nil, nil, false)
        ]
        for (value, range, total, parses) in cases {
            let parsed = ContentRange(value)
            XCTAssertEqual(parsed != nil, parses, value)
            if parses {
                XCTAssertEqual(parsed?.range, range, value)
                XCTAssertEqual(parsed?.total, total, value)
            }
        }
    }

    func testRangeHeaderIsInclusive() {
        XCTAssertEqual(ByteRange(0, 1).rangeHeaderValue, "bytes=0-0")
        XCTAssertEqual(ByteRange(4_294_967_296, 4_294_967_396).rangeHeaderValue, "bytes=4294967296-4294967395")
    }

    func testAnOpenEndedRangeHasNoLastByte() {
        XCTAssertEqual(ByteRange(0, .max).rangeHeaderValue, "bytes=0-")
        XCTAssertEqual(ByteRange(5, .max).rangeHeaderValue, "bytes=5-")
    }
}

final class FileNameTests: XCTestCase {
    func testChoosesASafeBaseName() {
        let cases: [(url: String, disposition: String?, expected: String)] = [
            ("http://h/dir/file.iso", nil, "file.iso"),
            ("http://h/dir/file%20name.iso?x=1", nil, "file name.iso"),
            ("http://h/", nil, "index.html"),
            ("http://h", nil, "index.html"),
            ("http://h/a", "attachment; filename=\"report.pdf\"", "report.pdf"),
            ("http://h/a", "attachment; filename=plain.txt", "plain.txt"),
            ("http://h/a", "attachment; filename*=UTF-8''%E2%82%AC%20rates.txt; filename=\"rates.txt\"", "€ rates.txt"),
            ("http://h/a", "attachment; filename=\"../../etc/passwd\"", "passwd"),
            ("http://h/a", "attachment; filename=\"..\\\\windows\\\\evil.exe\"", "evil.exe"),
            ("http://h/a", "attachment; filename=\".bashrc\"", "bashrc"),
            ("http://h/a", "attachment; filename=\"..\"", "a"),
            ("http://h/a", "attachment; filename=\"bad\u{07}name\u{1B}.txt\"", "badname.txt"),
            ("http://h/%2e%2e%2fsecret", nil, "secret"),
            ("http://h/x/.hidden", nil, "hidden"),
            ("http://h/a", "inline", "a")
        ]
        for (url, disposition, expected) in cases {
            XCTAssertEqual(
                FileName.choose(url: url, contentDisposition: disposition), expected, "\(url) \(disposition ?? "")")
        }
    }
}

extension FileNameTests {
    /// The URL's last segment, read by hand, is URLComponents' reading for
    /// every URL a download accepts: queries and fragments with slashes,
    /// credentials, ports, IPv6 hosts, no path at all.
    func testTheURLsLastSegmentIsURLComponentsReading() throws {
        let urls = [
            "http://h/dir/file.iso", "http://h/dir/file.iso?x=1#frag", "http://h", "http://h/", "http://h?q=/a/b",
            "http://h#frag/x", "https://user:pa%2Fss@h:8443/a/b/c.tar.gz", "http://[::1]:8080/x%20y",
            "http://h/a/b/", "http://h//double//slash", "HTTPS://H/UPPER.ISO", "http://h/a;param/b;v=1",
            "http://h/%E2%82%AC.txt?download=1", "http://h/a?b=c/d.iso", "http://127.0.0.1:1/?x#y"
        ]
        for url in urls {
            let components = try XCTUnwrap(URLComponents(string: url), url)
            let reference = components.percentEncodedPath.split(separator: "/").last
                .map { percentDecoded($0) ?? String($0) }
            XCTAssertEqual(FileName.fromURL(url), reference, url)
        }
    }
}

final class ResponseCheckTests: XCTestCase {
    private func head(_ lines: [String]) -> ResponseHead {
        .collected(lines.map { $0 + "\r\n" } + ["\r\n"])
    }

    func testOnlyAnExactMatchingPartialResponseIsAccepted() {
        let expected = Expectation(size: 1000, etag: "\"v1\"", lastModified: nil)
        let asked = ByteRange(100, 200)
        let cases: [(lines: [String], verdict: Rejection?)] = [
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 100-199/1000", "ETag: \"v1\""], nil),
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 100-199/1000"], nil),
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 99-198/1000"], .contentRange("bytes 99-198/1000")),
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 100-200/1000"], .contentRange("bytes 100-200/1000")),
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 100-199/*"], .contentRange("bytes 100-199/*")),
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 199-100/1000"], .contentRange("bytes 199-100/1000")),
            (["HTTP/1.1 206 Partial"], .contentRange(nil)),
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 100-199/2000"], .otherTotal(2000)),
            (
                ["HTTP/1.1 206 Partial", "Content-Range: bytes 100-199/1000", "ETag: \"v2\""],
                .changed("its ETag is now \"v2\", not \"v1\"")
            ),
            (["HTTP/1.1 206 Partial", "Content-Range: bytes 100-199/1000", "Content-Encoding: gzip"], .encoded("gzip")),
            (["HTTP/1.1 206 Partial", "Content-Type: multipart/byteranges; boundary=x"], .multipart),
            (["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v1\""], .rangeIgnored),
            (
                ["HTTP/1.1 200 OK", "Content-Length: 1000", "ETag: \"v2\""],
                .changed("its ETag is now \"v2\", not \"v1\"")
            ),
            (["HTTP/1.1 200 OK", "Content-Length: 999"], .changed("its size is now 999 bytes, not 1000")),
            (["HTTP/1.1 503 Busy", "Retry-After: 7"], .status(503, retryAfter: 7)),
            (["HTTP/1.1 403 Forbidden"], .status(403, retryAfter: nil)),
            (["HTTP/1.1 416 Unsatisfiable", "Content-Range: bytes */500"], .otherTotal(500)),
            (
                ["HTTP/1.1 302 Found", "Location: /x", "", "HTTP/1.1 206 Partial", "Content-Range: bytes 100-199/1000"],
                nil
            )
        ]
        for (lines, verdict) in cases {
            XCTAssertEqual(ResponseCheck.check(head(lines), requested: asked, expected: expected), verdict, "\(lines)")
        }
    }

    func testPlainStreamAcceptsOnly200OfTheRightLength() {
        let expected = Expectation(size: 10, etag: nil, lastModified: "Mon, 01 Jan 2024 00:00:00 GMT")
        XCTAssertNil(
            ResponseCheck.check(head(["HTTP/1.1 200 OK", "Content-Length: 10"]), requested: nil, expected: expected))
        XCTAssertEqual(
            ResponseCheck.check(head(["HTTP/1.1 200 OK", "Content-Length: 11"]), requested: nil, expected: expected),
            .changed("its length is now 11 bytes, not 10"))
        XCTAssertEqual(
            ResponseCheck.check(
                head(["HTTP/1.1 200 OK", "Last-Modified: Tue, 02 Jan 2024 00:00:00 GMT"]),
                requested: nil, expected: expected),
            .changed("its Last-Modified is now Tue, 02 Jan 2024 00:00:00 GMT, not Mon, 01 Jan 2024 00:00:00 GMT"))
        XCTAssertEqual(
            ResponseCheck.check(head(["HTTP/1.1 404 Not Found"]), requested: nil, expected: expected),
            .status(404, retryAfter: nil))
    }

    func testIfRangeUsesOnlyStrongValidators() {
        func remote(etag: String?, lastModified: String?) -> RemoteFile {
            RemoteFile(
                url: "http://h/f", effectiveURL: "http://h/f", size: 1, etag: etag,
                lastModified: lastModified, acceptsRanges: true, contentDisposition: nil)
        }
        XCTAssertEqual(remote(etag: "\"a\"", lastModified: "date").ifRange, "\"a\"")
        XCTAssertNil(remote(etag: "W/\"a\"", lastModified: "date").ifRange)
        XCTAssertEqual(remote(etag: nil, lastModified: "date").ifRange, "date")
        XCTAssertNil(remote(etag: nil, lastModified: nil).ifRange)
    }
}

/// The key under which a list's loop keeps each server's wait for a first
/// byte (TransferLoop.server(of:)): one server however its URLs spell it.
final class ServerKeyTests: XCTestCase {
    func testOneKeyPerServer() {
        let key = TransferLoop.server(of:)
        XCTAssertEqual(key("http://example.org/a/b?q"), "http://example.org")
        XCTAssertEqual(key("HTTP://Example.ORG:80/x"), "http://example.org")
        XCTAssertEqual(key("https://h:443"), "https://h")
        XCTAssertEqual(key("https://h:8443/x"), "https://h:8443")
        XCTAssertEqual(key("http://h:8080/x"), "http://h:8080")
        XCTAssertEqual(key("http://user:p%40ss@h:81/x"), "http://h:81")
        XCTAssertEqual(key("http://u:p@ss@h/x"), "http://h")
        XCTAssertEqual(key("http://[::1]:8080/x"), "http://[::1]:8080")
        XCTAssertEqual(key("http://[::80]/x"), "http://[::80]")
        XCTAssertEqual(key("http://h?x@y"), "http://h")
        XCTAssertEqual(key("http://h#f"), "http://h")
        XCTAssertNotEqual(key("http://h/"), key("https://h/"))
    }
}
