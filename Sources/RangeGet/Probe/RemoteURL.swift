// RemoteURL: what a download's URL may be: an absolute http or https URL with
// a host. Checked here once: `Download` refuses anything else before a request
// goes out, and the rangeget command asks the same of every URL it is given
// (arguments, lists, bench) before it starts. A URL without a scheme is not
// guessed at (curl assumes http://): the message suggests the https:// one.
import FoundationEssentials

/// The check every URL of a download passes.
public enum RemoteURL {
    /// Why `url` cannot be downloaded (one line), or nil when it can.
    public static func problem(_ url: String) -> String? {
        if isHTTP(url) { return nil }
        // A host name with a dot (or localhost) is worth a suggestion; `notaurl` is not.
        if !url.contains("://"), let host = URLComponents(string: "https://" + url)?.host, isHTTP("https://" + url),
           host.contains(".") || host == "localhost" {
            return "not an http or https URL: '\(url)'; did you mean 'https://\(url)'?"
        }
        return "not an http or https URL: '\(url)'"
    }

    /// Throws `DownloadError.usage` with the `problem` of `url`, if it has one.
    public static func check(_ url: String) throws(DownloadError) {
        if let problem = problem(url) { throw .usage(problem) }
    }

    private static func isHTTP(_ url: String) -> Bool {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = components.host else { return false }
        return !host.isEmpty
    }
}
