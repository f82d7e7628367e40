// FileOrigin: where a finished file came from, kept with the file itself as
// extended attributes in the `user.` namespace: the validators the bytes were
// checked against and a stamp of the file as rangeget saved it
// (`user.rangeget`: `ETAG` LF `LAST-MODIFIED` LF `STAMP`, either validator
// empty when the server sent none), and with `--xattr` the URL
// (`user.xdg.origin.url`, the freedesktop name `curl --xattr` and
// `wget --xattr` record). A later run of the same command can then tell a
// file that is still the server's ("already complete") from one that changed
// on either side, without fetching it again.
//
// The stamp is what a later change to the file cannot keep: 8 hex digits of
// the FNV-1a hash of its size, modification time (with nanoseconds), inode
// and device, then 8 of the second (mod 2^32) the record was written, which
// sets the file's change time; the file's change time must still lie within
// `changeTimeSlack` of it. Overwriting the bytes in place, even at the same
// size and with the modification time set back (`cp -p`, `touch -r`),
// changes the change time, which no program can set. So do a `chmod`, a
// `mv` or another link: such a file is no longer proven, and a rerun asks
// for `--checksum` (which proves it) or `--force` (which replaces it). What
// is left: a change within a second of the commit that also keeps the
// modification time to the nanosecond, or a 2^-32 hash collision.
//
// The same attribute is rangeget's mark on a `.part` (OutputFile), written
// when it is claimed with a third line naming the `.part` (8 hex digits of
// its name's FNV-1a hash, then 8 slashes), which the commit overwrites with
// the stamp once the file has its final name. Only a third line naming the
// file's present name is a mark: a finished file never passes for a partial
// download, not even when that last write was lost (a full disk, a power
// cut) or a server's Last-Modified reads like a line of the mark. The two
// values have one length, so the rewrite stays where the mark was: inside
// the inode for a typical ETag (a longer value, moved out of the inode and
// back, cost a block allocated and freed, with a discard, per file). Marks
// of earlier versions (8 digits alone) are still read as marks; their
// finished files (8 slashes, or `user.rangeget.etag` and
// `user.rangeget.last_modified`) have no stamp, so they are never proven by
// their record alone.
import CCurlShim
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The URL and validators a finished file was downloaded with.
struct FileOrigin: Equatable, Sendable {
    /// The URL, without userinfo; recorded only when asked (`--xattr`).
    var url: String?
    var etag: String?
    var lastModified: String?
    /// The stamp of the file as rangeget saved it (16 hex digits); nil on a
    /// file saved by an earlier version, or not saved by rangeget.
    var stamp: String?

    /// How far, in seconds, the file's change time may lie from its stamp's
    /// second: the record is the last change rangeget makes to the file once
    /// it has its name, and the kernel's clock for file times runs up to a
    /// tick behind the one the stamp reads.
    static let changeTimeSlack: ClosedRange<Int64> = -1...1

    private static let urlAttribute = "user.xdg.origin.url"
    /// The validators, and the mark of a `.part` rangeget made.
    static let validatorsAttribute = "user.rangeget"
    /// Where earlier versions kept the validators (read only).
    private static let legacyETagAttribute = "user.rangeget.etag"
    private static let legacyLastModifiedAttribute = "user.rangeget.last_modified"

