// Seeded property-based tests of the parsers that read outside input:
// Content-Range, Content-Disposition / URL file names, response heads (and the
// response check that gates every write), and Manifest.load. Every test draws
// its inputs from a fixed seed, so a failure replays exactly; the failing
// input is printed with its escapes. Properties: never crash, never accept
// garbage (an independent reference decides what is valid), and what is
// accepted keeps its invariants. See docs/RELIABILITY.md, "Fuzzing".
import Foundation
import RangeServer
import XCTest

@testable import RangeGet

/// SplitMix64, so every run draws the same inputs.
private struct Seeded: RandomNumberGenerator {
    private var generator: SplitMix64
    init(_ seed: UInt64) { generator = SplitMix64(seed: seed) }
    mutating func next() -> UInt64 { generator.next() }

    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }
    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }
}

/// Offsets where 32-bit and sign mistakes hide.
private let interestingOffsets: [Int64] = [
    0, 1, 2, 99, 100, 1 << 20, (1 << 31) - 1, 1 << 31, (1 << 31) + 1, (1 << 32) - 1, 1 << 32, (1 << 32) + 1,
    (5 << 30) + 13, Int64(Int32.max) * 3, (1 << 53) + 1, Int64.max - 2, Int64.max - 1, Int64.max
]

extension Seeded {
    fileprivate mutating func offset() -> Int64 {
        chance(0.5) ? pick(interestingOffsets) : Int64.random(in: 0...(chance(0.5) ? 1 << 40 : Int64.max), using: &self)
    }

    /// A string of `count` pieces drawn from `alphabet`.
    fileprivate mutating func string(from alphabet: [String], count: Int) -> String {
        (0..<count).map { _ in pick(alphabet) }.joined()
    }

    /// `text` with 1 to 4 random edits using pieces of `alphabet`.
    fileprivate mutating func mutate(_ text: String, alphabet: [String]) -> String {
        var characters = Array(text)
        for _ in 0..<Int.random(in: 1...4, using: &self) {
            let position = Int.random(in: 0...characters.count, using: &self)
            switch Int.random(in: 0..<5, using: &self) {
            case 0: characters.insert(contentsOf: pick(alphabet), at: position)
            case 1 where !characters.isEmpty: characters.remove(at: min(position, characters.count - 1))
            case 2 where !characters.isEmpty:
                characters[min(position, characters.count - 1)] = Character(
                    pick(alphabet).first.map(String.init) ?? "x")
            case 3 where !characters.isEmpty:
                let start = min(position, characters.count - 1)
                let end = min(characters.count, start + Int.random(in: 1...4, using: &self))
                characters.insert(contentsOf: characters[start..<end], at: end)
            default: characters = Array(characters.prefix(position))
            }
        }
        return String(characters)
    }
}

// MARK: - Content-Range

/// An independent reading of RFC 9110 14.4 for `Content-Range`, as strict as
/// the product means to be: `bytes first-last/total`, `bytes first-last/*` or
/// `bytes */total`; ASCII digits; first <= last < total; whitespace around.
private func referenceContentRange(_ value: String) -> (range: ByteRange?, total: Int64?)? {
    var text = Array(value)
    // HTTP's white space is ASCII's: U+0085 or U+00A0 around a value is not padding.
    while let first = text.first, first.isASCII, first.isWhitespace { text.removeFirst() }
    while let last = text.last, last.isASCII, last.isWhitespace { text.removeLast() }
    guard text.count >= 6, String(text[0..<5]).lowercased() == "bytes", text[5] == " " else { return nil }
    var rest = Array(text[6...])
    while let first = rest.first, first.isASCII, first.isWhitespace { rest.removeFirst() }
    func number(_ characters: ArraySlice<Character>) -> Int64? {
        guard !characters.isEmpty, characters.count <= 19,
            characters.allSatisfy({ ("0"..."9").contains($0) && $0.unicodeScalars.count == 1 })
        else { return nil }
        return Int64(String(characters))
    }
    guard let slash = rest.firstIndex(of: "/"), rest[(slash + 1)...].firstIndex(of: "/") == nil else { return nil }
    let left = rest[..<slash]
    let right = rest[(slash + 1)...]
    let total: Int64?
    if right.count == 1 && right.first == "*" {
        total = nil
    } else {
        guard let value = number(right) else { return nil }
        total = value
    }
    if left.count == 1 && left.first == "*" {
        guard let total else { return nil }
        return (nil, total)
    }
    guard let dash = left.firstIndex(of: "-"), left[(dash + 1)...].firstIndex(of: "-") == nil,
        let first = number(left[..<dash]), let last = number(left[(dash + 1)...]),
        first <= last, last < Int64.max
    else { return nil }
    if let total, last >= total { return nil }
    return (ByteRange(first, last + 1), total)
}

