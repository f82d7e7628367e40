// Directories: a missing output directory is created with its parents, by
// the library (a download's destination) and the command line (`-d`, `-o`)
// alike.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

package enum Directories {
    /// Creates `path` and every missing parent (as `mkdir -p`); the reason
    /// of the first failure, or nil.
    package static func make(_ path: String) -> String? {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o777) != 0, errno != EEXIST { return String(cString: strerror(errno)) }
            prefix += "/"
        }
        return nil
    }
}
