import Foundation
import XCTest

// Metalink: documents of versions 4 (RFC 5854) and 3 read into files, and
// the files into a list's entries, each rule a row: which URLs, which name,
// which size, which digest; a file that breaks one is a problem naming it.
// The refusals that keep a document from harming the reader are in
// MetalinkSafetyTests.swift.
@testable import RangeGet

final class MetalinkTests: XCTestCase {
    /// Hex digests of `length` digits, different for each `seed`.
    static func digest(_ seed: Int, length: Int) -> String {
        String(String(format: "%0\(length)x", seed).suffix(length))
    }

    /// A version 4 document around `body` (which starts on line 3).
    static func metalink4(_ body: String) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <metalink xmlns="urn:ietf:params:xml:ns:metalink">
        \(body)
        </metalink>
        """
    }

    /// A version 4 `<file>` named `name` with a mirror and `inner`, on one line.
    static func file(_ name: String = "a.iso", _ inner: String = "") -> String {
        "<file name=\"\(name)\"><url>https://a.example/\(name)</url>\(inner)</file>"
    }

    /// The list of a document, which must be read.
    static func list(_ document: String, file: StaticString = #filePath, line: UInt = #line) throws -> ListFile {
        try Metalink(parsing: document).list
    }

    /// The one problem of a document of one file that is refused.
    static func problem(_ document: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let list = try Metalink(parsing: document).list
        XCTAssertEqual(list.entries, [], file: file, line: line)
        XCTAssertEqual(list.problems.count, 1, file: file, line: line)
        return list.problems.first?.message ?? ""
    }

    /// RFC 5854's example (section 1.1), its elided digest written out,
    /// with the pieces section 4.2.12 describes and a third mirror.
    func testTheRFCExampleIsOneEntry() throws {
        let pieces = (0..<56).map { "<hash>\(Self.digest($0, length: 40))</hash>" }.joined(separator: "\n")
        let document = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink">
              <published>2009-05-15T12:23:23Z</published>
              <file name="example.ext">
                <size>14471447</size>
                <identity>Example</identity>
                <version>1.0</version>
                <language>en</language>
                <description>
                A description of the example file for download.
                </description>
                <hash type="sha-256">\(Self.digest(1, length: 64))</hash>
                <pieces length="262144" type="sha-1">
            \(pieces)
                </pieces>
                <url location="de" priority="1">ftp://ftp.example.com/example.ext</url>
                <url location="fr" priority="1">http://example.com/example.ext</url>
                <url location="jp" priority="2">https://example.jp/example.ext</url>
                <metaurl mediatype="torrent" priority="2">http://example.com/example.ext.torrent</metaurl>
              </file>
            </metalink>
            """
        let metalink = try Metalink(parsing: document)
        XCTAssertEqual(metalink.files.count, 1)
        let file = try XCTUnwrap(metalink.files.first)
        XCTAssertEqual(file.name, "example.ext")
        XCTAssertEqual(file.size, 14_471_447)
        XCTAssertEqual(file.line, 4)
        XCTAssertEqual(file.mirrors.map(\.location), ["de", "fr", "jp"])
        XCTAssertEqual(file.mirrors.map(\.priority), [1, 1, 2])
        XCTAssertEqual(file.checksums, [Checksum(algorithm: .sha256, hex: Self.digest(1, length: 64))!])
        XCTAssertEqual(file.pieces?.algorithm, .sha1)
        XCTAssertEqual(file.pieces?.length, 262_144)
        XCTAssertEqual(file.pieces?.count, 56)
        XCTAssertEqual(file.pieces?.hex(ofPiece: 55), Self.digest(55, length: 40))
        XCTAssertNil(file.problem)

