import XCTest

// PublishedDigest: the whole file's digest read from `Repr-Digest` (RFC
// 9530) and `Digest` (RFC 3230), row by row: the strongest of SHA-512 and
// SHA-256, `Repr-Digest` first, and nothing from a value that is not one.
@testable import RangeGet

final class PublishedDigestTests: XCTestCase {
    /// SHA-256 and SHA-512 of the empty string, as hex and as base64.
    private let sha256Hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    private let sha256Base64 = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    private let sha512Hex =
        "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"
    private let sha512Base64 =
        "z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="

    func testTheStrongestUsableDigestIsTaken() {
        let rows: [(headers: [String: String], expected: String?, field: String?, why: String)] = [
            (["repr-digest": "sha-256=:\(sha256Base64):"], "sha256=\(sha256Hex)", "repr-digest", "RFC 9530"),
            (
                ["repr-digest": "sha-256=:\(sha256Base64):, sha-512=:\(sha512Base64):"], "sha512=\(sha512Hex)",
                "repr-digest", "SHA-512 before SHA-256"
            ),
            (["digest": "SHA-256=\(sha256Base64)"], "sha256=\(sha256Hex)", "digest", "RFC 3230, any case"),
            (
                ["digest": "MD5=1B2M2Y8AsgTpgAmY7PhCfg==,SHA-256=\(sha256Base64)"], "sha256=\(sha256Hex)", "digest",
                "MD5 passed over"
            ),
            (
                ["repr-digest": "sha-256=:\(sha256Base64):", "digest": "SHA-512=\(sha512Base64)"],
                "sha256=\(sha256Hex)", "repr-digest", "Repr-Digest before Digest"
            ),
            (
                ["repr-digest": "md5=:1B2M2Y8AsgTpgAmY7PhCfg==:", "digest": "SHA-256=\(sha256Base64)"],
                "sha256=\(sha256Hex)", "digest", "Digest when Repr-Digest has nothing usable"
            ),
            (["repr-digest": "sha-256=:\(sha256Base64):;param=1"], "sha256=\(sha256Hex)", "repr-digest", "parameters"),
            (["repr-digest": "md5=:1B2M2Y8AsgTpgAmY7PhCfg==:"], nil, nil, "MD5 only"),
            (["digest": "SHA=2jmj7l5rSw0yVb/vlWAYkK/YBwk="], nil, nil, "SHA-1 only"),
            (["repr-digest": "sha-256=\(sha256Base64)"], nil, nil, "a structured value without its colons"),
            (["repr-digest": "sha-256=:AAAA:"], nil, nil, "too short for SHA-256"),
            (["digest": "SHA-256=not base64!"], nil, nil, "not base64"),
            (["content-digest": "sha-256=:\(sha256Base64):"], nil, nil, "the body's digest, not the file's"),
            ([:], nil, nil, "no field")
        ]
        for row in rows {
            let found = PublishedDigest.checksum(in: row.headers)
            XCTAssertEqual(found?.checksum.description, row.expected, row.why)
            XCTAssertEqual(found?.field, row.field, row.why)
        }
    }
}
