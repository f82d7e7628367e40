// PieceHashes: the digest of each fixed-length piece of a file, as a
// Metalink's `<pieces>` publishes them (RFC 5854 4.2.12). With them a bad
// byte costs one piece, not the file: each piece is checked once all its
// bytes are written, and one that fails is fetched again. The digests are
// kept as one flat byte array (a 100,000-piece SHA-256 list is 3.2 MB, not
// 100,000 strings).
internal import Digests

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The digest of every piece of a file: piece `i` covers bytes
/// `i * length ..< min((i + 1) * length, size)`.
public struct PieceHashes: Sendable, Equatable {
    /// The digest algorithm of every piece.
    public let algorithm: Checksum.Algorithm
    /// The length of every piece but the last, in bytes.
    public let length: Int64
    /// The digests, `count * digestLength` bytes in piece order.
    private let digests: [UInt8]

    /// The most pieces a file may have: a million SHA-256 digests would be
    /// 32 MB held for one file, and no real Metalink has them (a 1 TiB file
    /// at 16 MiB pieces is 65,536).
    public static let mostPieces = 262_144

    /// Pieces of `length` bytes whose digests are `hexDigests` (any case),
    /// in order; nil when a digest is not hex of the algorithm's length,
    /// `length` is not positive, or there are none or more than ``mostPieces``.
    public init?(algorithm: Checksum.Algorithm, length: Int64, hexDigests: [String]) {
        guard length > 0, !hexDigests.isEmpty, hexDigests.count <= Self.mostPieces else { return nil }
        let size = algorithm.hexLength / 2
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hexDigests.count * size)
        for hex in hexDigests {
            let utf8 = Array(hex.utf8)
            guard utf8.count == size * 2 else { return nil }
            for index in stride(from: 0, to: utf8.count, by: 2) {
                guard let high = utf8[index].hexValue, let low = utf8[index + 1].hexValue else { return nil }
                bytes.append(high << 4 | low)
            }
        }
        self.algorithm = algorithm
        self.length = length
        self.digests = bytes
    }

    /// How many pieces there are.
    public var count: Int { digests.count / digestLength }

    /// The bytes of one digest.
    private var digestLength: Int { algorithm.hexLength / 2 }

    /// The digest of piece `index`, lowercase hex.
    public func hex(ofPiece index: Int) -> String {
        DigestAlgorithm.hex(digests[index * digestLength..<(index + 1) * digestLength])
    }

    /// The pieces a file of `size` bytes has at this length.
    static func pieceCount(size: Int64, length: Int64) -> Int64 {
        size == 0 ? 0 : (size - 1) / length + 1
    }

    /// True when these pieces describe a file of exactly `size` bytes: as
    /// many digests as pieces of `length` that size has.
    public func fits(size: Int64) -> Bool {
        size > 0 && Self.pieceCount(size: size, length: length) == Int64(count)
    }

    /// The bytes piece `index` covers in a file of `size` bytes.
    public func range(ofPiece index: Int, size: Int64) -> ByteRange {
        let start = Int64(index) * length
        return ByteRange(start, min(start + length, size))
    }

    /// True when the `count` bytes at `offset` of the file at `descriptor`
    /// are piece `index` as published (false also when they cannot be read).
    func matches(piece index: Int, descriptor: Int32, offset: Int64, count: Int64) -> Bool {
        // Hashed where the page cache holds it (mapped, not copied: a read
        // copied a GiB in 0.2 s of system time); read where it cannot be mapped.
        let page = Int64(sysconf(Int32(_SC_PAGESIZE)))
        let start = offset / page * page
        let length = Int(offset - start + count)
        // The engine's `.part` keeps its full size while pieces are hashed
        // (preallocated, truncated only once the engine and its hashing end).
        let mapped = mmap(nil, length, PROT_READ, MAP_SHARED | Self.populate, descriptor, off_t(start))
        guard let mapped, mapped != MAP_FAILED else {
            return algorithm.digest.hex(ofFileDescriptor: descriptor, from: offset, count: count) == hex(ofPiece: index)
        }
        defer { munmap(mapped, length) }
        let bytes = UnsafeRawBufferPointer(start: mapped + Int(offset - start), count: Int(count))
        return algorithm.digest.hex(of: bytes) == hex(ofPiece: index)
    }

    /// The pieces of a whole file held in memory, `bytes`, that do not
    /// match their digests (all of them when the size is not this list's).
    func badPieces(in bytes: UnsafeRawBufferPointer) -> [Int] {
        let size = Int64(bytes.count)
        guard fits(size: size) else { return Array(0..<count) }
        return (0..<count).filter { index in
            let range = self.range(ofPiece: index, size: size)
            let piece = UnsafeRawBufferPointer(rebasing: bytes[Int(range.start)..<Int(range.end)])
            return algorithm.digest.hex(of: piece) != hex(ofPiece: index)
        }
    }

    #if os(Linux)
    /// Maps a piece's pages in at once, not one fault at a time.
    private static let populate = MAP_POPULATE
    #else
    private static let populate: Int32 = 0
    #endif

    /// Names this list of digests in a manifest: the algorithm, the piece
    /// length and the SHA-256 of every digest, so a resume knows whether
    /// the pieces it checked were checked against these.
    var fingerprint: String {
        let all = digests.withUnsafeBytes { DigestAlgorithm.sha256.hex(of: $0) }
        return "\(algorithm.rawValue)/\(length)/\(all)"
    }
}

extension UInt8 {
    /// The value of a hex digit (either case), nil for any other byte.
    fileprivate var hexValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return self - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
