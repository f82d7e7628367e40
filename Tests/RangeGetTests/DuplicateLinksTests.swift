import XCTest

// DuplicateLinks: the mirrors a `Link: <URL>; rel=duplicate; pri=N` field
// lists (RFC 6249 over RFC 8288's syntax), row by row: the syntax, the
// order by `pri`, and what a server's header may not make a download do
// (loop, downgrade, leave http and https, carry credentials, cost much).
@testable import RangeGet

final class DuplicateLinksTests: XCTestCase {
    private let base = "http://a.example/dir/f.iso"

    /// The duplicates `field` lists, read from a response to `response` (`base`) for `given` (the same).
    private func duplicates(
        _ field: String?, response: String? = nil, given: String? = nil, downgrade: Bool = false
    ) -> [String] {
        DuplicateLinks(
            field: field, responseURL: response ?? base, givenURL: given ?? response ?? base,
            allowingDowngrade: downgrade
        ).duplicates
    }

    func testTheSyntaxOfRFC8288IsRead() {
        let rows: [(field: String, expected: [String], why: String)] = [
            ("<http://b.example/f.iso>; rel=duplicate", ["http://b.example/f.iso"], "a token"),
            ("<http://b.example/f.iso>; rel=\"duplicate\"", ["http://b.example/f.iso"], "a quoted string"),
            ("<http://b.example/f.iso> ; rel = duplicate ; pri = 3", ["http://b.example/f.iso"], "white space"),
            ("<http://b.example/f.iso>;rel=duplicate;pri=1", ["http://b.example/f.iso"], "no white space"),
            ("<http://b.example/f.iso>; REL=DUPLICATE", ["http://b.example/f.iso"], "names and types in any case"),
            ("<http://b.example/f.iso>; Rel=\"Duplicate\"", ["http://b.example/f.iso"], "mixed case, quoted"),
            (
                "<http://b.example/f.iso>; rel=\"alternate duplicate\"", ["http://b.example/f.iso"],
                "several relation types"
            ),
            ("<http://b.example/f.iso>; rel=\"alternate\tduplicate\"", ["http://b.example/f.iso"], "a tab between"),
            ("<http://b.example/f.iso>; rel=alternate", [], "another relation"),
            ("<http://b.example/f.iso>; rel=duplicates", [], "a relation type is a whole word"),
            ("<http://b.example/f.iso>", [], "no relation"),
            (
                "<http://b.example/f.iso>; rel=alternate; rel=duplicate", [],
                "rel given twice: the first one counts (RFC 8288 3)"
            ),
            (
                "<http://b.example/a,b.iso>; rel=duplicate", ["http://b.example/a,b.iso"],
                "a comma inside <...> is the URL's"
            ),
            (
                "<http://b.example/f.iso>; title=\"one, two; three\"; rel=duplicate", ["http://b.example/f.iso"],
                "a comma and a semicolon inside a quoted string are the string's"
            ),
            (
                "<http://b.example/f.iso>; title=\"say \\\"hi\\\", rel=x\"; rel=duplicate",
                ["http://b.example/f.iso"], "escaped quotes inside a quoted string"
            ),
            (
                "<http://b.example/f.iso>; rel=duplicate, <http://c.example/f.iso>; rel=duplicate",
                ["http://b.example/f.iso", "http://c.example/f.iso"], "several links in one value"
            ),
            (
                "<http://b.example/f.iso>; rel=duplicate, <http://c.example/f.iso>; rel=alternate, "
                    + "<http://d.example/f.iso>; rel=duplicate",
                ["http://b.example/f.iso", "http://d.example/f.iso"], "links of other relations among them"
            ),
            ("</mirror/f.iso>; rel=duplicate", ["http://a.example/mirror/f.iso"], "a path"),
            ("<g.iso>; rel=duplicate", ["http://a.example/dir/g.iso"], "a relative path"),
            ("<../g.iso>; rel=duplicate", ["http://a.example/g.iso"], "a relative path upward"),
            ("<//b.example/f.iso>; rel=duplicate", ["http://b.example/f.iso"], "a network-path reference"),
            (
                "<http://b.example/f.iso>; rel=duplicate; anchor=\"http://x.example/\"", [],
                "an anchor: the link is about another resource"
            ),
            (
                "<http://b.example/f.iso>; rel=duplicate; pri=1; pref; geo=gb; depth=2",
                ["http://b.example/f.iso"], "pref, geo and depth are read and not used"
            )
        ]
        for row in rows {
            XCTAssertEqual(duplicates(row.field), row.expected, row.why)
        }
    }

    func testSeveralLinkFieldsJoinedByTheCollectorAreReadAsOne() {
        let collector = HeaderCollector()
        for line in [
            "HTTP/1.1 200 OK\r\n", "Link: <http://b.example/f.iso>; rel=duplicate; pri=2\r\n",
            "Link: <http://c.example/f.iso>; rel=duplicate; pri=1\r\n", "\r\n"
        ] {
            collector.consume(line)
        }
        XCTAssertEqual(
            duplicates(collector.head["link"]), ["http://c.example/f.iso", "http://b.example/f.iso"])
    }

