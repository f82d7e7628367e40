// HeaderPolicy: where the user's extra request headers (`-H`) may go. They
// were given for the URLs the user named; another origin (scheme, host or
// port) that a redirect leads to gets only the few that say what the client
// accepts, never who it is. An allow-list, because a list of credential
// names is never complete (PRIVATE-TOKEN, X-Api-Key, X-Amz-Security-Token,
// Proxy-Authorization, ...).
//
// libcurl follows redirects inside one request and forwards every custom
// header but Authorization and Cookie to the next host (measured with
// 7.88.1: PRIVATE-TOKEN, X-Api-Key and Proxy-Authorization arrive at another
// port), so a request carrying any header off the list is not followed by
// libcurl: `EasyHandle.performFollowingRedirects` takes each hop itself.
import FoundationEssentials

enum HeaderPolicy {
    /// Header names any origin may get: what the client accepts, and the
    /// validator a ranged request carries. Lowercased.
    static let harmless: Set<String> = ["accept", "accept-language", "cache-control", "if-range", "user-agent"]

    /// True when the header line `Name: value` may go to any origin.
    static func mayCrossOrigins(_ line: String) -> Bool {
        harmless.contains(line.prefix { $0 != ":" }.trimmingWhitespace().lowercased())
    }

    /// The lines of `headers`, given for `origin`, that may go to `target`:
    /// all of them at the same origin, else only the harmless ones.
    static func headers(_ headers: [String], givenFor origin: String, sentTo target: String) -> [String] {
        sameOrigin(origin, target) ? headers : headers.filter(mayCrossOrigins)
    }

    /// True when both URLs have the same scheme, host and port.
    static func sameOrigin(_ one: String, _ other: String) -> Bool {
        origin(of: one) == origin(of: other)
    }

    /// `scheme://host:port` of `url`, the port spelled out (also the key of `--max-per-host`).
    /// A URL in which URLComponents finds no host (with ICU loaded, a
    /// punycode label that does not decode) is its own origin: two of them
    /// never share one.
    static func origin(of url: String) -> String {
        guard let components = URLComponents(string: url), let host = components.host else { return url }
        let scheme = components.scheme?.lowercased() ?? "http"
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host.lowercased()):\(port)"
    }

    /// `target`, at the origin of `origin`, with the `user:password@` of
    /// `origin` when it has none of its own (libcurl keeps sending URL
    /// credentials to the same origin along redirects, and so does a hop
    /// taken by hand); any other target as it is.
    static func carryingUserinfo(of origin: String, to target: String) -> String {
        guard sameOrigin(origin, target), let given = URLComponents(string: origin), given.user != nil,
            var next = URLComponents(string: target), next.user == nil
        else { return target }
        next.percentEncodedUser = given.percentEncodedUser
        next.percentEncodedPassword = given.percentEncodedPassword
        return next.string ?? target
    }
}
