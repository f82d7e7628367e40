// RemoteURL: what a download's URL may be: an absolute http or https URL with
// a host. Checked here once: `Download` refuses anything else before a request
// goes out, and the rangeget command asks the same of every URL it is given
// (arguments, lists, bench) before it starts. A URL without a scheme is not
// guessed at (curl assumes http://): the message suggests one, http:// for a
// host on the machine or the local network, else https://.
import FoundationEssentials

/// The check every URL of a download passes.
package enum RemoteURL {
    /// Why `url` cannot be downloaded (one line), or nil when it can.
    package static func problem(_ url: String) -> String? {
        if isHTTP(url) { return nil }
        // A host name with a dot, a port or a path is worth a suggestion; `notaurl` is not.
        if !url.contains("://"), let host = URLComponents(string: "https://" + url)?.host, isHTTP("https://" + url),
            host.contains(".") || host.contains(":") || host == "localhost" || url.contains("/") || url.contains(":")
        {
            return "not an http or https URL: '\(url)'; did you mean '\(suggestedScheme(for: host))://\(url)'?"
        }
        return "not an http or https URL: '\(url)'"
    }

    /// Throws `DownloadError.usage` with the `problem` of `url`, if it has one.
    package static func check(_ url: String) throws(DownloadError) {
        if let problem = problem(url) { throw .usage(problem) }
    }

    /// The scheme to suggest for `host`, typed without one: `http` for a
    /// loopback or private address, a single-label name or a local domain
    /// (such servers rarely have a certificate), else `https`.
    static func suggestedScheme(for host: String) -> String {
        let name = String(host.lowercased().filter { $0 != "[" && $0 != "]" })
        if name.contains(":") {
            // IPv6: loopback, link-local (fe80::/10), unique local (fc00::/7).
            let local = ["fe8", "fe9", "fea", "feb", "fc", "fd"].contains { name.hasPrefix($0) }
            return name == "::1" || local ? "http" : "https"
        }
        if !name.contains(".") { return "http" }
        for suffix in [".local", ".lan", ".internal", ".home.arpa", ".localhost"] where name.hasSuffix(suffix) {
            return "http"
        }
        let octets = name.split(separator: ".", omittingEmptySubsequences: false).map { UInt8($0) }
        guard octets.count == 4, octets.allSatisfy({ $0 != nil }) else { return "https" }
        switch (octets[0]!, octets[1]!) {
        case (127, _), (10, _), (192, 168), (169, 254): return "http"
        case (172, 16...31), (100, 64...127): return "http"
        default: return "https"
        }
    }

    private static func isHTTP(_ url: String) -> Bool {
        isPlainHTTP(url) || isHTTPByComponents(url)
    }

    /// The whole rule, by URLComponents: an http or https scheme and a host.
    static func isHTTPByComponents(_ url: String) -> Bool {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host
        else { return false }
        return !host.isEmpty
    }

    /// True for the common URL that is plainly an http or https URL with a
    /// host, read as bytes: `http://` or `https://` (any case), a host of
    /// letters, digits, dots and hyphens (no punycode label), an optional port of 1 to 5
    /// digits, then nothing or a `/`, `?` or `#` and only characters a URL
    /// may hold unescaped, with every `%` followed by two hex digits. Every
    /// URL it accepts URLComponents accepts with the same host (a property
    /// test compares them); any other is left to URLComponents. A list of
    /// 20,000 lines was checked twice as fast.
    static func isPlainHTTP(_ url: String) -> Bool {
        let test = { (bytes: UnsafeBufferPointer<UInt8>) -> Bool in
            var index: Int
            if bytes.startsIgnoringASCIICase("http://".utf8) {
                index = 7
            } else if bytes.startsIgnoringASCIICase("https://".utf8) {
                index = 8
            } else {
                return false
            }
            let hostStart = index
            while index < bytes.count,
                bytes[index].isASCIIAlphanumeric || bytes[index] == UInt8(ascii: ".")
                    || bytes[index] == UInt8(ascii: "-")
            { index += 1 }
            guard index > hostStart else { return false }
            // A punycode label (`xn--`) is left to URLComponents: with ICU
            // loaded (a program linking all of Foundation) it decodes it,
            // and finds no host in one it cannot decode.
            let host = UnsafeBufferPointer(rebasing: bytes[hostStart..<index])
            if host.indices.contains(where: { start in
                (start == 0 || host[start - 1] == UInt8(ascii: "."))
                    && host[start...].startsIgnoringASCIICase("xn--".utf8)
            }) {
                return false
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ":") {
                index += 1
                let portStart = index
                while index < bytes.count, bytes[index].isASCIIDigit { index += 1 }
                guard (1...5).contains(index - portStart) else { return false }
            }
            guard index == bytes.count || "/?#".utf8.contains(bytes[index]) else { return false }
            var fragment = false
            while index < bytes.count {
                let byte = bytes[index]
                // A fragment holds no second '#'.
                if byte == UInt8(ascii: "#") {
                    guard !fragment else { return false }
                    fragment = true
                }
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < bytes.count, bytes[index + 1].isASCIIHexDigit, bytes[index + 2].isASCIIHexDigit
                    else { return false }
                    index += 3
                    continue
                }
                guard byte.isASCIIAlphanumeric || "-._~!$&'()*+,;=:@/?#".utf8.contains(byte) else { return false }
                index += 1
            }
            return true
        }
        return url.withUTF8Bytes(test)
    }
}
