// What the server can serve: generated (deterministic, no storage),
// in-memory bytes, or a file; plus the validators and headers sent with it.
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A representation the server serves at a path, with its validators.
///
/// Generated content needs no storage: byte `i` is `pattern(seed)[i % 1_048_573]`,
/// where the pattern is one SplitMix64 block per seed, computed once and
/// cached. The period is prime, so a range shifted by anything but a
/// multiple of it does not compare equal to the expected bytes.
public struct Resource: Sendable {
    enum Content: Sendable {
        case generated(seed: UInt64, pattern: [UInt8])
        case data([UInt8], hash: UInt64)
        /// `identity` is nil when the file could not be stat'ed at creation.
        case file(path: String, identity: FileIdentity?)
    }

    /// What identifies a file's version, as `stat` reports it.
    struct FileIdentity: Sendable, Equatable {
        var inode: UInt64
        var modifiedSeconds: Int64
        var modifiedNanoseconds: Int64
    }

    private enum ETagSetting: Sendable {
        case automatic
        case custom(String?)
    }

    /// The length of the generated pattern: a prime, so shifts show.
    static let patternLength = 1_048_573

    /// The Last-Modified of generated and in-memory resources: 2024-01-01T00:00:00Z.
    public static let defaultLastModified = Date(timeIntervalSince1970: 1_704_067_200)

    var content: Content
    /// Bumped each time the resource is replaced by an equal-looking one or
    /// changed by a fault, so its automatic ETag changes.
    var generation = 0
    private var etagSetting = ETagSetting.automatic

    /// The size in bytes of the representation.
    public private(set) var size: Int64
    /// The Last-Modified date (sent as an IMF-fixdate); nil sends none.
    public var lastModified: Date?
    /// The Content-Type header value.
    public var contentType = "application/octet-stream"
    /// An optional Content-Disposition header value.
    public var contentDisposition: String?

    /// The ETag header value, quotes included; nil sends none.
    ///
    /// By default a strong ETag from the content's identity and a generation
    /// counter, e.g. `"rg-1-1048576-0"` for generated content of seed 1, so
    /// servers given the same resource agree (mirrors). Set it to any value,
    /// weak ones (`W/"x"`) included.
    public var etag: String? {
        get {
            switch etagSetting {
            case .custom(let value): return value
            case .automatic: return "\"\(identity)-\(generation)\""
            }
        }
        set { etagSetting = .custom(newValue) }
    }

    /// Whether the ETag is the automatic one (not set by hand).
    var hasAutomaticETag: Bool {
        if case .automatic = etagSetting { return true }
        return false
    }

    private var identity: String {
        switch content {
        case .generated(let seed, _):
            return "rg-\(seed)-\(size)"
        case .data(_, let hash):
            return "rg-d\(String(hash, radix: 16))-\(size)"
        case .file(_, let identity):
            let inode = String(identity?.inode ?? 0, radix: 16)
            let seconds = String(identity?.modifiedSeconds ?? 0, radix: 16)
            let nanoseconds = String(identity?.modifiedNanoseconds ?? 0, radix: 16)
            return "rg-f\(inode)-\(String(size, radix: 16))-\(seconds).\(nanoseconds)"
        }
    }

    private init(content: Content, size: Int64, lastModified: Date?) {
        self.content = content
        self.size = size
        self.lastModified = lastModified
    }

    /// Deterministic pseudo-random content of `size` bytes: byte `i` depends
    /// only on `seed` and `i`. Nothing is stored but one 1 MiB pattern per seed.
    public static func generated(size: Int64, seed: UInt64 = 1) -> Resource {
        Resource(
            content: .generated(seed: seed, pattern: PatternCache.pattern(seed: seed)),
            size: max(0, size), lastModified: defaultLastModified)
    }

    /// The given bytes.
    public static func data(_ bytes: [UInt8]) -> Resource {
        Resource(content: .data(bytes, hash: fnv1a(bytes)), size: Int64(bytes.count), lastModified: defaultLastModified)
    }