private let contentRangeAlphabet = [
    "0", "1", "9", "-", "/", "*", " ", "  ", "\t", "\r\n", "bytes", "BYTES", "items", "+", ".", ",", "e", "x",
    "\u{0}", "\u{85}", "\u{A0}", "\u{301}", "٣", "０", "9223372036854775807", "9223372036854775808",
    "18446744073709551616", "4294967296", "2147483648", "-1", "="
]

private func escaped(_ text: String) -> String { text.debugDescription }

/// Violations of a property across many inputs, reported once: how many, and
/// the first few inputs (so one bug does not bury the log in thousands of lines).
private struct Findings {
    private(set) var count = 0
    private var examples: [String] = []

    mutating func check(_ holds: Bool, _ message: @autoclosure () -> String) {
        guard !holds else { return }
        count += 1
        if examples.count < 5 { examples.append(message()) }
    }

    func assertNone(_ property: String, file: StaticString = #filePath, line: UInt = #line) {
        guard count > 0 else { return }
        XCTFail(
            "\(property): \(count) violations, e.g.\n  " + examples.joined(separator: "\n  "), file: file, line: line)
    }
}

final class ContentRangePropertyTests: XCTestCase {
    func testEveryValidValueRoundTrips() {
        var random = Seeded(0xC0FFEE)
        for _ in 0..<20_000 {
            var total = random.offset()
            if total == 0 { total = 1 }
            let first = Int64.random(in: 0..<total, using: &random)
            let last = random.chance(0.2) ? total - 1 : Int64.random(in: first..<total, using: &random)
            let unit = random.pick(["bytes", "Bytes", "BYTES"])
            let padding = random.pick(["", " ", "\t", "  "])
            let form = Int.random(in: 0..<3, using: &random)
            let value: String
            switch form {
            case 0: value = "\(padding)\(unit) \(first)-\(last)/\(total)\(padding)"
            case 1: value = "\(unit) \(first)-\(last)/*"
            default: value = "\(unit) */\(total)"
            }
            let parsed = ContentRange(value)
            if last == Int64.max && form != 2 {
                XCTAssertNil(parsed, escaped(value))
                continue
            }
            guard let parsed else { return XCTFail("rejected valid \(escaped(value))") }
            XCTAssertEqual(parsed.range, form == 2 ? nil : ByteRange(first, last + 1), escaped(value))
            XCTAssertEqual(parsed.total, form == 1 ? nil : total, escaped(value))
        }
    }

    /// Mutated values: accepted exactly when the reference grammar accepts them, with the same numbers.
    func testMutatedValuesAreAcceptedOnlyWhenValid() {
        var random = Seeded(0xBAD_C0DE)
        var accepted = 0
        var findings = Findings()
        for _ in 0..<30_000 {
            let total = max(1, random.offset())
            let first = Int64.random(in: 0..<total, using: &random)
            let last = Int64.random(in: first..<total, using: &random)
            let seed = random.pick(["bytes \(first)-\(last)/\(total)", "bytes */\(total)", "bytes \(first)-\(last)/*"])
            let value = random.mutate(seed, alphabet: contentRangeAlphabet)
            let parsed = ContentRange(value)
            let reference = referenceContentRange(value)
            findings.check(
                parsed?.range == reference?.range && parsed?.total == reference?.total
                    && (parsed == nil) == (reference == nil),
                "parsed \(String(describing: parsed)), reference \(String(describing: reference)): \(escaped(value))")
            if let parsed {
                accepted += 1
                if let range = parsed.range {
                    findings.check(range.count > 0 && range.end <= (parsed.total ?? Int64.max), escaped(value))
                }
            }
        }
        findings.assertNone("Content-Range accepted exactly when valid")
        XCTAssertGreaterThan(accepted, 100, "the mutations still produce valid values now and then")
    }

    func testArbitraryTextNeverCrashesAndIsRarelyAccepted() {
        var random = Seeded(42)
        var findings = Findings()
        for _ in 0..<20_000 {
            let value = random.string(from: contentRangeAlphabet, count: Int.random(in: 0...12, using: &random))
            let parsed = ContentRange(value)
            let reference = referenceContentRange(value)
            findings.check((parsed == nil) == (reference == nil), "accepted \(parsed != nil): \(escaped(value))")
        }
        findings.assertNone("Content-Range accepted exactly when valid")
    }
}

// MARK: - File names

private let nameAlphabet = [
    "a", "B", "report", ".pdf", ".", "..", "/", "\\", "%2F", "%2f", "%2e", "%00", "%", "\u{0}", "\u{7}", "\u{1B}",
    "\u{7F}", "\u{85}", "\u{9B}", " ", "\t", "\n", "\r", "\"", "'", ";", "=", "*", "é", "日本", "\u{202E}", "\u{FEFF}",
    "\u{200B}", "👨‍👩‍👧", "\u{FFFD}", "~", "-", "CON", "\u{301}", "\u{600}", "\u{603}", "\u{110BD}", "\u{1100}",
    "\u{1F1E6}", String(repeating: "x", count: 120),
    String(repeating: "é", count: 70)
]

