// Digests: SHA-256, SHA-1, MD5 and SHA-512 with OpenSSL's libcrypto, in a
// module of its own (importing OpenSSL's headers next to curl's in one module
// broke curl's constants in optimized builds).
internal import CCrypto
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A digest algorithm libcrypto computes.
public enum DigestAlgorithm: String, Sendable, CaseIterable {
    case sha256, sha1, md5, sha512

    /// Hex digits in a digest.
    public var hexLength: Int {
        switch self {
        case .md5: return 32
        case .sha1: return 40
        case .sha256: return 64
        case .sha512: return 128
        }
    }

    fileprivate var evp: OpaquePointer? {
        switch self {
        case .md5: return EVP_md5()
        case .sha1: return EVP_sha1()
        case .sha256: return EVP_sha256()
        case .sha512: return EVP_sha512()
        }
    }

    /// The digest of `bytes`, lowercase hex.
    public func hex(of bytes: UnsafeRawBufferPointer) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        _ = EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, evp, nil)
        return Self.hex(digest.prefix(Int(length)))
    }

    /// The digest of the file open at `descriptor`, read from its start in
    /// 1 MiB blocks; nil with `errno` set when a read fails.
    public func hex(ofFileDescriptor descriptor: Int32) -> String? {
        hex(ofFileDescriptor: descriptor, from: 0, count: nil)
    }

    /// The digest of `count` bytes of the file at `descriptor` from `offset`
    /// (nil: to its end), read with pread in 1 MiB blocks, lowercase hex;
    /// nil when a read fails or the file ends before `count` bytes.
    public func hex(ofFileDescriptor descriptor: Int32, from offset: Int64, count: Int64?) -> String? {
        guard let digester = Digester(self) else { return nil }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        var position = off_t(offset)
        var left = count ?? .max
        while left > 0 {
            let read = retryingOnInterrupt { pread(descriptor, buffer, Int(min(Int64(size), left)), position) }
            if read < 0 { return nil }
            if read == 0 { break }
            digester.update(UnsafeRawBufferPointer(start: buffer, count: read))
            position += off_t(read)
            left -= Int64(read)
        }
        if count != nil, left > 0 { return nil }
        return digester.finish()
    }

    /// The libcrypto that computes every digest, as it names itself at run
    /// time (`OpenSSL_version(OPENSSL_VERSION)`: "OpenSSL 3.0.17 1 Jul 2025").
    public static var library: String {
        String(cString: OpenSSL_version(OPENSSL_VERSION))
    }

    /// `bytes` as lowercase hex, two digits a byte.
    public static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// A digest computed piece by piece, as bytes come (a file read in blocks, a
/// download streamed in order): `update` in order, then `finish` once.
public final class Digester {
    private let context: OpaquePointer

    /// A digester for `algorithm`; nil when libcrypto cannot make one.
    public init?(_ algorithm: DigestAlgorithm) {
        guard let context = EVP_MD_CTX_new() else { return nil }
        self.context = context
        EVP_DigestInit_ex(context, algorithm.evp, nil)
    }

    deinit {
        EVP_MD_CTX_free(context)
    }

    /// Adds the next `bytes`.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
    }

    /// The digest of every byte added, lowercase hex.
    public func finish() -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return DigestAlgorithm.hex(digest.prefix(Int(length)))
    }
}