    func testTheLowestPriComesFirstAndALinkWithoutOneLast() {
        let field = [
            "<http://none.example/f>; rel=duplicate", "<http://five.example/f>; rel=duplicate; pri=5",
            "<http://one.example/f>; rel=duplicate; pri=1", "<http://zero.example/f>; rel=duplicate; pri=0",
            "<http://big.example/f>; rel=duplicate; pri=1000000", "<http://word.example/f>; rel=duplicate; pri=x",
            "<http://five-b.example/f>; rel=duplicate; pri=\"5\"", "<http://max.example/f>; rel=duplicate; pri=999999"
        ].joined(separator: ", ")
        XCTAssertEqual(
            duplicates(field),
            [
                "http://one.example/f", "http://five.example/f", "http://five-b.example/f",
                // 999999 and no pri (or one out of 1...999999) are one rank, in the order sent.
                "http://none.example/f", "http://zero.example/f", "http://big.example/f", "http://word.example/f",
                "http://max.example/f"
            ])
    }

    func testALinkBackToTheFileOrTwiceToOneMirrorIsTakenOnce() {
        let rows: [(field: String, response: String?, given: String?, expected: [String], why: String)] = [
            ("<\(base)>; rel=duplicate", nil, nil, [], "the response's own URL"),
            ("<f.iso>; rel=duplicate", nil, nil, [], "the same, relative"),
            ("<HTTP://A.EXAMPLE:80/dir/f.iso#x>; rel=duplicate", nil, nil, [], "the same, spelled otherwise"),
            (
                "<http://a.example/dir/f.iso>; rel=duplicate", "http://cdn.example/f.iso", base, [],
                "the URL the user gave, after a redirect"
            ),
            (
                "<http://cdn.example/f.iso>; rel=duplicate", "http://cdn.example/f.iso", base, [],
                "the URL the redirect led to"
            ),
            (
                "<http://b.example/f.iso>; rel=duplicate; pri=2, <http://B.example/f.iso>; rel=duplicate; pri=1",
                nil, nil, ["http://b.example/f.iso"], "one mirror twice: the first sent"
            ),
            (
                "<http://b.example/f.iso?v=1>; rel=duplicate, <http://b.example/f.iso?v=2>; rel=duplicate", nil,
                nil, ["http://b.example/f.iso?v=1", "http://b.example/f.iso?v=2"], "another query is another URL"
            )
        ]
        for row in rows {
            XCTAssertEqual(duplicates(row.field, response: row.response, given: row.given), row.expected, row.why)
        }
    }

    func testAnHTTPSFileTakesNoHTTPMirrorUnlessTheCallerAllowsIt() {
        let field = "<http://b.example/f.iso>; rel=duplicate, <https://c.example/f.iso>; rel=duplicate"
        let secure = "https://a.example/f.iso"
        XCTAssertEqual(duplicates(field, response: secure), ["https://c.example/f.iso"])
        XCTAssertEqual(
            duplicates(field, response: secure, downgrade: true), ["http://b.example/f.iso", "https://c.example/f.iso"])
        XCTAssertEqual(
            duplicates(field, response: "http://cdn.example/f.iso", given: secure), ["https://c.example/f.iso"],
            "an https URL redirected to http still takes no http mirror")
        XCTAssertEqual(
            duplicates(field), ["http://b.example/f.iso", "https://c.example/f.iso"], "an http file takes both")
        XCTAssertEqual(duplicates("</f2.iso>; rel=duplicate", response: secure), ["https://a.example/f2.iso"])
    }

    func testOnlyHTTPAndHTTPSURLsWithAHostAndNoCredentialsAreTaken() {
        for target in [
            "javascript:alert(1)", "file:///etc/passwd", "data:text/plain,hi", "ftp://b.example/f.iso",
            "mailto:x@example.org", "http://", "http:///f.iso", "http://user:secret@b.example/f.iso",
            "http://user@b.example/f.iso", "http://b.example/f iso"
        ] {
            XCTAssertEqual(duplicates("<\(target)>; rel=duplicate"), [], target)
        }
        XCTAssertEqual(
            duplicates("<HTTPS://B.example/f.iso>; rel=duplicate"), ["HTTPS://B.example/f.iso"],
            "a scheme in capitals is still https")
    }

    func testAMetalinkDescriptionIsReturnedApart() {
        let field =
            "<http://a.example/f.iso.meta4>; rel=describedby; type=\"application/metalink4+xml\", "
            + "<http://a.example/f.iso.torrent>; rel=describedby; type=\"application/x-bittorrent\", "
            + "<http://b.example/f.iso>; rel=duplicate, "
            + "<http://b.example/f.iso.meta4>; rel=describedby; type=Application/Metalink4+XML, "
            + "<javascript:x>; rel=describedby; type=\"application/metalink4+xml\""
        let links = DuplicateLinks(field: field, responseURL: base, givenURL: base)
        XCTAssertEqual(links.duplicates, ["http://b.example/f.iso"])
        XCTAssertEqual(links.describedBy, ["http://a.example/f.iso.meta4", "http://b.example/f.iso.meta4"])
    }