private let dispositionAlphabet =
    nameAlphabet + [
        "attachment", "inline", "; ", ";", "filename=", "filename*=", "FILENAME=", "UTF-8''", "utf-8'en'",
        "iso-8859-1''",
        "\"", "\\\"", "%E2%82%AC", "%C3", "%FF", "%2e%2e%2f"
    ]

/// Why `name` is not a safe base name (RELIABILITY.md 16), nil when it is.
/// Bytes, not Characters: a combining or prepended mark hides `/` and `.`
/// from Character-based checks such as String.contains and hasPrefix.
private func unsafeReason(_ name: String) -> String? {
    let bytes = Array(name.utf8)
    if bytes.isEmpty { return "empty" }
    if bytes.contains(UInt8(ascii: "/")) || bytes.contains(UInt8(ascii: "\\")) { return "separator" }
    if bytes.first == UInt8(ascii: ".") { return "leading dot" }
    if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value) })
    {
        return "control character"
    }
    if bytes.count > 255 { return "longer than 255 bytes" }
    if name.unicodeScalars.first?.properties.isWhitespace == true { return "leading white space" }
    return nil
}

final class FileNamePropertyTests: XCTestCase {
    func testSanitizedNamesAreSafeBaseNames() {
        var random = Seeded(16)
        var findings = Findings()
        for _ in 0..<20_000 {
            let input = random.string(from: nameAlphabet, count: Int.random(in: 0...10, using: &random))
            guard let name = FileName.sanitize(input) else { continue }
            let reason = unsafeReason(name) ?? (name.utf8.count > 200 ? "longer than 200 bytes" : nil)
            findings.check(reason == nil, "\(reason ?? ""): \(escaped(name)) from \(escaped(input))")
        }
        findings.assertNone("sanitize gives a safe base name")
    }

    /// Sanitising a sanitised name changes nothing.
    func testSanitizingIsIdempotent() {
        var random = Seeded(1616)
        var findings = Findings()
        for _ in 0..<20_000 {
            let input = random.string(from: nameAlphabet, count: Int.random(in: 0...10, using: &random))
            guard let name = FileName.sanitize(input) else { continue }
            let again = FileName.sanitize(name)
            findings.check(
                again == name, "\(escaped(name)) became \(again.map(escaped) ?? "nil"), from \(escaped(input))")
        }
        findings.assertNone("sanitize is idempotent")
    }

    /// Whatever the server sends, the chosen name is a safe base name.
    func testChosenNamesAreAlwaysSafe() {
        var random = Seeded(0xD15)
        var findings = Findings()
        for _ in 0..<20_000 {
            let disposition =
                random.chance(0.8)
                ? random.string(from: dispositionAlphabet, count: Int.random(in: 0...12, using: &random)) : nil
            let pathPart = random.string(from: nameAlphabet, count: Int.random(in: 0...6, using: &random))
            let encoded = pathPart.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "x"
            let url =
                random.pick(["http://h/", "https://h/dir/", "http://h:8080/a/b/"]) + encoded
                + random.pick(["", "?x=1", "#frag", "?a=/etc/passwd"])
            let name = FileName.choose(url: url, contentDisposition: disposition)
            let reason = unsafeReason(name)
            findings.check(
                reason == nil, "\(reason ?? ""): \(escaped(name)) from \(url) | \(disposition.map(escaped) ?? "nil")")
        }
        findings.assertNone("the chosen name is a safe base name")
    }

    /// Well-formed headers with a traversal attempt inside still yield a safe name.
    func testMutatedDispositionsNeverEscape() {
        var random = Seeded(0xE5C)
        var findings = Findings()
        let seeds = [
            "attachment; filename=\"../../etc/passwd\"", "attachment; filename*=UTF-8''..%2F..%2Froot%2F.ssh%2Fkeys",
            "attachment; filename=\"..\\\\..\\\\boot.ini\"; filename*=UTF-8''%2e%2e%2f.x", "inline; filename=.hidden",
            "attachment; filename=\"..\u{603}/..\u{603}/x\"", "attachment; filename*=UTF-8''..%D8%83/.%CC%81x"
        ]
        for _ in 0..<20_000 {
            let header = random.mutate(random.pick(seeds), alphabet: dispositionAlphabet)
            _ = FileName.fromContentDisposition(header)
            let name = FileName.choose(url: "http://h/file", contentDisposition: header)
            let reason = unsafeReason(name)
            findings.check(reason == nil, "\(reason ?? ""): \(escaped(name)) from \(escaped(header))")
        }
        findings.assertNone("the chosen name is a safe base name")
    }
}

// MARK: - Response heads and the check before the first write

