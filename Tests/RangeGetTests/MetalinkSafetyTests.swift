import Foundation
import XCTest

// Metalink documents that must not be read: a DOCTYPE (entity expansion,
// external entities), one too large or with too many pieces, one that is
// not well-formed or not a Metalink. A Metalink may come from anyone; each
// refusal names what it refused.
@testable import RangeGet

extension MetalinkTests {
    /// The error reading `document` throws; fails when it reads.
    private func refusal(_ document: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            _ = try Metalink(parsing: document)
            XCTFail("read", file: file, line: line)
            return ""
        } catch {
            XCTAssertEqual(error.description, error.message, file: file, line: line)
            return error.message
        }
    }

    private func refusal(_ document: String, file: StaticString = #filePath, line: UInt = #line) -> String {
        refusal(Array(document.utf8), file: file, line: line)
    }

    private static let doctype =
        "declares a DOCTYPE (line 2); rangeget reads Metalink without DTDs or entities "
        + "(refusing it stops entity-expansion and external-entity attacks)"

    /// Billion laughs: ten entities of ten of the one before, 10^9 "lol"s.
    func testEntityExpansionIsRefusedAtTheDoctype() {
        let entities = (1...9).map { level in
            "<!ENTITY lol\(level) \"" + String(repeating: "&lol\(level - 1);", count: 10) + "\">"
        }
        let document = """
            <?xml version="1.0"?>
            <!DOCTYPE metalink [<!ENTITY lol0 "lol">\(entities.joined(separator: "\n"))]>
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="&lol9;">\
            <url>https://a.example/&lol9;</url></file></metalink>
            """
        let start = Date()
        XCTAssertEqual(refusal(document), "the Metalink " + Self.doctype)
        XCTAssertLessThan(Date().timeIntervalSince(start), 1)
    }

    /// External entities, in the document, in a DTD it names and as a
    /// parameter entity: none is opened.
    func testExternalEntitiesAreNeverRead() throws {
        let directory = NSTemporaryDirectory() + "metalink-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = "rangeget-secret-\(UUID().uuidString)"
        try Data(secret.utf8).write(to: URL(fileURLWithPath: directory + "/secret"))
        let dtd = "<!ENTITY xxe SYSTEM \"file://\(directory)/secret\">"
        try Data(dtd.utf8).write(to: URL(fileURLWithPath: directory + "/evil.dtd"))
        let body = """
            <metalink xmlns="urn:ietf:params:xml:ns:metalink"><file name="&xxe;">\
            <url>https://a.example/&xxe;</url><size>&xxe;</size></file></metalink>
            """
        let doctypes = [
            "<!DOCTYPE metalink [\(dtd)]>", "<!DOCTYPE metalink SYSTEM \"file://\(directory)/evil.dtd\">",
            "<!DOCTYPE metalink [<!ENTITY % p SYSTEM \"file://\(directory)/evil.dtd\"> %p;]>",
            "<!DOCTYPE metalink PUBLIC \"-//x//y\" \"http://127.0.0.1:9/evil.dtd\">", "<!DOCTYPE metalink>"
        ]
        for doctype in doctypes {
            let message = refusal("<?xml version=\"1.0\"?>\n\(doctype)\n" + body)
            XCTAssertEqual(message, "the Metalink " + Self.doctype, doctype)
            XCTAssertFalse(message.contains(secret), doctype)
        }
        // Without a DOCTYPE, an entity is not defined: nothing to look up.
        let undeclared = refusal(body)
        XCTAssertEqual(undeclared, "the Metalink is not well-formed XML: line 1: Entity 'xxe' not defined")
    }

    /// The five predefined entities, character references and CDATA are plain text.
    func testPredefinedEntitiesAndCDATAAreText() throws {
        let document = Self.metalink4(
            """
            <file name="a&amp;b.iso"><url>https://a.example/x?a=1&amp;b=&#50;</url>\
            <url><![CDATA[https://b.example/x?a=1&b=2]]></url></file>
            """)
        let entry = try XCTUnwrap(Self.list(document).entries.first)
        XCTAssertEqual(entry.output, "a&b.iso")
        XCTAssertEqual(entry.urls, ["https://a.example/x?a=1&b=2", "https://b.example/x?a=1&b=2"])
    }

    /// A million pieces in under 16 MiB: collected up to the most a file
    /// may have, then counted no more.
    func testAMillionPiecesAreRefused() throws {
        let parts = Self.metalink4(
            Self.file("big.iso", "<size>1099511627776</size><pieces length=\"1048576\" type=\"sha-1\">#</pieces>")
        ).split(separator: "#")
        var document = Array(parts[0].utf8)
        document.reserveCapacity(15_000_000)
        let hash = Array("<hash>0</hash>".utf8)
        for _ in 0..<1_000_000 { document += hash }
        document += Array(parts[1].utf8)
        XCTAssertLessThan(document.count, MetalinkReader.largestDocument)
        let list = try Metalink(parsing: document).list
        XCTAssertEqual(list.entries, [])
        XCTAssertEqual(
            list.problems.map(\.message),
            ["metalink line 3: file 'big.iso': it has more than 262144 <pieces>, more than rangeget checks"])
    }

    func testADocumentOver16MiBIsRefusedUnread() {
        let padding = [UInt8](repeating: UInt8(ascii: " "), count: MetalinkReader.largestDocument)
        let document = Array(Self.metalink4(Self.file()).utf8) + padding
        XCTAssertEqual(
            refusal(document),
            "the Metalink is \(document.count) bytes; rangeget reads Metalink documents of at most 16 MiB")
        XCTAssertNoThrow(try Metalink(parsing: Array(document.prefix(MetalinkReader.largestDocument))))
    }

    func testADocumentThatIsNotAMetalinkIsRefused() {
        let expected =
            "a Metalink's is <metalink> in urn:ietf:params:xml:ns:metalink (version 4) or "
            + "http://www.metalinker.org/ (version 3)"
        let rows: [(document: String, message: String)] = [
            ("", "the Metalink is empty"),
            (" \n\t\r\n", "the Metalink is empty"),
            (
                "<rss version=\"2.0\"><channel/></rss>",
                "not a Metalink document: its root element is <rss> in no namespace; "
            ),
            (
                "<metalink><file name=\"a\"/></metalink>",
                "not a Metalink document: its root element is <metalink> in no namespace; "
            ),
            (
                "<m:metalink xmlns:m=\"urn:example\"/>",
                "not a Metalink document: its root element is <metalink> in namespace 'urn:example'; "
            ),
            ("just text", "the Metalink is not well-formed XML: line 1: "),
            (Self.metalink4("<published>2009</published>"), "the Metalink lists no files"),
            (
                Self.metalink4("<file name=\"a.iso\">\n<url>https://a.example/a.iso</url>\n<size>1</size>"),
                "the Metalink is not well-formed XML: line 6: "
            )
        ]
        for row in rows {
            let message = refusal(row.document)
            XCTAssert(message.hasPrefix(row.message), "\(row.document): \(message)")
            if row.message.hasPrefix("not a Metalink document: its root") { XCTAssert(message.hasSuffix(expected)) }
        }
    }

    /// Elements of other namespaces are not Metalink's, wherever they are.
    func testElementsOfOtherNamespacesAreIgnored() throws {
        let document = Self.metalink4(
            """
            <x:file xmlns:x="urn:other" name="evil.iso"><url>https://evil.example/</url></x:file>
            <file name="a.iso" xmlns:x="urn:other"><x:url>https://evil.example/a.iso</x:url>\
            <x:wrap><url>https://evil.example/a.iso</url></x:wrap><url>https://a.example/a.iso</url></file>
            """)
        let list = try Self.list(document)
        XCTAssertEqual(list.entries.map(\.urls), [["https://a.example/a.iso"]])
        XCTAssertEqual(list.problems, [])
    }
}
