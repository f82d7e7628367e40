// Checksum: an expected digest of the finished file (`--checksum sha256=HEX`,
// also sha1 and md5 for old mirrors), checked before the file is renamed into
// place.
import Digests
import Glibc

/// A digest the finished file must have.
public struct Checksum: Sendable, Equatable, CustomStringConvertible {
    /// The digest algorithms, re-exported for callers of the library.
    public typealias Algorithm = DigestAlgorithm

    /// The algorithm.
    public var algorithm: DigestAlgorithm
    /// The expected digest, lowercase hex.
    public var hex: String

    /// Parses `ALGORITHM=HEX` (e.g. `sha256=9f86d0...`); nil when malformed.
    public init?(_ text: String) {
        let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
        guard parts.count == 2, let algorithm = DigestAlgorithm(rawValue: parts[0].lowercased().filter { $0 != "-" }) else {
            return nil
        }
        self.init(algorithm: algorithm, hex: parts[1])
    }

    /// A checksum of `hex` (any case) with `algorithm`; nil when the hex is not a digest of that length.
    public init?(algorithm: DigestAlgorithm, hex: String) {
        let lower = hex.lowercased()
        guard lower.count == algorithm.hexLength, lower.allSatisfy({ $0.isHexDigit }) else { return nil }
        self.algorithm = algorithm
        self.hex = lower
    }

    public var description: String { "\(algorithm.rawValue)=\(hex)" }

    /// The digest of the file at `path`, lowercase hex.
    public static func digest(of path: String, algorithm: DigestAlgorithm) throws(IOError) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw IOError("open", path) }
        defer { close(descriptor) }
        guard let hex = algorithm.hex(ofFileDescriptor: descriptor) else { throw IOError("read", path) }
        return hex
    }

    /// The digest of the open `file` (read with pread: named or not), lowercase hex.
    static func digest(of file: OutputFile, algorithm: DigestAlgorithm) throws(IOError) -> String {
        guard let hex = algorithm.hex(ofFileDescriptor: file.descriptor) else { throw IOError("read", file.path) }
        return hex
    }
}

extension DownloadOptions {
    /// The digest the file saved at `output` must have: `checksum`, else the
    /// entry of `checksumList` for its name; throws when the list has none
    /// (the data stays at `data`, the `.part` file).
    func expectedChecksum(savingAs output: String, data: String) throws(DownloadError) -> Checksum? {
        if let checksum { return checksum }
        guard let checksumList else { return nil }
        let name = output.split(separator: "/").last.map(String.init) ?? output
        guard let checksum = checksumList[name] else {
            throw .verification(
                "the checksum list has no entry for \(name), so it cannot be verified; the data stays in \(data) "
                    + "for a later download whose list has one")
        }
        return checksum
    }
}