private let headerNames = [
    "Content-Range", "content-range", "CONTENT-RANGE", "Content-Length", "ETag", "Last-Modified",
    "Content-Encoding", "Content-Type", "Retry-After", "Transfer-Encoding", "Location", "Content-Range "
]

final class ResponseHeadPropertyTests: XCTestCase {
    private func head(_ lines: [String]) -> ResponseHead {
        .collected(lines)
    }

    /// Random header lines never crash, and the typed accessors keep their promises.
    func testRandomLinesKeepTheAccessorsSane() {
        var random = Seeded(0x4EAD)
        var findings = Findings()
        let alphabet =
            contentRangeAlphabet + headerNames + [
                ": ", ":", "HTTP/1.1 ", "HTTP/2 ", "206", "200", "-5",
                "inf", "nan", "1e999", "0x10", "\r\n", "\n", ""
            ]
        for _ in 0..<20_000 {
            let lines = (0..<Int.random(in: 0...8, using: &random)).map { _ in
                random.string(from: alphabet, count: Int.random(in: 0...8, using: &random))
                    + random.pick(["\r\n", "\n", ""])
            }
            let parsed = head(lines)
            findings.check(parsed.status >= 0, "status \(parsed.status): \(lines)")
            findings.check((parsed.contentLength ?? 0) >= 0, "length \(parsed.contentLength ?? 0): \(lines)")
            findings.check((parsed.retryAfter ?? 0) >= 0, "Retry-After \(parsed.retryAfter ?? 0): \(lines)")
            findings.check(
                parsed.fields.keys.allSatisfy { $0 == $0.lowercased() }, "field names not lowercased: \(lines)")
            findings.check(parsed.contentEncoding != "identity", "identity reported as a coding: \(lines)")
        }
        findings.assertNone("response head accessors")
    }

    /// The collector reads raw bytes by index for speed; a plain reading of
    /// the same rules (split into words, trim, lowercase) must agree with it
    /// on any bytes: stray spaces and tabs, several spaces in a status line,
    /// bytes that are not UTF-8, lines without a colon.
    func testTheByteReaderAgreesWithAPlainReading() {
        var random = Seeded(0xB17E)
        var findings = Findings()
        let alphabet: [[UInt8]] =
            (headerNames + [
                ": ", ":", " ", "  ", "\t", "\r", "HTTP/1.1 ", "HTTP/2 ", "HTTP/1.1  ",
                "206", "200", "2060", "20", "x", "A", "é", "bytes 0-9/10", "\r\n", ""
            ])
            .map { Array($0.utf8) } + [[0xFF], [0xC3], [0x0B], [0x0C], [0x00]]
        for _ in 0..<20_000 {
            let endings: [[UInt8]] = [[0x0D, 0x0A], [0x0A], []]
            let lines = (0..<Int.random(in: 0...8, using: &random)).map { _ -> [UInt8] in
                let pieces = (0..<Int.random(in: 0...8, using: &random)).map { _ in random.pick(alphabet) }
                return pieces.joined() + random.pick(endings)
            }
            let collector = HeaderCollector()
            for line in lines { line.withUnsafeBytes(collector.consume) }
            let expected = Self.plainReading(lines)
            findings.check(
                collector.head.status == expected.status && collector.head.isComplete == expected.isComplete
                    && collector.head.fields == expected.fields, "\(lines)")
        }
        findings.assertNone("the byte reader against a plain reading")
    }

    /// The head of `lines` read plainly, as the rules in HeaderCollector say.
    private static func plainReading(_ lines: [[UInt8]]) -> ResponseHead {
        var (status, fields, isComplete) = (0, [String: String](), false)
        let trimmed = { (bytes: ArraySlice<UInt8>) in
            bytes.drop(while: \.isASCIIWhitespace).reversed().drop(while: \.isASCIIWhitespace).reversed()
        }
        for raw in lines {
            let line = Array(trimmed(raw[...]))
            if line.starts(with: Array("HTTP/".utf8)) {
                (status, fields, isComplete) = (0, [:], false)
                let words = line.split(separator: 0x20, maxSplits: 2)
                if words.count > 1, words[1].count == 3, let code = Int(String(decoding: words[1], as: UTF8.self)),
                    words[1].allSatisfy(\.isASCIIDigit)
                {
                    status = code
                }
            } else if line.isEmpty {
                isComplete = status != 0
            } else if !isComplete, let colon = line.firstIndex(of: UInt8(ascii: ":")) {
                let name = String(decoding: line[..<colon].map(\.asciiLowercased), as: UTF8.self)
                let value = String(decoding: trimmed(line[(colon + 1)...]), as: UTF8.self)
                fields[name] = fields[name].map { $0 + ", " + value } ?? value
            }
        }
        return ResponseHead(status: status, fields: fields, isComplete: isComplete)
    }

