// FileOrigin: where a finished file came from, kept with the file itself as
// extended attributes in the `user.` namespace, as `curl --xattr` and
// `wget --xattr` do: the URL (`user.xdg.origin.url`, the freedesktop name
// both use), and the validators the bytes were checked against
// (`user.rangeget.etag`, `user.rangeget.last_modified`). A later run of the
// same command can then tell a file that is still the server's ("already
// complete") from one that changed, without fetching it again.
import CCurlShim
import Glibc

/// The URL and validators a finished file was downloaded with.
struct FileOrigin: Equatable, Sendable {
    /// The URL, without userinfo.
    var url: String
    var etag: String?
    var lastModified: String?

    private static let urlAttribute = "user.xdg.origin.url"
    private static let etagAttribute = "user.rangeget.etag"
    private static let lastModifiedAttribute = "user.rangeget.last_modified"

    /// Stores the origin on `file`; false where the file system keeps no
    /// user extended attributes (then a later run only compares sizes).
    func record(on file: OutputFile) throws(IOError) -> Bool {
        let values = [(Self.urlAttribute, url), (Self.etagAttribute, etag), (Self.lastModifiedAttribute, lastModified)]
        for (name, value) in values {
            guard let value else {
                _ = retryingOnInterrupt { file.calls.fremovexattr(file.descriptor, name) }
                continue
            }
            if retryingOnInterrupt({ file.calls.fsetxattr(file.descriptor, name, Array(value.utf8)) }) == 0 { continue }
            if errno == ENOTSUP || errno == EPERM { return false }
            throw IOError("record the origin of", file.path)
        }
        return true
    }

    /// The origin stored on the file at `path` (a link is not followed);
    /// nil when there is none or it cannot be read.
    init?(path: String) {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard let url = Self.attribute(Self.urlAttribute, of: descriptor) else { return nil }
        self.url = url
        etag = Self.attribute(Self.etagAttribute, of: descriptor)
        lastModified = Self.attribute(Self.lastModifiedAttribute, of: descriptor)
    }

    init(url: String, etag: String?, lastModified: String?) {
        self.url = url
        self.etag = etag
        self.lastModified = lastModified
    }

    private static func attribute(_ name: String, of descriptor: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = rg_get_attribute(descriptor, name, &buffer, buffer.count)
        guard length >= 0 else { return nil }
        return String(decoding: buffer.prefix(Int(length)), as: UTF8.self)
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
