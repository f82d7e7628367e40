// PublishedDigest: the whole file's digest a server publishes in its
// response head, `Repr-Digest` (RFC 9530: `sha-256=:BASE64:`, a structured
// dictionary) or the older `Digest` (RFC 3230: `SHA-256=BASE64`). Either
// names the digest of the whole representation, so a ranged response
// carries the file's, not the range's (`Content-Digest` is the body's, and
// is not read). Only SHA-512 and SHA-256 are taken, the strongest first:
// MD5 and SHA-1 are the registries' deprecated ones, and a value that does
// not decode to its algorithm's length is no digest. `Repr-Digest` wins
// over `Digest` when both are there.
internal import Digests
import FoundationEssentials

enum PublishedDigest {
    /// The digest `headers` (lowercased names) publish for the whole file,
    /// and the field it came from; nil when none usable is there.
    static func checksum(in headers: [String: String]) -> (checksum: Checksum, field: String)? {
        for field in ["repr-digest", "digest"] {
            guard let value = headers[field] else { continue }
            let digests = parse(value, structured: field == "repr-digest")
            for algorithm in [Checksum.Algorithm.sha512, .sha256] {
                if let hex = digests[algorithm], let checksum = Checksum(algorithm: algorithm, hex: hex) {
                    return (checksum, field)
                }
            }
        }
        return nil
    }

    /// The digests a field's value lists, by algorithm, in lowercase hex.
    /// `structured`: RFC 9530's `name=:base64:`; else RFC 3230's `NAME=base64`.
    static func parse(_ value: String, structured: Bool) -> [Checksum.Algorithm: String] {
        var digests: [Checksum.Algorithm: String] = [:]
        for member in value.split(separator: ",") {
            guard let equals = member.firstIndex(of: "=") else { continue }
            let name = member[..<equals].trimmingWhitespace().lowercased()
            var encoded = Substring(member[member.index(after: equals)...].trimmingWhitespace())
            // A structured field's parameters (`;...`) are not part of the value.
            if structured {
                if let semicolon = encoded.firstIndex(of: ";") { encoded = encoded[..<semicolon] }
                guard encoded.count >= 2, encoded.first == ":", encoded.last == ":" else { continue }
                encoded = encoded.dropFirst().dropLast()
            }
            let algorithm: Checksum.Algorithm
            switch name {
            case "sha-256": algorithm = .sha256
            case "sha-512": algorithm = .sha512
            default: continue
            }
            guard let bytes = Data(base64Encoded: String(encoded)), bytes.count * 2 == algorithm.hexLength else {
                continue
            }
            digests[algorithm] = DigestAlgorithm.hex(Array(bytes)[...])
        }
        return digests
    }
}