    /// The gate of invariant 1: whatever head a server sends, a body is accepted
    /// for a ranged request only if it is a 206 whose Content-Range is exactly
    /// the request and the known size, without coding or multipart, with the same validator.
    func testNoMutatedResponseIsAcceptedUnlessItIsExactlyRight() {
        var random = Seeded(0x1)
        var accepted = 0
        var findings = Findings()
        for _ in 0..<30_000 {
            let size = max(
                2,
                random.chance(0.5) ? random.pick(interestingOffsets) : Int64.random(in: 2...(1 << 33), using: &random))
            let start = Int64.random(in: 0..<(size - 1), using: &random)
            let end = Int64.random(in: (start + 1)...size, using: &random)
            let requested = ByteRange(start, end)
            let etag = random.chance(0.7) ? "\"v\(Int.random(in: 1...2, using: &random))\"" : nil
            let expected = Expectation(size: size, etag: random.chance(0.8) ? "\"v1\"" : nil, lastModified: nil)
            var lines = [
                "HTTP/1.1 206 Partial Content\r\n", "Content-Range: bytes \(start)-\(end - 1)/\(size)\r\n",
                "Content-Length: \(end - start)\r\n", "Content-Type: application/octet-stream\r\n"
            ]
            if let etag { lines.append("ETag: \(etag)\r\n") }
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                let index = Int.random(in: 0..<lines.count, using: &random)
                switch Int.random(in: 0..<6, using: &random) {
                case 0: lines[index] = random.mutate(lines[index], alphabet: contentRangeAlphabet + headerNames)
                case 1: lines.remove(at: index)
                case 2: lines.append(lines[index])
                case 3:
                    lines.append(
                        random.pick([
                            "Content-Encoding: gzip\r\n", "Content-Encoding: identity\r\n",
                            "Content-Type: multipart/byteranges; boundary=x\r\n",
                            "Transfer-Encoding: chunked\r\n", "ETag: W/\"v1\"\r\n"
                        ]))
                case 4:
                    lines.insert(
                        random.pick([
                            "HTTP/1.1 200 OK\r\n", "HTTP/1.1 302 Found\r\n", "HTTP/1.1 416 No\r\n",
                            "HTTP/1.1 2060 Odd\r\n"
                        ]), at: 0)
                default:
                    lines[0] = random.pick([
                        "HTTP/1.1 200 OK\r\n", "HTTP/1.0 206 P\r\n", "HTTP/2 206\r\n",
                        "HTTP/1.1 206\r\n", "HTTP/1.1 abc\r\n"
                    ])
                }
            }
            let parsed = head(lines + ["\r\n"])
            guard ResponseCheck.check(parsed, requested: requested, expected: expected) == nil else { continue }
            accepted += 1
            let context = "\(requested) of \(size): \(lines)"
            let contentRange = parsed["content-range"].flatMap(ContentRange.init)
            findings.check(parsed.status == 206, "status \(parsed.status) accepted: \(context)")
            findings.check(
                contentRange?.range == requested && contentRange?.total == size, "Content-Range accepted: \(context)")
            findings.check(parsed.contentEncoding == nil, "coding accepted: \(context)")
            findings.check(
                parsed["content-type"]?.lowercased().contains("multipart/byteranges") != true,
                "multipart accepted: \(context)")
            if let want = expected.etag, let got = parsed.etag {
                findings.check(got == want, "other ETag accepted: \(context)")
            }
        }
        findings.assertNone("only an exact 206 is accepted")
        XCTAssertGreaterThan(accepted, 1000, "correct responses are still accepted")
    }
}

// MARK: - URLs a download accepts

final class RemoteURLPropertyTests: XCTestCase {
    /// The byte reader of plain http URLs (the fast path of every list line)
    /// accepts nothing URLComponents refuses: over URLs mutated from plain
    /// ones with the characters where URL parsers differ (brackets, a
    /// second '#', bad escapes, spaces, ports that are too long or no
    /// number, an empty host, a punycode label that does not decode,
    /// non-ASCII), every URL it accepts has an http or https scheme and a
    /// non-empty host by URLComponents (which is mostly the more lenient: it
    /// escapes what a URL may not hold; but with ICU loaded, as in this test
    /// process, it finds no host in a bad `xn--` label).
    func testTheByteReaderAcceptsOnlyWhatURLComponentsAccepts() {
        var random = Seeded(0x0_5EED_0F_0A11)
        var findings = Findings()
        var accepted = 0
        let seeds = [
            "http://h/a", "https://example.com:8443/dir/file.bin?x=1&y=2#top", "HTTP://127.0.0.1:9555/f00001.bin",
            "http://a-b.c/%41%7e~_.!$&'()*+,;=:@/?q#f", "https://h:1", "http://h?q", "http://h#f",
            "http://xn--a.example/f", "http://axn--b.example/"
        ]
        let alphabet = [
            "/", "?", "#", "##", "%", "%4", "%zz", "%41", ":", "::", ":99999", ":123456", "@", "[", "]",
            "[::1]", " ", "\\", "|", "{", "}", "^", "`", "\"", "<", ">", "é", "_", "-", ".", "..",
            "a", "Z", "0", "9", "http://", "https://", "htp://", "", "~", "'", "!", "xn--", "XN--a9",
            ".xn--", "xn--zz."
        ]
        for _ in 0..<30_000 {
            let url = random.mutate(random.pick(seeds), alphabet: alphabet)
            guard RemoteURL.isPlainHTTP(url) else { continue }
            accepted += 1
            findings.check(
                RemoteURL.isHTTPByComponents(url), "accepted, but not by URLComponents: \(url.debugDescription)")
        }
        findings.assertNone("plain http URLs")
        // The property means something only if the reader accepts a fair share.
        XCTAssertGreaterThan(accepted, 3000)
    }
}