        let list = metalink.list
        XCTAssertEqual(list.problems, [])
        let entry = try XCTUnwrap(list.entries.first)
        XCTAssertEqual(entry.urls, ["http://example.com/example.ext", "https://example.jp/example.ext"], "no ftp")
        XCTAssertEqual(entry.output, "example.ext")
        XCTAssertEqual(entry.line, 4)
        XCTAssertEqual(entry.size, 14_471_447)
        XCTAssertEqual(entry.checksum, file.checksums.first)
        XCTAssertEqual(entry.pieces, file.pieces)
    }

    /// Version 3: files under <files>, digests under <verification>, mirrors
    /// under <resources> by preference (100 first), pieces by number.
    func testAMetalink3DocumentIsRead() throws {
        let document = """
            <?xml version="1.0" encoding="UTF-8"?>
            <metalink version="3.0" xmlns="http://www.metalinker.org/">
              <files>
                <file name="tool.tar.gz">
                  <size>300000</size>
                  <verification>
                    <hash type="md5">\(Self.digest(7, length: 32))</hash>
                    <hash type="sha1">\(Self.digest(8, length: 40))</hash>
                    <pieces type="sha1" length="262144">
                      <hash piece="1">\(Self.digest(1, length: 40))</hash>
                      <hash piece="0">\(Self.digest(0, length: 40))</hash>
                    </pieces>
                  </verification>
                  <resources>
                    <url type="http" location="us" preference="50">http://us.example/tool.tar.gz</url>
                    <url type="bittorrent" preference="100">http://t.example/tool.tar.gz.torrent</url>
                    <url type="https" location="de" preference="100">https://de.example/tool.tar.gz</url>
                    <url type="ftp" preference="90">ftp://ftp.example/tool.tar.gz</url>
                  </resources>
                </file>
              </files>
            </metalink>
            """
        let file = try XCTUnwrap(Metalink(parsing: document).files.first)
        XCTAssertEqual(file.mirrors.map(\.priority), [51, 1, 11], "101 - preference; no torrent")
        XCTAssertEqual(file.checksums.map(\.algorithm), [.sha1, .md5], "strongest first")
        XCTAssertEqual(file.pieces?.hex(ofPiece: 0), Self.digest(0, length: 40), "by piece number")
        let entry = try XCTUnwrap(Self.list(document).entries.first)
        XCTAssertEqual(entry.urls, ["https://de.example/tool.tar.gz", "http://us.example/tool.tar.gz"])
        XCTAssertEqual(entry.checksum?.algorithm, .sha1)
        XCTAssertEqual(entry.size, 300_000)
        XCTAssertEqual(entry.line, 4)
    }

    func testEachFileIsAnEntryAndABadOneOnlyItsOwnProblem() throws {
        let document = Self.metalink4(
            [Self.file("one.iso"), Self.file("two/../x.iso"), Self.file("three.iso"), Self.file("one.iso")]
                .joined(separator: "\n"))
        let list = try Self.list(document)
        XCTAssertEqual(list.entries.map(\.output), ["one.iso", "three.iso"])
        XCTAssertEqual(list.entries.map(\.line), [3, 5])
        XCTAssertEqual(list.problems.map(\.line), [4, 6])
        XCTAssertEqual(
            list.problems.last?.message, "metalink line 6: file 'one.iso': a second file of that name (line 3)")
    }

    func testMirrorsGoByPriorityWithoutRepeats() throws {
        let urls = [
            ("https://none.example/f", nil), ("https://three.example/f", "3"), ("https://one.example/f", "1"),
            ("https://later.example/f", nil), ("https://one.example/f", "2"), ("https://two.example/f", " 2 "),
            ("https://bad.example/f", "0"), ("https://high.example/f", "x")
        ]
        let body = urls.map { url, priority in "<url\(priority.map { " priority=\"\($0)\"" } ?? "")>\(url)</url>" }
        let list = try Self.list(Self.metalink4("<file name=\"f\">\(body.joined())</file>"))
        XCTAssertEqual(
            list.entries.first?.urls,
            [
                "https://one.example/f", "https://two.example/f", "https://three.example/f", "https://none.example/f",
                "https://later.example/f", "https://bad.example/f", "https://high.example/f"
            ], "1 first, none last (nor an unreadable one), stable, each once")

        let many = (0..<70).map { "<url>https://m\($0).example/f</url>" }.joined()
        let kept = try Self.list(Self.metalink4("<file name=\"f\">\(many)</file>")).entries.first?.urls
        XCTAssertEqual(kept?.count, 64)
        XCTAssertEqual(kept?.last, "https://m63.example/f")
    }

    func testOnlyHTTPAndHTTPSMirrorsAreUsed() throws {
        let mixed = "<url>ftp://a.example/f</url><url>HTTPS://B.example/f</url><url>file:///etc/passwd</url>"
        XCTAssertEqual(
            try Self.list(Self.metalink4("<file name=\"f\">\(mixed)</file>")).entries.first?.urls,
            ["HTTPS://B.example/f"])
        let none = """
            <file name="f"><url>ftp://a.example/f</url><url>file:///etc/passwd</url>\
            <url>javascript:alert(1)</url><url>FTP://b.example/f</url><url>https://</url><url>nothing</url></file>
            """
        XCTAssertEqual(
            try Self.problem(Self.metalink4(none)),
            "metalink line 3: file 'f': no http or https URL (it lists ftp:, file:, javascript:, 'https://', 'nothing')"
        )
        XCTAssertEqual(
            try Self.problem(Self.metalink4("<file name=\"f\"><size>1</size></file>")),
            "metalink line 3: file 'f': no http or https URL (it lists none)")
    }

    func testANameMustBeAPlainNameInTheOutputDirectory() throws {
        let directory = "rangeget saves Metalink files in the output directory"
        let rows: [(name: String, problem: String?)] = [
            ("plain-1.0.tar.gz", nil),
            ("naïve résumé.pdf", nil),
            ("", "metalink line 3: a <file> without a name"),
            ("/etc/passwd", "file '/etc/passwd': an absolute name is not supported; \(directory)"),
            ("a/b.iso", "file 'a/b.iso': a name with a directory part is not supported; \(directory)"),
            ("../b.iso", "file '../b.iso': a name with a '..' component is not supported; \(directory)"),
            ("a/../b.iso", "file 'a/../b.iso': a name with a '..' component is not supported; \(directory)"),
            ("./b.iso", "file './b.iso': a name with a '.' component is not supported; \(directory)"),
            ("..", "file '..': a name with a '..' component is not supported; \(directory)"),
            ("a\\b.iso", "file 'a\\b.iso': a name with a backslash is not supported; \(directory)"),
            ("a&#9;b.iso", "file 'a\\u{9}b.iso': a name with a control character is not supported"),
            ("a&#x85;b.iso", "file 'a\\u{85}b.iso': a name with a control character is not supported"),
            (".bashrc", "file '.bashrc': not a plain file name"),
            (" b.iso", "file ' b.iso': not a plain file name"),
            ("b\u{200B}.iso", "file 'b\u{200B}.iso': not a plain file name"),
            (String(repeating: "x", count: 201), "file '\(String(repeating: "x", count: 201))': not a plain file name")
        ]
        for row in rows {
            let list = try Self.list(Self.metalink4(Self.file(row.name)))
            if let problem = row.problem {
                XCTAssertEqual(list.entries, [], row.name)
                XCTAssert(list.problems.first?.message.contains(problem) == true, "\(row.name): \(list.problems)")
            } else {
                XCTAssertEqual(list.problems, [], row.name)
                XCTAssertEqual(list.entries.first?.output, row.name)
            }
        }
        let unnamed = try Self.list(Self.metalink4("<file><url>https://a.example/x</url></file>"))
        XCTAssertEqual(unnamed.problems.map(\.message), ["metalink line 3: a <file> without a name"])
    }

    func testASizeIsADecimalNumberOfBytes() throws {
        let rows: [(text: String, size: Int64?)] = [
            ("0", 0), ("14471447", 14_471_447), ("\n  42\t", 42), ("4611686018427387904", 1 << 62),
            ("4611686018427387905", nil), ("99999999999999999999", nil), ("-1", nil), ("+1", nil), ("1e3", nil),
            ("0x10", nil), ("", nil), ("12 34", nil), ("１２", nil)
        ]
        for row in rows {
            let list = try Self.list(Self.metalink4(Self.file("a.iso", "<size>\(row.text)</size>")))
            if let size = row.size {
                XCTAssertEqual(list.entries.first?.size, size, row.text)
            } else {
                let trimmed = row.text.trimmingCharacters(in: .whitespacesAndNewlines)
                XCTAssertEqual(
                    list.problems.first?.message,
                    "metalink line 3: file 'a.iso': <size> '\(trimmed)' is not a size in bytes "
                        + "(a decimal integer up to 2^62)", row.text)
            }
        }
    }
}
