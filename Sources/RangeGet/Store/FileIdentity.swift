// FileIdentity: which file a name refers to (device and inode), so state kept
// in another file applies only to the data file it was written for.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A file's device and inode number.
struct FileIdentity: Codable, Equatable, Sendable {
    var device: UInt64
    var inode: UInt64

    /// The file open as `descriptor`; nil when `fstat` fails.
    init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(info)
    }

    /// The file named `path` itself, never a link's target; nil when there is none.
    init?(path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        self.init(info)
    }

    private init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}
