// DuplicateLinks: the mirrors a response names in its `Link` header field
// (Metalink/HTTP, RFC 6249): `<https://b.example/f.iso>; rel=duplicate;
// pri=1`, each a URL of the same file, the lowest `pri` (1 to 999999) the
// most preferred. The field's syntax is RFC 8288's: a list of
// `<URI-Reference>` each followed by `; name=value` parameters (a token or a
// quoted string), and several Link fields arrive joined with ", " as one
// value (HeaderCollector), so the list is split on commas outside `<...>`
// and quoted strings. Pure: `Download.addingDiscoveredMirrors` probes and
// votes on what it finds (Probe/MirrorDiscovery.swift).
//
// A server's header is not the user's word, so only this much is taken: an
// http or https URL with a host and no credentials, never http when the
// file came over https (unless the caller allows the downgrade), never the
// URL itself or the one the user gave (a loop), each once, the best 16 by
// `pri`; the reading stops after 256 links or 64 KiB of field value, so
// hundreds of Link headers cost little. A link with an `anchor` parameter
// speaks of another resource than the response's, and is passed over.
// RFC 6249's `pref` (a preferred mirror), `depth` (its directory layout) and
// `geo` (its country) parameters are parsed with the rest and not used: the
// vote and the engine's placement judge mirrors by what they serve.
import FoundationEssentials

struct DuplicateLinks: Equatable {
    /// Mirrors of the file (`rel=duplicate`), the most preferred first (by
    /// `pri`, a link without one last, ties in the order sent).
    var duplicates: [String] = []
    /// Metalink descriptions of the file (`rel=describedby` with `type`
    /// `application/metalink4+xml`), in the order sent; not fetched yet.
    var describedBy: [String] = []

    /// The most mirrors taken from one response (and the most descriptions).
    static let maxMirrors = 16
    /// The most links read from one field value, whatever they are.
    static let maxLinks = 256
    /// The most bytes of a field value read; a link cut by the limit is dropped.
    static let maxFieldBytes = 64 << 10
    /// `pri` when a link has none (RFC 6249 5: the least preferred).
    static let lowestPriority = 999_999

    /// The links of `field` (a Link field value, nil when the response had
    /// none) from the response to a request for `responseURL` (the URL
    /// relative references resolve against), which the user asked for as
    /// `givenURL`. `allowingDowngrade`: an http link is taken from an https
    /// response too.
    init(field: String?, responseURL: String, givenURL: String, allowingDowngrade: Bool = false) {
        guard let field else { return }
        let base = URL(string: responseURL)
        let secure = [responseURL, givenURL].contains { $0.hasPrefixIgnoringASCIICase("https:") }
        // The response's own URL and the user's are no mirror of themselves.
        let loop: Set<String> = [Self.key(responseURL), Self.key(givenURL)]
        var (seenDuplicates, seenDescriptions) = (loop, loop)
        var duplicates: [(url: String, priority: Int)] = []
        for link in Self.links(in: field) where link.parameters["anchor"] == nil {
            let relations = Set(link.relation.split(whereSeparator: \.isWhitespace).map { $0.lowercased() })
            let duplicate = relations.contains("duplicate")
            let description =
                relations.contains("describedby")
                && link.parameters["type"]?.trimmingWhitespace().lowercased() == "application/metalink4+xml"
            guard duplicate || description,
                let url = Self.resolved(link.target, against: base),
                allowingDowngrade || !secure || url.hasPrefixIgnoringASCIICase("https:")
            else { continue }
            let key = Self.key(url)
            if duplicate, seenDuplicates.insert(key).inserted {
                duplicates.append((url, link.parameters["pri"].flatMap(Self.priority) ?? Self.lowestPriority))
            } else if description, describedBy.count < Self.maxMirrors, seenDescriptions.insert(key).inserted {
                describedBy.append(url)
            }
        }
        // A stable sort: links of one `pri` keep the server's order.
        let ranked = duplicates.enumerated().sorted {
            ($0.element.priority, $0.offset) < ($1.element.priority, $1.offset)
        }
        self.duplicates = ranked.prefix(Self.maxMirrors).map(\.element.url)
    }

    /// What makes two URLs one for the loop and duplicate rules: the
    /// origin (scheme, host and port, spelled out: `HeaderPolicy.origin`),
    /// the path and the query; not the fragment, which no request carries.
    static func key(_ url: String) -> String {
        guard let components = URLComponents(string: url) else { return url }
        var key =
            HeaderPolicy.origin(of: url) + (components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath)
        if let query = components.percentEncodedQuery { key += "?" + query }
        return key
    }

    /// `reference` made absolute against `base`, when it is a URI reference
    /// as sent (visible ASCII: URL(string:) would escape a space or other
    /// bytes a server should not send) and the result is a URL a download
    /// may fetch (`RemoteURL`) with no `user:password@` (a server's header
    /// does not choose credentials to send).
    private static func resolved(_ reference: String, against base: URL?) -> String? {
        guard reference.utf8AllSatisfy({ $0 > 0x20 && $0 < 0x7F }),
            let url = URL(string: reference, relativeTo: base)?.absoluteString,
            RemoteURL.problem(url) == nil,
            let components = URLComponents(string: url), components.user == nil, components.password == nil
        else { return nil }
        return url
    }

