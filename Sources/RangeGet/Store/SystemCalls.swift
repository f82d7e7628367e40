// SystemCalls: the few POSIX calls that put bytes on disk, behind a seam so
// tests can inject ENOSPC, EIO, EINTR and short writes without a real disk.
import Glibc

/// The write and sync calls the store makes; `live` is the real thing.
package struct SystemCalls: Sendable {
    /// `pwrite(2)`: returns bytes written or -1 with `errno` set.
    package var pwrite: @Sendable (Int32, UnsafeRawPointer, Int, Int64) -> Int
    /// `fdatasync(2)`: 0 or -1 with `errno` set.
    package var fdatasync: @Sendable (Int32) -> Int32
    /// `fsync(2)`: 0 or -1 with `errno` set.
    package var fsync: @Sendable (Int32) -> Int32

    /// The calls of the operating system.
    package static let live = SystemCalls(
        pwrite: { Glibc.pwrite($0, $1, $2, off_t($3)) },
        fdatasync: { Glibc.fdatasync($0) },
        fsync: { Glibc.fsync($0) }
    )

    /// Builds a seam from explicit calls (tests use this to inject faults).
    package init(
        pwrite: @escaping @Sendable (Int32, UnsafeRawPointer, Int, Int64) -> Int,
        fdatasync: @escaping @Sendable (Int32) -> Int32,
        fsync: @escaping @Sendable (Int32) -> Int32
    ) {
        self.pwrite = pwrite
        self.fdatasync = fdatasync
        self.fsync = fsync
    }
}

/// A failed system call: the operation, the path and `errno`.
public struct IOError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What was being done, e.g. "write" or "sync".
    public let operation: String
    /// The file it was done to.
    public let path: String
    /// The `errno` value.
    public let code: Int32

    /// Captures the current `errno`.
    init(_ operation: String, _ path: String, code: Int32 = errno) {
        self.operation = operation
        self.path = path
        self.code = code
    }

    public var description: String {
        "cannot \(operation) \(path): \(String(cString: strerror(code)))"
    }
}

/// Runs `call` again while it fails with EINTR.
@inline(__always)
func retryingOnInterrupt<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}
