// PageFile: how the report pages (and bench's CSV) reach their file: whole
// or not at all, so a failed write never leaves half a page in its place.
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum PageFile {
    /// Writes `page` (any text) to `path` (stdout for `-`): to a file beside it, then
    /// renamed over it, so a failed write leaves no half page. Why it failed, or nil.
    static func write(_ page: String, to path: String) -> String? {
        let bytes = Array(page.utf8)
        guard path != "-" else {
            let failed = bytes.withUnsafeBytes { writeAll($0, to: STDOUT_FILENO) }
            return failed.map { "cannot write to stdout: \(systemReason($0))" }
        }
        let temporary = temporaryName(of: path)
        let descriptor = retryingOnInterrupt { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        guard descriptor >= 0 else { return "cannot write \(path): \(systemReason(errno))" }
        let failed = bytes.withUnsafeBytes { writeAll($0, to: descriptor) }
        if close(descriptor) != 0, failed == nil {
            let reason = errno
            unlink(temporary)
            return "cannot write \(path): \(systemReason(reason))"
        }
        if let failed {
            unlink(temporary)
            return "cannot write \(path): \(systemReason(failed))"
        }
        guard rename(temporary, path) == 0 else {
            let reason = errno
            unlink(temporary)
            return "cannot write \(path): \(systemReason(reason))"
        }
        return nil
    }

    /// Why `write(_:to:)` could not write `path` now (its file beside it
    /// cannot be created), or nil: asked before a run that takes a while,
    /// so a mistyped directory costs no measurement.
    static func unwritable(_ path: String) -> String? {
        guard path != "-" else { return nil }
        let temporary = temporaryName(of: path)
        let descriptor = retryingOnInterrupt { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard descriptor >= 0 else { return "cannot write \(path): \(systemReason(errno))" }
        close(descriptor)
        unlink(temporary)
        return nil
    }

    private static func temporaryName(of path: String) -> String {
        path + ".rangeget-\(getpid())"
    }
}
