// FileOrigin: where a finished file came from, kept with the file itself as
// extended attributes in the `user.` namespace: the validators the bytes were
// checked against (`user.rangeget.validators`: `ETAG` LF `LAST-MODIFIED`,
// either empty when the server sent none), and with `--xattr` the URL
// (`user.xdg.origin.url`, the freedesktop name `curl --xattr` and
// `wget --xattr` record). A later run of the same command can then tell a
// file that is still the server's ("already complete") from one that
// changed, without fetching it again.
// The same attribute is rangeget's mark on a `.part` (OutputFile), written
// when it is claimed with a third line, `partial`, that the commit drops
// once the file has its final name: a finished file never passes for a
// partial download. Two or three attribute writes per file, where a separate
// mark (set, then removed) and three attributes cost five calls and as many
// rewrites of an ext4 inode's attribute block (a tenth of a 20,000-file
// list's CPU). Files saved before keep their `user.rangeget.etag` and
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
    static let validatorsAttribute = "user.rangeget.validators"
    /// Where earlier versions kept the validators (read only).
    private static let legacyETagAttribute = "user.rangeget.etag"
    private static let legacyLastModifiedAttribute = "user.rangeget.last_modified"

    /// The value of `validatorsAttribute` on a finished file.
    var validators: [UInt8] {
        Array(((etag ?? "") + "\n" + (lastModified ?? "")).utf8)
    }

    /// The value of `validatorsAttribute` on a `.part`: its mark.
    var partMark: [UInt8] { validators + Self.partialLine }

    private static let partialLine = Array("\npartial".utf8)

    /// True when the open file `descriptor` carries rangeget's mark of a `.part`.
    static func marksPartialDownload(_ descriptor: Int32) -> Bool {
        bytes(of: validatorsAttribute, on: descriptor).map { $0.count >= partialLine.count
            && $0.suffix(partialLine.count).elementsEqual(partialLine) } ?? false
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
            // (A third line, `partial`, is a .part's mark.)
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

    /// The value of attribute `name` of the open file `descriptor`, nil when it has none.
    private static func bytes(of name: String, on descriptor: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = rg_get_attribute(descriptor, name, &buffer, buffer.count)
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
