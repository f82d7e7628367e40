import XCTest

// Metalink digests: the whole file's <hash> (the strongest rangeget knows)
// and its <pieces>, and every way a file's digests can keep it from being
// an entry: bad hex, only unknown types, pieces that do not fit its size.
@testable import RangeGet

extension MetalinkTests {
    func testTheStrongestKnownHashIsTheChecksum() throws {
        let hashes = [
            ("MD5", Self.digest(1, length: 32)), ("whirlpool", "zz"), ("sha-512", Self.digest(2, length: 128)),
            ("SHA256", Self.digest(3, length: 64)), ("Sha-1", Self.digest(4, length: 40))
        ].map { "<hash type=\"\($0)\">\($1)</hash>" }
        let document = Self.metalink4(Self.file("a.iso", hashes.joined()))
        let file = try XCTUnwrap(Metalink(parsing: document).files.first)
        XCTAssertEqual(file.checksums.map(\.algorithm), [.sha512, .sha256, .sha1, .md5], "any case, with or without -")
        XCTAssertEqual(try Self.list(document).entries.first?.checksum?.algorithm, .sha512, "whirlpool ignored")
    }

    func testAHashMustBeHexOfItsLength() throws {
        let rows: [(hash: String, problem: String?)] = [
            ("<hash type=\"sha-256\">\(Self.digest(1, length: 64).uppercased())</hash>", nil),
            ("<hash type=\"sha-256\">\n  \(Self.digest(1, length: 64))\n</hash>", nil),
            ("<hash type=\"sha-256\">\(Self.digest(1, length: 63))</hash>", "its sha-256 <hash> is not 64 hex digits"),
            (
                "<hash type=\"sha-1\">\(String(repeating: "g", count: 40))</hash>",
                "its sha-1 <hash> is not 40 hex digits"
            ),
            (
                "<hash type=\"sha-256\">\(Self.digest(1, length: 64))</hash>"
                    + "<hash type=\"sha256\">\(Self.digest(2, length: 64))</hash>",
                "it has two different sha256 <hash>es"
            ),
            ("<hash type=\"whirlpool\">00</hash>", "it publishes only hashes rangeget cannot check: whirlpool"),
            (
                "<hash type=\"whirlpool\">00</hash><hash type=\"crc32\">00</hash><hash>00</hash>",
                "it publishes only hashes rangeget cannot check: whirlpool, crc32, (no type)"
            )
        ]
        for row in rows {
            let list = try Self.list(Self.metalink4(Self.file("a.iso", row.hash)))
            if let problem = row.problem {
                XCTAssertEqual(list.problems.map(\.message), ["metalink line 3: file 'a.iso': " + problem], row.hash)
            } else {
                XCTAssertEqual(list.entries.first?.checksum?.hex, Self.digest(1, length: 64), row.hash)
            }
        }
    }

    /// `count` SHA-1 piece hashes of `length` bytes (`type`), for a file of `size`.
    private static func pieces(
        _ count: Int, length: String = "1024", type: String = "sha-1", size: String? = "4096", bad: Int? = nil
    ) -> String {
        let hashes = (0..<count).map { "<hash>\($0 == bad ? "not hex" : digest($0, length: 40))</hash>" }
        let pieces = "<pieces length=\"\(length)\" type=\"\(type)\">\(hashes.joined())</pieces>"
        return metalink4(file("a.iso", (size.map { "<size>\($0)</size>" } ?? "") + pieces))
    }

    func testPiecesMustBeReadableAndFitTheSize() throws {
        XCTAssertEqual(try Self.list(Self.pieces(4)).entries.first?.pieces?.count, 4)
        XCTAssertEqual(try Self.list(Self.pieces(4, size: "3073")).entries.first?.pieces?.count, 4, "a short last")
        let prefix = "metalink line 3: file 'a.iso': "
        let rows: [(document: String, problem: String)] = [
            (Self.pieces(5), "its 5 <pieces> of 1024 bytes do not fit its size of 4096 bytes, which has 4"),
            (Self.pieces(3), "its 3 <pieces> of 1024 bytes do not fit its size of 4096 bytes, which has 4"),
            (Self.pieces(1, size: "0"), "its 1 <pieces> of 1024 bytes do not fit its size of 0 bytes, which has 0"),
            (Self.pieces(4, size: nil), "its <pieces> need a <size>"),
            (Self.pieces(4, bad: 2), "piece 2 of its sha-1 <pieces> is not 40 hex digits"),
            (Self.pieces(4, length: "0"), "its <pieces> length '0' is not a positive integer"),
            (Self.pieces(4, length: "-1024"), "its <pieces> length '-1024' is not a positive integer"),
            (Self.pieces(4, length: "1k"), "its <pieces> length '1k' is not a positive integer"),
            (Self.pieces(0), "its sha-1 <pieces> list no hashes"),
            (Self.pieces(4, type: "tiger"), "it publishes only piece hashes rangeget cannot check: tiger")
        ]
        for row in rows {
            XCTAssertEqual(try Self.problem(row.document), prefix + row.problem)
        }
    }

    func testTheStrongestKnownPiecesAreTaken() throws {
        let sets = [("tiger", 40), ("md5", 32), ("sha-256", 64), ("sha-1", 40)].map { type, length in
            "<pieces length=\"4096\" type=\"\(type)\"><hash>\(Self.digest(1, length: length))</hash></pieces>"
        }
        let document = Self.metalink4(Self.file("a.iso", "<size>10</size>" + sets.joined()))
        XCTAssertEqual(try Self.list(document).entries.first?.pieces?.algorithm, .sha256, "tiger ignored")
    }

    func testVersion3PiecesAreNumberedWithoutGapsOrRepeats() throws {
        let rows: [(numbers: [String?], fine: Bool)] = [
            (["2", "0", "1"], true), (["0", "2"], false), (["0", "1", "1"], false), (["1", "2"], false),
            (["0", nil], false), (["0", "x"], false)
        ]
        for row in rows {
            let hashes = row.numbers.enumerated().map { index, number in
                "<hash\(number.map { " piece=\"\($0)\"" } ?? "")>\(Self.digest(index, length: 40))</hash>"
            }
            let document = """
                <metalink xmlns="http://www.metalinker.org/"><files><file name="a.iso"><size>\(row.numbers.count)</size>
                <verification><pieces type="sha1" length="1">\(hashes.joined())</pieces></verification>
                <resources><url>https://a.example/a.iso</url></resources></file></files></metalink>
                """
            let list = try Self.list(document)
            if row.fine {
                XCTAssertEqual(list.entries.first?.pieces?.hex(ofPiece: 0), Self.digest(1, length: 40), "\(row)")
            } else {
                XCTAssertEqual(
                    list.problems.map(\.message),
                    ["metalink line 1: file 'a.iso': its sha1 <pieces> are not numbered 0, 1, 2 and on, each once"],
                    "\(row)")
            }
        }
    }
}
