// Checksum: an expected digest of the finished file (`--checksum sha256=HEX`,
// also sha1 and md5 for old mirrors), checked before the file is renamed into
// place.
internal import Digests

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A digest the finished file must have.
public struct Checksum: Sendable, Equatable, CustomStringConvertible {
    /// A digest algorithm.
    public enum Algorithm: String, Sendable, CaseIterable {
        /// SHA-256, what `sha256sum` writes.
        case sha256
        /// SHA-1, for old mirrors.
        case sha1
        /// MD5, for old mirrors.
        case md5
        /// SHA-512, what `sha512sum` writes.
        case sha512

        /// Hex digits in a digest of this algorithm.
        public var hexLength: Int { digest.hexLength }

        /// The algorithm as the digest module computes it.
        var digest: DigestAlgorithm {
            switch self {
            case .sha256: return .sha256
            case .sha1: return .sha1
            case .md5: return .md5
            case .sha512: return .sha512
            }
        }
    }

    /// The algorithm.
    public var algorithm: Algorithm
    /// The expected digest, lowercase hex.
    public var hex: String

    /// Parses `ALGORITHM=HEX` (e.g. `sha256=9f86d0...`); nil when malformed.
    public init?(_ text: String) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, let algorithm = Algorithm(rawValue: parts[0].lowercased().filter { $0 != "-" }) else {
            return nil
        }
        self.init(algorithm: algorithm, hex: parts[1])
    }

    /// A checksum of `hex` (any case) with `algorithm`; nil when the hex is not a digest of that length.
    public init?(algorithm: Algorithm, hex: String) {
        let lower = hex.lowercased()
        guard lower.count == algorithm.hexLength, lower.allSatisfy({ $0.isHexDigit }) else { return nil }
        self.algorithm = algorithm
        self.hex = lower
    }

    /// `ALGORITHM=HEX`, as ``init(_:)`` reads it.
    public var description: String { "\(algorithm.rawValue)=\(hex)" }

    /// The digest of the file at `path`, lowercase hex.
    public static func digest(of path: String, algorithm: Algorithm) throws(IOError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw IOError("open", path) }
        defer { close(descriptor) }
        guard let hex = algorithm.digest.hex(ofFileDescriptor: descriptor) else { throw IOError("read", path) }
        return hex
    }

    /// The digest of the open `file` (read with pread: named or not), lowercase hex.
    static func digest(of file: OutputFile, algorithm: Algorithm) throws(IOError) -> String {
        guard let hex = algorithm.digest.hex(ofFileDescriptor: file.descriptor) else {
            throw IOError("read", file.path)
        }
        return hex
    }
}

extension Checksum {
    /// Reads a sums file: lines of `HEX  NAME` (or `HEX *NAME`) as
    /// `sha256sum`, `sha512sum`, `sha1sum` and `md5sum` write them (LF or
    /// CRLF), into digests by file name, for
    /// ``DownloadOptions/checksumList``. The algorithm follows from the
    /// digest's length; a leading `./` is dropped from a name; `#` starts a
    /// comment line. Throws `DownloadError.usage` naming the first line that
    /// is not a digest and a name, or that gives a name a second, different
    /// digest.
    public static func list(parsing text: String) throws(DownloadError) -> [String: Checksum] {
        var checksums: [String: Checksum] = [:]
        for (index, line) in text.textLines.enumerated() {
            let trimmed = line.drop { $0 == " " }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let parts = trimmed.split(separator: " ", maxSplits: 1).map(String.init)
            let algorithms: [Algorithm] = [.sha256, .sha512, .sha1, .md5]
            guard parts.count == 2, let algorithm = algorithms.first(where: { $0.hexLength == parts[0].count }),
                let checksum = Checksum(algorithm: algorithm, hex: parts[0])
            else {
                throw .usage("checksum file line \(index + 1): expected 'HEX  NAME'")
            }
            var name = parts[1].drop { $0 == " " }
            if name.hasPrefix("*") { name = name.dropFirst() }
            if name.hasPrefix("./") { name = name.dropFirst(2) }
            if let other = checksums[String(name)], other != checksum {
                throw .usage("checksum file line \(index + 1): a second, different digest for \(name)")
            }
            checksums[String(name)] = checksum
        }
        return checksums
    }
}

extension DownloadOptions {
    /// The digest the file saved at `output` must have: `checksum`, else the
    /// entry of `checksumList` for its name, else (with `discovery`) the
    /// digest `remote`'s server published, with the field it came from;
    /// throws when the list has no entry and the server published none (the
    /// data stays at `data`, the `.part` file).
    func expectedChecksum(
        savingAs output: String, data: String, remote: RemoteFile
    ) throws(DownloadError) -> (checksum: Checksum, publishedIn: String?)? {
        if let checksum { return (checksum, nil) }
        // The name is cut out only for a list (optional chaining skips the call without one).
        func name() -> String { output.split(separator: "/").last.map(String.init) ?? output }
        if let checksum = checksumList?[name()] { return (checksum, nil) }
        if discovery, let published = PublishedDigest.checksum(in: remote.headers) {
            return (published.checksum, published.field)
        }
        guard checksumList != nil else { return nil }
        throw .verification(
            "the checksum list has no entry for \(name()), so it cannot be verified; the data stays in \(data) "
                + "for a later download whose list has one")
    }
}
