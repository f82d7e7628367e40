// The one error type RangeServer throws for system failures.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call (with its `errno`) or a misuse of the server.
public struct RangeServerError: Error, Equatable, CustomStringConvertible {
    /// What was attempted, e.g. `bind 127.0.0.1:8080` or `open /tmp/x`.
    public var operation: String
    /// The `errno` value, or 0 when the error does not come from a system call.
    public var code: Int32

    /// Creates an error for `operation`, with `code` as its `errno` (0 for none).
    public init(operation: String, code: Int32) {
        self.operation = operation
        self.code = code
    }

    /// `operation: strerror(code)`, or only `operation` when `code` is 0.
    public var description: String {
        code == 0 ? operation : "\(operation): \(String(cString: strerror(code)))"
    }

    /// The server was started while it was already running.
    public static let alreadyRunning = RangeServerError(operation: "the server is already running", code: 0)

    /// An error for the current `errno`.
    static func errno(_ operation: String) -> RangeServerError {
        RangeServerError(operation: operation, code: Glibc.errno)
    }
}
