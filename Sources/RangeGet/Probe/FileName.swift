// FileName: the local name of a download when the user gave none. Server
// input (Content-Disposition, URL path) is reduced to a safe base name: no
// directories, no leading dot, no control characters (curl CVE-2020-8177,
// aria2 CVE-2010-1512).
import FoundationEssentials

/// Chooses and sanitises output file names.
public enum FileName {
    /// The name to save `url` under, preferring the `Content-Disposition` value.
    public static func choose(url: String, contentDisposition: String?) -> String {
        if let header = contentDisposition, let name = fromContentDisposition(header).flatMap(sanitize) {
            return name
        }
        if let name = fromURL(url).flatMap(sanitize) { return name }
        return "index.html"
    }

    /// The filename parameter of a `Content-Disposition` value; `filename*`
    /// (RFC 8187, UTF-8) wins over `filename`.
    public static func fromContentDisposition(_ header: String) -> String? {
        var plain: String?
        var extended: String?
        for parameter in splitParameters(header).dropFirst() {
            guard let equals = parameter.firstIndex(of: "=") else { continue }
            let key = parameter[..<equals].trimmingWhitespace().lowercased()
            var value = parameter[parameter.index(after: equals)...].trimmingWhitespace()
            if key == "filename*" {
                let pieces = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
                if pieces.count == 3, pieces[0].lowercased() == "utf-8" {
                    extended = String(pieces[2]).removingPercentEncoding
                }
            } else if key == "filename" {
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                    value = String(value.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"")
                }
                plain = value
            }
        }
        return extended ?? plain
    }

    /// The last path segment of `url`, percent-decoded.
    public static func fromURL(_ url: String) -> String? {
        guard let components = URLComponents(string: url) else { return nil }
        let path = components.percentEncodedPath
        guard let last = path.split(separator: "/").last else { return nil }
        return String(last).removingPercentEncoding ?? String(last)
    }

    /// A base name that cannot leave the target directory or hide itself; nil
    /// when nothing usable is left.
    public static func sanitize(_ name: String) -> String? {
        let base = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String(base.unicodeScalars.filter { scalar in
            scalar.value >= 0x20 && scalar.value != 0x7F && !(0x80...0x9F).contains(scalar.value)
        }.map(Character.init))
        cleaned = cleaned.trimmingWhitespace()
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        cleaned = cleaned.trimmingWhitespace()
        if cleaned.utf8.count > 200 {
            cleaned = String(decoding: cleaned.utf8.prefix(200), as: UTF8.self)
                .replacingOccurrences(of: "\u{FFFD}", with: "")
        }
        return cleaned.isEmpty ? nil : cleaned
    }

    /// Splits a header on `;` outside quoted strings.
    private static func splitParameters(_ header: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in header {
            if escaped { current.append(character); escaped = false; continue }
            if character == "\\" && quoted { current.append(character); escaped = true; continue }
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