    /// The file at `path`, as it is now: size, ETag (inode, size, mtime) and
    /// Last-Modified come from `stat`. A file that cannot be stat'ed gives a
    /// resource of size 0 that the server answers with 404.
    public static func file(_ path: String) -> Resource {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return Resource(content: .file(path: path, identity: nil), size: 0, lastModified: nil)
        }
        let identity = FileIdentity(
            inode: UInt64(info.st_ino),
            modifiedSeconds: Int64(info.st_mtim.tv_sec),
            modifiedNanoseconds: Int64(info.st_mtim.tv_nsec))
        return Resource(
            content: .file(path: path, identity: identity),
            size: Int64(info.st_size),
            lastModified: Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec)))
    }

    /// False for a file resource whose file was missing at creation.
    var isAvailable: Bool {
        if case .file(_, nil) = content { return false }
        return true
    }

    /// The bytes in `range` (clamped to the resource), read from wherever
    /// the content lives; so tests can compare a download with the original.
    public func bytes(in range: Range<Int64>) -> [UInt8] {
        let range = range.clamped(to: 0..<size)
        guard !range.isEmpty else { return [] }
        if case .file(let path, _) = content {
            return Self.readFile(path, range: range)
        }
        return [UInt8](unsafeUninitializedCapacity: range.count) { buffer, initialized in
            var offset = range.lowerBound
            while offset < range.upperBound {
                let written = Int(offset - range.lowerBound)
                withContiguousBytes(at: offset, maxCount: Int(range.upperBound - offset)) { chunk in
                    UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[written...])
                        .copyMemory(from: chunk)
                    offset += Int64(chunk.count)
                }
            }
            initialized = range.count
        }
    }

    /// Writes the whole content to a new file at `path` (replacing any), in
    /// large blocks; for demos and benchmarks.
    public func write(to path: String) throws(RangeServerError) {
        let fd = try retryingInterrupts("open \(path)") {
            open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        defer { close(fd) }
        var offset: Int64 = 0
        let blockSize = 8 << 20
        while offset < size {
            let count = Int(min(Int64(blockSize), size - offset))
            if case .file = content {
                try Self.writeAll(bytes(in: offset..<offset + Int64(count)), to: fd, path: path)
                offset += Int64(count)
                continue
            }
            var failure: RangeServerError?
            withContiguousBytes(at: offset, maxCount: count) { chunk in
                do throws(RangeServerError) {
                    try Self.writeAll(chunk, to: fd, path: path)
                    offset += Int64(chunk.count)
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
        }
    }

    /// Calls `body` with the longest contiguous run of in-memory content at
    /// `offset`, at most `maxCount` bytes. Not for file content.
    func withContiguousBytes<R>(at offset: Int64, maxCount: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows
        -> R
    {
        switch content {
        case .generated(_, let pattern):
            let start = Int(offset % Int64(Self.patternLength))
            let count = min(maxCount, Self.patternLength - start)
            return try pattern.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<start + count])) }
        case .data(let bytes, _):
            let start = Int(offset)
            let count = min(maxCount, bytes.count - start)
            return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<start + count])) }
        case .file:
            preconditionFailure("file content is read through its descriptor")
        }
    }

    /// This resource as if its file had been replaced: new content of the
    /// same size (`newSize` nil) or of `newSize` bytes, a new ETag and a
    /// Last-Modified one minute later. Generated content keeps its seed when
    /// only the size changes (the old bytes stay a prefix, like an append).
    func replaced(newSize: Int64?) -> Resource {
        let seed: UInt64
        switch content {
        case .generated(let oldSeed, _) where newSize != nil:
            seed = oldSeed
        case .generated(let oldSeed, _):
            seed = SplitMix64.value(seed: oldSeed, index: UInt64(generation + 1))
        case .data(_, let hash):
            seed = hash
        case .file(let path, let identity):
            seed = Self.fnv1a(Array(path.utf8)) ^ (identity?.inode ?? 0)
        }
        var changed = Resource.generated(size: newSize ?? size, seed: seed)
        changed.generation = generation + 1
        changed.lastModified = lastModified.map { $0.addingTimeInterval(60) }
        changed.contentType = contentType
        changed.contentDisposition = contentDisposition
        if case .custom(let value) = etagSetting {
            changed.etag = value.map { Self.etag($0, withSuffix: ".\(changed.generation)") }
        }
        return changed
    }

    /// `"abc"` with suffix `.1` is `"abc.1"`; the weak prefix is kept.
    private static func etag(_ etag: String, withSuffix suffix: String) -> String {
        guard etag.hasSuffix("\"") else { return etag + suffix }
        return String(etag.dropLast()) + suffix + "\""
    }

    private static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32, path: String) throws(RangeServerError) {
        var offset = 0
        while offset < bytes.count {
            offset += try retryingInterrupts("write \(path)") {
                Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            }
        }
    }

    private static func writeAll(_ bytes: [UInt8], to fd: Int32, path: String) throws(RangeServerError) {
        var failure: RangeServerError?
        bytes.withUnsafeBytes { buffer in
            do throws(RangeServerError) { try writeAll(buffer, to: fd, path: path) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Reads `range` of the file at `path`; a shorter file gives fewer bytes.
    private static func readFile(_ path: String, range: Range<Int64>) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var result = [UInt8](repeating: 0, count: range.count)
        var filled = 0
        while filled < result.count {
            let count = result.withUnsafeMutableBytes {
                pread(fd, $0.baseAddress! + filled, $0.count - filled, off_t(range.lowerBound) + off_t(filled))
            }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            filled += count
        }
        result.removeLast(result.count - filled)
        return result
    }

    /// FNV-1a, 64 bits: the content identity of in-memory bytes.
    static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { buffer in
            var hash: UInt64 = 0xCBF2_9CE4_8422_2325
            for byte in buffer {
                hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            }
            return hash
        }
    }
}

/// The generated patterns, one per seed, shared by all resources.
enum PatternCache {
    private static let patterns = Mutex<[UInt64: [UInt8]]>([:])
    /// Beyond this many seeds the cache starts over; resources keep their own
    /// reference to their pattern, so this only bounds memory.
    private static let capacity = 16

    static func pattern(seed: UInt64) -> [UInt8] {
        if let cached = patterns.withLock({ $0[seed] }) { return cached }
        let pattern = makePattern(seed: seed)
        patterns.withLock { cache in
            if cache.count >= capacity { cache.removeAll() }
            cache[seed] = pattern
        }
        return pattern
    }

    private static func makePattern(seed: UInt64) -> [UInt8] {
        let length = Resource.patternLength
        return [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
            let raw = UnsafeMutableRawBufferPointer(buffer)
            var generator = SplitMix64(seed: seed)
            var index = 0
            while index + 8 <= length {
                raw.storeBytes(of: generator.next().littleEndian, toByteOffset: index, as: UInt64.self)
                index += 8
            }
            var last = generator.next()
            while index < length {
                raw[index] = UInt8(truncatingIfNeeded: last)
                last >>= 8
                index += 1
            }
            initialized = length
        }
    }
}