    /// A `pri` value: 1 to 999999 (RFC 6249 3); anything else is none.
    private static func priority(_ text: String) -> Int? {
        guard !text.isEmpty, text.count <= 6, text.utf8AllSatisfy(\.isASCIIDigit), let value = Int(text), value >= 1
        else { return nil }
        return value
    }
}

extension DuplicateLinks {
    /// One link of a Link field: its target as written and its parameters
    /// by lowercased name (a name given twice keeps its first value, as RFC
    /// 8288 3 asks of `rel`; a name without `=` has the empty value).
    struct Link: Equatable {
        var target: String
        var parameters: [String: String]

        /// The relation types, space-separated (`rel`), empty when none.
        var relation: String { parameters["rel"] ?? "" }
    }

    /// The links of a Link field value, in order, of the first `maxLinks`
    /// read (malformed ones count: each may cost a scan of the value) in
    /// the first `maxFieldBytes` bytes. A link that breaks the syntax (no
    /// `<...>`, stray text after it, an unclosed quote) is skipped up to the
    /// next comma outside a quoted string.
    static func links(in field: String) -> [Link] {
        let all = Array(field.utf8)
        let truncated = all.count > maxFieldBytes
        let bytes = truncated ? Array(all.prefix(maxFieldBytes)) : all
        var reader = LinkReader(bytes: bytes)
        var links: [Link] = []
        for _ in 0..<maxLinks {
            guard let (link, complete) = reader.next() else { break }
            // The last link may have been cut in the middle by the limit: a
            // `pri=12` read as `pri=1`, a URL cut short.
            if let link, complete || !truncated { links.append(link) }
        }
        return links
    }
}

/// Reads the links of a Link field value, one at a time, as bytes.
private struct LinkReader {
    let bytes: [UInt8]
    var index = 0

    /// The next link (nil when it was malformed) and whether a comma ended
    /// it (false: the end of the value did); nil at the end.
    mutating func next() -> (DuplicateLinks.Link?, complete: Bool)? {
        while index < bytes.count, bytes[index] == UInt8(ascii: ",") || bytes[index].isASCIIWhitespace { index += 1 }
        guard index < bytes.count else { return nil }
        guard bytes[index] == UInt8(ascii: "<") else { return skipped() }
        // With no `>` left, no link is left either (and no scan to the end is made twice).
        guard let close = bytes[(index + 1)...].firstIndex(of: UInt8(ascii: ">")) else { return nil }
        let target = String(decoding: bytes[(index + 1)..<close], as: UTF8.self).trimmingWhitespace()
        index = close + 1
        var parameters: [String: String] = [:]
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] != UInt8(ascii: ",") else { break }
            guard bytes[index] == UInt8(ascii: ";") else { return skipped() }
            index += 1
            skipWhitespace()
            let name = String(decoding: token().map(\.asciiLowercased), as: UTF8.self)
            skipWhitespace()
            var value = ""
            if index < bytes.count, bytes[index] == UInt8(ascii: "=") {
                index += 1
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                    guard let quoted = quotedString() else { return skipped() }
                    value = quoted
                } else {
                    value = String(decoding: bare(), as: UTF8.self)
                }
            }
            guard !name.isEmpty else { return skipped() }
            if parameters[name] == nil { parameters[name] = value }
        }
        let complete = index < bytes.count
        return (DuplicateLinks.Link(target: target, parameters: parameters), complete)
    }

    /// A malformed link: skipped up to the next comma outside a quoted string.
    private mutating func skipped() -> (DuplicateLinks.Link?, complete: Bool) {
        var quoted = false
        while index < bytes.count {
            let byte = bytes[index]
            if quoted, byte == UInt8(ascii: "\\") {
                index += 2
                continue
            }
            if byte == UInt8(ascii: "\"") { quoted.toggle() }
            if !quoted, byte == UInt8(ascii: ",") { return (nil, true) }
            index += 1
        }
        return (nil, false)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
            index += 1
        }
    }

    /// A token (RFC 9110 5.6.2), possibly empty.
    private mutating func token() -> ArraySlice<UInt8> {
        let start = index
        while index < bytes.count, bytes[index].isASCIIAlphanumeric || "!#$%&'*+-.^_`|~".utf8.contains(bytes[index]) {
            index += 1
        }
        return bytes[start..<index]
    }

    /// A value not quoted: a token by the grammar, but read up to the next
    /// `;`, `,`, white space or quote, as servers send `type=application/metalink4+xml`.
    private mutating func bare() -> ArraySlice<UInt8> {
        let start = index
        while index < bytes.count, !";,\"".utf8.contains(bytes[index]), !bytes[index].isASCIIWhitespace {
            index += 1
        }
        return bytes[start..<index]
    }

    /// A quoted string from its opening quote, its escapes undone; nil when it is never closed.
    private mutating func quotedString() -> String? {
        var value: [UInt8] = []
        index += 1
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { return String(decoding: value, as: UTF8.self) }
            if byte == UInt8(ascii: "\\") {
                guard index < bytes.count else { return nil }
                value.append(bytes[index])
                index += 1
            } else {
                value.append(byte)
            }
        }
        return nil
    }
}
