// FileName: the local name of a download when the user gave none. Server
// input (Content-Disposition, URL path) is reduced to a safe base name: no
// directories, no leading dot, no control characters (curl CVE-2020-8177,
// aria2 CVE-2010-1512).
import FoundationEssentials
import SystemSupport

/// Chooses and sanitises output file names.
package enum FileName {
    /// The name to save `url` under, preferring the `Content-Disposition` value.
    package static func choose(url: String, contentDisposition: String?) -> String {
        if let header = contentDisposition, let name = fromContentDisposition(header).flatMap(sanitize) {
            return name
        }
        if let name = fromURL(url).flatMap(sanitize) { return name }
        return "index.html"
    }

    /// The filename parameter of a `Content-Disposition` value; `filename*`
    /// (RFC 8187, UTF-8) wins over `filename`.
    package static func fromContentDisposition(_ header: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in splitParameters(header).dropFirst() {
            guard let equals = parameter.firstIndex(of: "=") else { continue }
            let key = parameter[..<equals].trimmingWhitespace().lowercased()
            var value = parameter[parameter.index(after: equals)...].trimmingWhitespace()
            if key == "filename*" {
                let pieces = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
                if pieces.count == 3, pieces[0].lowercased() == "utf-8" {
                    extended = percentDecoded(pieces[2])
                }
            } else if key == "filename" {
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                    value = String(value.dropFirst().dropLast()).replacing("\\\"", with: "\"")
                }
                plain = value
            }
        }
        return extended ?? plain
    }

    /// The last path segment of `url` (an absolute URL, as `RemoteURL`
    /// accepts), percent-decoded. Read by hand rather than with
    /// URLComponents: a list names every file by its URL, and this runs once
    /// per file. The path starts at the first `/` after `scheme://` (the
    /// authority holds none) and ends at `?` or `#`.
    /// Read as UTF-8 bytes: the delimiters are ASCII.
    package static func fromURL(_ url: String) -> String? {
        let bytes = url.utf8
        let (slash, question, hash) = (UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"))
        guard
            let colon = bytes.indices.first(where: { index in
                bytes[index...].starts(with: "://".utf8)
            })
        else { return nil }
        let afterScheme = bytes[bytes.index(colon, offsetBy: 3)...]
        guard let start = afterScheme.firstIndex(where: { $0 == slash || $0 == question || $0 == hash }),
            afterScheme[start] == slash
        else { return nil }
        let path = afterScheme[start...].prefix { $0 != question && $0 != hash }
        // The last non-empty segment: trailing slashes dropped, then what follows the last one.
        var end = path.endIndex
        while end > path.startIndex, path[path.index(before: end)] == slash { end = path.index(before: end) }
        let trimmed = path[..<end]
        guard !trimmed.isEmpty else { return nil }
        let segment = Substring(
            trimmed[(trimmed.lastIndex(of: slash).map(trimmed.index(after:)) ?? trimmed.startIndex)...])
        return percentDecoded(segment) ?? String(segment)
    }

    /// A base name that cannot leave the target directory or hide itself; nil
    /// when nothing usable is left.
    package static func sanitize(_ name: String) -> String? {
        // Most names are printable ASCII with nothing to remove: kept as they are.
        let bytes = name.utf8
        if let first = bytes.first, let last = bytes.last, bytes.count <= 200,
            first != UInt8(ascii: "."), first != UInt8(ascii: " "), last != UInt8(ascii: " "),
            bytes.allSatisfy({ $0.isPrintableASCII && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "\\") })
        {
            return name
        }
        // Work on scalars, not Characters: a combining or prepended mark glues
        // onto a `/` or `.` and hides it from Character comparisons.
        var scalars = Array(name.unicodeScalars)
        if let separator = scalars.lastIndex(where: { $0 == "/" || $0 == "\\" }) {
            scalars.removeSubrange(...separator)
        }
        // No control, format (zero-width, BOM, bidi) or line-separator characters.
        scalars.removeAll { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned, .surrogate, .privateUse:
                return true
            default:
                return false
            }
        }
        // No leading dot (hidden files, "." and ".."), no leading space or
        // stray combining mark (which would glue onto a dot), no trailing space.
        while let first = scalars.first,
            first == "." || first.properties.isWhitespace || first.properties.generalCategory.isMark
        {
            scalars.removeFirst()
        }
        // At most 200 bytes of UTF-8, cut on a scalar boundary.
        var length = 0
        if let tooLong = scalars.firstIndex(where: { scalar in
            length += String(scalar).utf8.count
            return length > 200
        }) {
            scalars.removeSubrange(tooLong...)
        }
        while let last = scalars.last, last.properties.isWhitespace { scalars.removeLast() }
        var cleaned = String.UnicodeScalarView()
        cleaned.append(contentsOf: scalars)
        return scalars.isEmpty ? nil : String(cleaned)
    }

    /// Splits a header on `;` outside quoted strings.
    private static func splitParameters(_ header: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in header {
            if escaped {
                current.append(character)
                escaped = false
                continue
            }
            if character == "\\" && quoted {
                current.append(character)
                escaped = true
                continue
            }
            if character == "\"" { quoted.toggle() }
            if character == ";" && !quoted {
                parts.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        parts.append(current)
        return parts
    }
}

extension Unicode.GeneralCategory {
    fileprivate var isMark: Bool { self == .nonspacingMark || self == .spacingMark || self == .enclosingMark }
}