// MARK: - Manifest.load

final class ManifestPropertyTests: TemporaryDirectoryTestCase {
    /// Loads `data` as a manifest: either a ManifestError that, as the
    /// download's error, says how to recover, or a manifest whose every field is usable.
    private func check(_ data: Data, _ label: String, file: StaticString = #filePath, line: UInt = #line) -> Manifest? {
        let path = directory + "/f.part.json"
        _ = FileManager.default.createFile(atPath: path, contents: data)
        do {
            guard let manifest = try Manifest.load(from: path) else {
                XCTFail("an existing manifest loaded as nil: \(label)", file: file, line: line)
                return nil
            }
            XCTAssertEqual(manifest.version, Manifest.currentVersion, label, file: file, line: line)
            XCTAssertGreaterThanOrEqual(manifest.size, 0, label, file: file, line: line)
            var previousEnd: Int64 = -1
            for range in manifest.done.ranges {
                XCTAssertGreaterThanOrEqual(range.start, 0, label, file: file, line: line)
                XCTAssertLessThan(range.start, range.end, label, file: file, line: line)
                XCTAssertGreaterThan(
                    range.start, previousEnd, "ranges sorted, disjoint, not touching: \(label)",
                    file: file, line: line)
                XCTAssertLessThanOrEqual(range.end, manifest.size, label, file: file, line: line)
                previousEnd = range.end
            }
            return manifest
        } catch {
            let failed = DownloadError.manifest(error)
            XCTAssertEqual(failed.remedy, .restart, "\(error): \(label)", file: file, line: line)
            XCTAssertTrue(
                failed.description.contains("DownloadOptions.restart"), "\(failed): \(label)", file: file, line: line)
            XCTAssertTrue(failed.description.contains(path), "\(failed): \(label)", file: file, line: line)
            XCTAssertFalse(failed.description.contains("\n"), "one line: \(failed)", file: file, line: line)
            return nil
        }
    }

    private func randomManifest(_ random: inout Seeded) -> Manifest {
        let size =
            random.chance(0.3) ? random.pick(interestingOffsets) : Int64.random(in: 0...(1 << 34), using: &random)
        let remote = RemoteFile(
            url: "http://127.0.0.1:8080/f?sig=\(random.next())", effectiveURL: "x", size: size,
            etag: random.chance(0.7) ? "\"e\(random.next())\"" : nil,
            lastModified: random.chance(0.5) ? "Mon, 01 Jan 2024 00:00:00 GMT" : nil,
            acceptsRanges: true, contentDisposition: nil)
        var manifest = Manifest(remote: remote, size: size)
        if size > 0 {
            for _ in 0..<Int.random(in: 0...8, using: &random) {
                let start = Int64.random(in: 0..<size, using: &random)
                let end = Int64.random(
                    in: start...min(size, start &+ Int64.random(in: 1...(1 << 30), using: &random)),
                    using: &random)
                manifest.done.insert(ByteRange(start, end))
            }
        }
        return manifest
    }

    func testValidManifestsRoundTrip() throws {
        var random = Seeded(21)
        for index in 0..<500 {
            let manifest = randomManifest(&random)
            let path = directory + "/m\(index).json"
            try manifest.save(to: path)
            XCTAssertEqual(try Manifest.load(from: path), manifest)
        }
    }

