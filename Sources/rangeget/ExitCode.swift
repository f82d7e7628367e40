import RangeGet
import SystemSupport

// The exit codes of rangeget, as documented in README.md. Errors are mapped
// to codes only here, in the executable.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum ExitCode: Int32 {
    case success = 0
    case network = 1
    case usage = 2
    case verification = 3
    case local = 4
    /// Another rangeget is downloading to the same file: nothing was
    /// changed, and the same command works once that one ends.
    case busy = 5
    case interrupted = 130

    init(_ error: DownloadError) {
        switch error {
        case .usage: self = .usage
        // (tooLarge: the library's data(from:) alone refuses a size; the command has no limit.)
        case .network, .server, .tooLarge: self = .network
        case .verification: self = .verification
        case .io, .manifest: self = .local
        case .busy: self = .busy
        case .interrupted: self = .interrupted
        }
    }
}

/// Writes `text` to stderr unbuffered (progress lines and messages).
func writeToStandardError(_ text: String) {
    write(text, to: STDERR_FILENO)
}

/// Writes `text` to `descriptor` at once, unbuffered (EINTR and short writes retried; other errors dropped).
func write(_ text: String, to descriptor: Int32) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { writeAll($0, to: descriptor) }
}

/// Writes every byte of `bytes` to `descriptor`, retrying EINTR and short
/// writes; the errno of a write that failed (EPIPE: the reader is gone), else nil.
func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32? {
    var offset = 0
    while offset < bytes.count {
        let written = retryingOnInterrupt { Glibc.write(descriptor, bytes.baseAddress! + offset, bytes.count - offset) }
        if written <= 0 { return written == 0 ? EIO : errno }
        offset += written
    }
    return nil
}

/// True when `path` names a directory.
func isDirectory(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
}

/// The system's words for `code` (`Permission denied`): every message about a
/// failed system call ends with them after a colon.
func systemReason(_ code: Int32) -> String {
    String(cString: strerror(code))
}
