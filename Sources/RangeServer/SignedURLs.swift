// Expiring signed URLs, as S3 and CDNs issue them: a token per URL, valid
// for one path until a deadline. Pure bookkeeping; the clock is the caller's.

/// The tokens issued for signed URLs and their deadlines.
struct SignedURLs {
    private struct Grant {
        var path: String
        var expiry: Double
    }

    private var grants: [String: Grant] = [:]

    /// A fresh token for `path` (a resource key, without leading `/`) that is
    /// valid until `now + lifetime`; tokens already expired are forgotten.
    mutating func issue(for path: String, lifetime: Double, now: Double) -> String {
        grants = grants.filter { $0.value.expiry > now }
        var generator = SystemRandomNumberGenerator()
        var token: String
        repeat {
            token = (0..<2).map { _ in hex(generator.next()) }.joined()
        } while grants[token] != nil
        grants[token] = Grant(path: path, expiry: now + lifetime)
        return token
    }

    /// Whether `token` was issued for `path` and has not expired at `now`.
    func admits(token: String?, path: String, now: Double) -> Bool {
        guard let token, let grant = grants[token] else { return false }
        return grant.path == path && now < grant.expiry
    }

    /// The value of the `token` query parameter of a request-target, if any.
    static func token(inTarget target: String) -> String? {
        guard let query = target.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
        for parameter in query.split(separator: "&") where parameter.hasPrefix("token=") {
            return String(parameter.dropFirst("token=".count))
        }
        return nil
    }

    private func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