    func testMutatedManifestsAreRejectedOrSane() throws {
        var random = Seeded(0x21_21)
        let tokens = [
            "-1", "0", "9223372036854775807", "9223372036854775808", "1e400", "1.5", "0x10", "null", "true",
            "\"\"", "[]", "{}", "[[0,1]]", "[[5,3]]", "[[0,1,2]]", "[[-1,0]]", ",", ":", "\"version\":2",
            "\"size\":-5", "\\u0000", "\u{0}", "]", "}", "[", "{", "\"", "\\"
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var loaded = 0
        for _ in 0..<3_000 {
            var bytes = [UInt8](try encoder.encode(randomManifest(&random)))
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let position = Int.random(in: 0...bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes.insert(contentsOf: Array(random.pick(tokens).utf8), at: position)
                case 1 where !bytes.isEmpty:
                    bytes[min(position, bytes.count - 1)] ^= UInt8(1 << Int.random(in: 0..<8, using: &random))
                case 2: bytes = Array(bytes.prefix(position))
                default:
                    // Replace one number with a token.
                    let text = String(decoding: bytes, as: UTF8.self)
                    if let match = text.range(of: "[0-9]+", options: .regularExpression) {
                        bytes = Array(text.replacingCharacters(in: match, with: random.pick(tokens)).utf8)
                    }
                }
            }
            if check(Data(bytes), escaped(String(decoding: bytes, as: UTF8.self))) != nil { loaded += 1 }
        }
        XCTAssertGreaterThan(loaded, 50, "some mutations leave a valid manifest")
    }

    func testRandomBytesAreRejected() {
        var random = Seeded(0xF00D)
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...300, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            XCTAssertNil(check(Data(bytes), "\(bytes.prefix(40))"), "random bytes loaded as a manifest")
        }
    }

    /// Deep nesting and huge inputs end in an error, not a stack overflow.
    func testPathologicalJSONIsRejectedWithoutCrashing() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        XCTAssertNil(check(Data("{\"version\":1,\"done\":\(deep)}".utf8), "deeply nested done"))
        XCTAssertNil(check(Data(deep.utf8), "deeply nested array"))
        let objects = String(repeating: "{\"a\":", count: 50_000) + "1" + String(repeating: "}", count: 50_000)
        XCTAssertNil(check(Data(objects.utf8), "deeply nested objects"))
        let many = "[" + Array(repeating: "[0,1]", count: 200_000).joined(separator: ",") + "]"
        let manifest = check(Data("{\"version\":1,\"url\":\"u\",\"size\":2,\"done\":\(many)}".utf8), "many ranges")
        XCTAssertEqual(manifest?.done.ranges, [ByteRange(0, 1)])
    }
}

// MARK: - Numbers a server controls: Retry-After and HTTP dates

private let retryAfterAlphabet = [
    "0", "1", "9", "300", "301", "9223372036854775807", "9223372036854775808", "99999999999999999999",
    String(repeating: "9", count: 400), "-", "+", ".", "e", "1e999", "inf", "nan", " ", ",", ":", "GMT", "Sun",
    "Jan", "Nov", "06", "6", "0000", "9999", "99999999999", "-2147483648", "2147483647", "\u{0}", "\u{663}", "٣"
]

final class RetryAfterPropertyTests: XCTestCase {
    private func head(retryAfter value: String) -> ResponseHead {
        .collected(["HTTP/1.1 503 Busy\r\n", "Retry-After: \(value)\r\n", "\r\n"])
    }

    /// Whatever the value, a wait of 0 to 300 s or none, and the rejection's
    /// message can be built (it trapped on 2^63 and on a 9-digit year).
    func testEveryValueIsABoundedWaitOrNone() {
        var random = Seeded(0x5E7A)
        var findings = Findings()
        let dates = ["Sun, 06 Nov 1994 08:49:37 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Thu, 01 Jan 1970 00:00:00 GMT"]
        for _ in 0..<30_000 {
            let value =
                random.chance(0.5)
                ? random.mutate(random.pick(dates + ["120", "9223372036854775807"]), alphabet: retryAfterAlphabet)
                : random.string(from: retryAfterAlphabet, count: Int.random(in: 0...6, using: &random))
            let parsed = head(retryAfter: value)
            if let wait = parsed.retryAfter {
                findings.check(wait >= 0 && wait <= ResponseHead.longestRetryAfter, "\(wait) from \(escaped(value))")
            }
            let rejection = ResponseCheck.check(
                parsed, requested: ByteRange(0, 10), expected: Expectation(size: 10, etag: nil, lastModified: nil))
            findings.check(
                rejection?.description.hasPrefix("HTTP 503") == true,
                "\(String(describing: rejection)): \(escaped(value))")
        }
        findings.assertNone("Retry-After is a bounded wait")
    }