    /// The value of `validatorsAttribute` on the finished file open as
    /// `descriptor`, with its stamp as of now (the record is written at once).
    func validators(stamping descriptor: Int32) -> [UInt8] {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return value(thirdLine: String(repeating: "/", count: 16)) }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return value(thirdLine: Self.stamp(of: info, recordedAt: Int64(now.tv_sec)))
    }

    /// The value of `validatorsAttribute` on the `.part` at `path`: its mark.
    func partMark(path: String) -> [UInt8] { value(thirdLine: Self.nameTag(of: path) + "////////") }

    private func value(thirdLine: String) -> [UInt8] {
        Array(((etag ?? "") + "\n" + (lastModified ?? "") + "\n" + thirdLine).utf8)
    }

    /// True when the open file `descriptor`, at `path`, carries rangeget's mark of a `.part`.
    static func marksPartialDownload(_ descriptor: Int32, path: String) -> Bool {
        guard let value = bytes(of: validatorsAttribute, on: descriptor) else { return false }
        let lines = value.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        guard lines.count == 3 else { return false }
        let tag = nameTag(of: path)
        return lines[2].elementsEqual((tag + "////////").utf8) || lines[2].elementsEqual(tag.utf8)
    }

    /// The stamp of a file whose `stat` is `info`, recorded at second `now`.
    private static func stamp(of info: stat, recordedAt now: Int64) -> String {
        let fields = [
            Int64(info.st_size), Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec),
            Int64(bitPattern: UInt64(info.st_ino)), Int64(bitPattern: UInt64(info.st_dev))
        ]
        var hash = UInt32(2_166_136_261)
        for field in fields {
            for shift in stride(from: 0, to: 64, by: 8) {
                hash = (hash ^ UInt32(truncatingIfNeeded: field >> shift)) &* 16_777_619
            }
        }
        return hex(hash) + hex(UInt32(truncatingIfNeeded: now))
    }

    /// `value` as 8 hex digits.
    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// 8 hex digits of the FNV-1a hash of the file name in `path`.
    private static func nameTag(of path: String) -> String {
        let name = path.lastIndex(of: "/").map { path[path.index(after: $0)...] } ?? path[...]
        return hex(name.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 })
    }

    /// Stores the URL on `file` when it has one to record (the validators
    /// are its mark, made final by `OutputFile.unmark`); false where the file
    /// system keeps no user extended attributes.
    func record(on file: OutputFile) throws(IOError) -> Bool {
        guard let url else { return true }
        if retryingOnInterrupt({ file.calls.fsetxattr(file.descriptor, Self.urlAttribute, Array(url.utf8)) }) == 0 {
            return true
        }
        if errno == ENOTSUP || errno == EPERM { return false }
        throw IOError("record the origin of", file.path)
    }

    /// The origin stored on the file at `path` (a link is not followed);
    /// nil when there is none or it cannot be read.
    init?(path: String) {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        url = Self.bytes(of: Self.urlAttribute, on: descriptor).map { String(decoding: $0, as: UTF8.self) }
        if let validators = Self.bytes(of: Self.validatorsAttribute, on: descriptor) {
            // (The third line names a .part, or is slashes.)
            let lines = validators.split(separator: UInt8(ascii: "\n"), maxSplits: 2, omittingEmptySubsequences: false)
            let text = lines.map { $0.isEmpty ? nil : String(decoding: $0, as: UTF8.self) }
            etag = text[0]
            lastModified = text.count > 1 ? text[1] : nil
            stamp =
                text.count > 2
                ? text[2].flatMap { line in
                    line.count == 16 && line.allSatisfy(\.isHexDigit) ? line : nil
                } : nil
        } else {
            etag = Self.bytes(of: Self.legacyETagAttribute, on: descriptor).map { String(decoding: $0, as: UTF8.self) }
            lastModified = Self.bytes(of: Self.legacyLastModifiedAttribute, on: descriptor)
                .map { String(decoding: $0, as: UTF8.self) }
            if url == nil, etag == nil, lastModified == nil { return nil }
        }
    }

    init(url: String?, etag: String?, lastModified: String?, stamp: String? = nil) {
        self.url = url
        self.etag = etag
        self.lastModified = lastModified
        self.stamp = stamp
    }

    /// The value of attribute `name` of the open file `descriptor`, nil when
    /// it has none (a value past 4 KiB, which XFS and btrfs allow, is asked
    /// for its length first).
    private static func bytes(of name: String, on descriptor: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var length = rg_get_attribute(descriptor, name, &buffer, buffer.count)
        if length < 0, errno == ERANGE {
            length = rg_get_attribute(descriptor, name, nil, 0)
            guard length >= 0 else { return nil }
            buffer = [UInt8](repeating: 0, count: Int(length))
            length = rg_get_attribute(descriptor, name, &buffer, buffer.count)
        }
        guard length >= 0 else { return nil }
        return Array(buffer.prefix(Int(length)))
    }

    /// What rangeget's record on a file shows of it against the server's file now.
    enum Verdict: Equatable {
        /// The file is as rangeget saved it, with the server's size and validator.
        case proven
        /// The file is as rangeget saved it, with the server's size, but the
        /// server names no validator: only sampled bytes can tie them.
        case needsSample
        /// The file is not shown to be as rangeget saved it, and why.
        case unproven(String)
        /// The file is as rangeget saved it, but the server's file is another, and why.
        case serverChanged(String)
    }

    /// What rangeget's record on the file at `path` shows against `remote`:
    /// proven when the record's stamp still matches the file (it is as
    /// rangeget saved it), its size is the server's, and so is the server's
    /// validator (its ETag, else its Last-Modified).
    static func verdict(path: String, remote: RemoteFile) -> Verdict {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            return .unproven("it is not a regular file")
        }
        let size = Int64(info.st_size)
        guard let remoteSize = remote.size else { return .unproven("the server does not say how long its file is") }
        if remoteSize != size { return .serverChanged("it has \(size) bytes and the server's file \(remoteSize)") }
        guard let origin = FileOrigin(path: path),
            origin.etag != nil || origin.lastModified != nil || origin.stamp != nil
        else { return .unproven("rangeget has no record of saving it") }
        guard let stamp = origin.stamp else {
            return .unproven("its record, from an earlier version of rangeget, cannot show it is unchanged since")
        }
        let recorded = Int64(UInt32(stamp.suffix(8), radix: 16) ?? 0)
        let changed = Int64(UInt32(truncatingIfNeeded: Int64(info.st_ctim.tv_sec)))
        // Seconds apart, mod 2^32 (the stamp keeps 32 bits of the second).
        let apart = Int64(Int32(truncatingIfNeeded: changed &- recorded))
        guard Self.stamp(of: info, recordedAt: recorded) == stamp, changeTimeSlack.contains(apart) else {
            return .unproven("its modification or change time is not the one rangeget recorded as it saved the file")
        }
        if let now = remote.etag {
            guard origin.etag == now else {
                return .serverChanged(
                    "it was downloaded with ETag \(origin.etag ?? "none") and the server's is now \(now)")
            }
        } else if let now = remote.lastModified {
            guard origin.lastModified == now else {
                return .serverChanged(
                    "it was downloaded as of \(origin.lastModified ?? "an unknown date") and the server's "
                        + "file is of \(now)")
            }
        } else {
            return .needsSample
        }
        return .proven
    }
}
