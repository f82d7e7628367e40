// FileOrigin: where a finished file came from, kept with the file itself as
// extended attributes in the `user.` namespace: the validators the bytes were
// checked against (`user.rangeget`: `ETAG` LF `LAST-MODIFIED` LF `////////`,
// either validator empty when the server sent none), and with `--xattr` the URL
// (`user.xdg.origin.url`, the freedesktop name `curl --xattr` and
// `wget --xattr` record). A later run of the same command can then tell a
// file that is still the server's ("already complete") from one that
// changed, without fetching it again.
// The same attribute is rangeget's mark on a `.part` (OutputFile), written
// when it is claimed with a third line naming the `.part` (8 hex digits of
// its name's FNV-1a hash), which the commit overwrites with slashes once the
// file has its final name. Only a third line naming the file's present name
// is a mark: a finished file never passes for a partial download, not even
// when that last write was lost (a full disk, a power cut) or a server's
// Last-Modified reads like a line of the mark. The two values have one
// length, so the rewrite stays where the mark was: inside the inode, for
// a typical ETag, where a short name and 8 digits leave the ~90 bytes ext4
// keeps there enough (a longer value, moved out of the inode and back, cost
// a block allocated and freed, with a discard, per file). Two attribute
// writes per file (three with the URL), where a separate mark (set, then
// removed) and three attributes cost five calls and as many rewrites of an
// ext4 inode's attribute block (a tenth of a 20,000-file list's CPU). Files
// saved before keep their `user.rangeget.etag` and
// `user.rangeget.last_modified`, still read.
import CCurlShim
import Glibc

/// The URL and validators a finished file was downloaded with.
struct FileOrigin: Equatable, Sendable {
    /// The URL, without userinfo; recorded only when asked (`--xattr`).
    var url: String?
    var etag: String?
    var lastModified: String?

    private static let urlAttribute = "user.xdg.origin.url"
    /// The validators, and the mark of a `.part` rangeget made.
    static let validatorsAttribute = "user.rangeget"
    /// Where earlier versions kept the validators (read only).
    private static let legacyETagAttribute = "user.rangeget.etag"
    private static let legacyLastModifiedAttribute = "user.rangeget.last_modified"

    /// The value of `validatorsAttribute` on a finished file: no name is slashes.
    var validators: [UInt8] { value(thirdLine: "////////") }

    /// The value of `validatorsAttribute` on the `.part` at `path`: its mark.
    func partMark(path: String) -> [UInt8] { value(thirdLine: Self.nameTag(of: path)) }

    private func value(thirdLine: String) -> [UInt8] {
        Array(((etag ?? "") + "\n" + (lastModified ?? "") + "\n" + thirdLine).utf8)
    }

    /// True when the open file `descriptor`, at `path`, carries rangeget's mark of a `.part`.
    static func marksPartialDownload(_ descriptor: Int32, path: String) -> Bool {
        guard let value = bytes(of: validatorsAttribute, on: descriptor) else { return false }
        let lines = value.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        return lines.count == 3 && lines[2].elementsEqual(nameTag(of: path).utf8)
    }

    /// 8 hex digits of the FNV-1a hash of the file name in `path`.
    private static func nameTag(of path: String) -> String {
        let name = path.lastIndex(of: "/").map { path[path.index(after: $0)...] } ?? path[...]
        let hash = name.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
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
        } else {
            etag = Self.bytes(of: Self.legacyETagAttribute, on: descriptor).map { String(decoding: $0, as: UTF8.self) }
            lastModified = Self.bytes(of: Self.legacyLastModifiedAttribute, on: descriptor)
                .map { String(decoding: $0, as: UTF8.self) }
            if url == nil, etag == nil, lastModified == nil { return nil }
        }
    }

    init(url: String?, etag: String?, lastModified: String?) {
        self.url = url
        self.etag = etag
        self.lastModified = lastModified
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

    /// Why the finished file (`size` bytes, with this origin, or nil when it
    /// has none) is not what `remote` serves now; nil when it is: the same
    /// size, and the same validators where both give them.
    static func difference(size: Int64, origin: FileOrigin?, remote: RemoteFile) -> String? {
        guard let remoteSize = remote.size else { return "the server does not say how long its file is" }
        if remoteSize != size { return "it has \(size) bytes and the server's file \(remoteSize)" }
        if let etag = origin?.etag, let now = remote.etag, etag != now {
            return "it was downloaded with ETag \(etag) and the server's is now \(now)"
        }
        if let lastModified = origin?.lastModified, let now = remote.lastModified, lastModified != now {
            return "it was downloaded as of \(lastModified) and the server's file is of \(now)"
        }
        return nil
    }
}