    /// A date with any digits in any field: nil, or the time timegm gives for
    /// a day of 01-31, a four-digit year and a valid clock.
    func testHTTPDatesAreReadOnlyWithFieldsThatFit() {
        var random = Seeded(0xDA7E)
        var findings = Findings()
        for _ in 0..<30_000 {
            let year = random.pick([
                "1994", "0000", "9999", "99999999999", "-1", "+994", "199", "1994 ", "٣٣٣٣",
                String(Int.random(in: 0...9999, using: &random))
            ])
            let day = random.pick(["06", "6", "00", "31", "32", "99999999999999999999", "-1", "0x"])
            let clock = random.pick([
                "08:49:37", "23:59:60", "24:00:00", "8:49:37", "08:49", "08:49:37:00", "08:x:49:37",
                "99999999999999999999:00:00", "-1:00:00"
            ])
            let text = "Sun, \(day) Nov \(year) \(clock) GMT"
            guard let seconds = HTTPDate.seconds(text) else { continue }
            findings.check(seconds.isFinite, escaped(text))
            findings.check(
                day.utf8.count == 2 && year.trimmingCharacters(in: .whitespaces).utf8.count == 4
                    && clock.utf8.count == 8, "accepted \(escaped(text))")
        }
        findings.assertNone("HTTP dates are read only when every field fits")
        XCTAssertEqual(HTTPDate.seconds("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
    }
}

// MARK: - Sizes and offsets near Int64.max

/// Sets of bytes as a sorted list of merged spans, computed the slow way:
/// the reference `RangeSet` is checked against.
private func referenceUnion(_ spans: [ByteRange]) -> [ByteRange] {
    var merged: [ByteRange] = []
    for span in spans.filter({ !$0.isEmpty }).sorted() {
        if let last = merged.last, span.start <= last.end {
            merged[merged.count - 1] = ByteRange(last.start, max(last.end, span.end))
        } else {
            merged.append(span)
        }
    }
    return merged
}

private func referenceRemove(_ spans: [ByteRange], _ cut: ByteRange) -> [ByteRange] {
    spans.flatMap { span -> [ByteRange] in
        guard !cut.isEmpty, span.end > cut.start, span.start < cut.end else { return [span] }
        return [ByteRange(span.start, max(span.start, cut.start)), ByteRange(min(span.end, cut.end), span.end)]
            .filter { !$0.isEmpty }
    }
}

final class ByteArithmeticPropertyTests: XCTestCase {
    /// Offsets where the end of Int64 is near.
    private func offset(_ random: inout Seeded) -> Int64 {
        random.chance(0.6)
            ? random.pick([Int64.max, Int64.max - 1, Int64.max - 2, 1 << 62, (1 << 62) + 1, Int64.max - (1 << 20), 0, 1]
            )
            : random.offset()
    }

    private func range(_ random: inout Seeded) -> ByteRange {
        let one = offset(&random)
        let other = random.chance(0.3) ? one : offset(&random)
        return ByteRange(min(one, other), max(one, other))
    }

    /// Inserts and removes at offsets up to Int64.max: the set stays sorted,
    /// disjoint and apart, agrees with a slow reference, and every figure
    /// (byteCount, contains, complement, fits) is computed without a trap.
    func testRangeSetsNearInt64MaxAgreeWithAReference() {
        var random = Seeded(0x7FFF_FFFF)
        var findings = Findings()
        for _ in 0..<3_000 {
            var set = RangeSet()
            var model: [ByteRange] = []
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                let span = range(&random)
                if random.chance(0.7) {
                    set.insert(span)
                    model = referenceUnion(model + [span])
                } else {
                    set.remove(span)
                    model = referenceRemove(model, span)
                }
                findings.check(set.ranges == model, "\(set) != \(model)")
            }
            var total: Int64 = 0
            var previous: ByteRange?
            for span in set.ranges {
                let (sum, overflow) = total.addingReportingOverflow(span.count)
                findings.check(!overflow, "byte count overflows: \(set)")
                total = sum
                if let previous { findings.check(previous.end < span.start, "not apart: \(set)") }
                previous = span
            }
            findings.check(set.byteCount == total, "byteCount \(set.byteCount) != \(total)")
            let probe = range(&random)
            findings.check(
                set.contains(probe) == model.contains { $0.start <= probe.start && probe.end <= $0.end }
                    || probe.isEmpty,
                "contains \(probe) in \(set)")
            let size = offset(&random)
            let missing = set.complement(size: size)
            var covered = missing
            for span in set.ranges where span.start < size {
                covered.insert(ByteRange(span.start, min(span.end, size)))
            }
            findings.check(covered.ranges == (size > 0 ? [ByteRange(0, size)] : []), "complement of \(set) in \(size)")
            findings.check(set.fits(size: size) == ((set.ranges.last?.end ?? 0) <= size), "fits \(size)")
        }
        findings.assertNone("range sets near Int64.max")
    }

    /// Rates from byte counts anywhere in Int64 (a difference of two counts trapped): a number, never a trap.
    func testRateMeterTakesAnyCounts() {
        var random = Seeded(0x2A7E)
        var findings = Findings()
        for _ in 0..<5_000 {
            var meter = RateMeter(window: 1)
            var time = 0.0
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                time += random.pick([0.01, 0.5, 2])
                meter.add(
                    bytes: random.chance(0.5)
                        ? random.pick([Int64.max, Int64.min, 0]) : Int64(bitPattern: random.next()),
                    at: time)
            }
            findings.check(!meter.rate.isNaN, "rate \(meter.rate)")
        }
        findings.assertNone("rates")
    }
}