    func testHundredsOfLinksAreCheapAndBounded() {
        let many = (1...500).map { "<http://m\($0).example/f.iso>; rel=duplicate; pri=\(501 - $0)" }
        let started = Date()
        let links = DuplicateLinks(field: many.joined(separator: ", "), responseURL: base, givenURL: base)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "500 links read in well under a second")
        XCTAssertEqual(DuplicateLinks.links(in: many.joined(separator: ", ")).count, DuplicateLinks.maxLinks)
        // The first 256 are read; the best 16 of them by pri are kept.
        XCTAssertEqual(links.duplicates.count, DuplicateLinks.maxMirrors)
        XCTAssertEqual(links.duplicates.first, "http://m256.example/f.iso")
        XCTAssertEqual(links.duplicates.last, "http://m241.example/f.iso")

        // 20 mirrors: the 16 best by pri.
        let twenty = (1...20).map { "<http://m\($0).example/f>; rel=duplicate; pri=\(21 - $0)" }
        let best = duplicates(twenty.joined(separator: ","))
        XCTAssertEqual(best, (5...20).reversed().map { "http://m\($0).example/f" })

        // A value past 64 KiB: the link the limit cuts (after `pri=1` of
        // `pri=12`) is dropped, not read short; the one before it is kept.
        let (before, cutLink) = (
            "<http://a2.example/f>; rel=duplicate; pri=50", ", <http://b.example/f>; rel=duplicate; pri=1"
        )
        let padding = String(
            repeating: "x", count: DuplicateLinks.maxFieldBytes - before.utf8.count - cutLink.utf8.count - 27)
        let head = before + "; title=\"" + padding + "\"" + String(repeating: " ", count: 17) + cutLink
        XCTAssertEqual(head.utf8.count, DuplicateLinks.maxFieldBytes)
        XCTAssertEqual(duplicates(head + "2, <http://c.example/f>; rel=duplicate"), ["http://a2.example/f"])
        XCTAssertEqual(duplicates(head), ["http://b.example/f", "http://a2.example/f"], "not cut: read whole")

        // Malformed links count too: a long run of them costs one pass.
        let garbage = String(repeating: "<", count: 60_000) + ", <http://b.example/f>; rel=duplicate"
        let scanned = Date()
        XCTAssertEqual(duplicates(garbage), [], "one link whose target runs from the first < to the only >")
        XCTAssertEqual(duplicates(String(repeating: "<a", count: 30_000)), [])
        XCTAssertEqual(duplicates(String(repeating: "x,", count: 30_000)), [])
        XCTAssertLessThan(Date().timeIntervalSince(scanned), 1)
    }

    func testMalformedValuesNeverCrashAndSpoilOnlyTheirOwnLink() {
        let good = "<http://b.example/f.iso>; rel=duplicate"
        let rows: [(field: String, expected: [String], why: String)] = [
            ("", [], "empty"),
            (",,, ,", [], "only commas"),
            ("<", [], "an open bracket"),
            ("<>", [], "an empty target"),
            ("<<>>; rel=duplicate", [], "brackets in brackets"),
            (";;;", [], "only semicolons"),
            ("<http://b.example/f.iso>; rel=\"duplicate", [], "a quote never closed"),
            ("<http://b.example/f.iso>; rel=\"duplicate\\", [], "a backslash at the end"),
            ("<http://b.example/f.iso> junk; rel=duplicate, \(good)", ["http://b.example/f.iso"], "stray text"),
            ("http://x.example/f; rel=duplicate, \(good)", ["http://b.example/f.iso"], "no brackets"),
            ("<http://x.example/f>; =duplicate, \(good)", ["http://b.example/f.iso"], "a value without a name"),
            ("<http://x.example/f>; rel=\"a,\" junk, \(good)", ["http://b.example/f.iso"], "junk after a quote"),
            ("<http://b.example/\u{1F600}.iso>; rel=duplicate", [], "a character no URL holds unescaped"),
            (
                "<http://b.example/f.iso>; rel=duplicate; pri=99999999999999999999", ["http://b.example/f.iso"],
                "a huge pri"
            )
        ]
        for row in rows {
            XCTAssertEqual(duplicates(row.field), row.expected, row.why)
        }
        var random = SystemRandomNumberGenerator()
        let alphabet = Array("<>;,=\"\\ \tabc:/.rel=duplicate pri=1 http://b.example/\u{0}\u{FF}")
        for _ in 0..<2_000 {
            let length = Int.random(in: 0..<80, using: &random)
            let field = String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
            for url in duplicates(field) {
                XCTAssertNil(RemoteURL.problem(url), "\(field) gave \(url)")
            }
        }
    }
}
