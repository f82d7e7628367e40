import SystemSupport

// Small helpers FoundationEssentials lacks: trimming spaces and starting a
// detached thread. (The server avoids full Foundation to stay light in the
// rangeget executable.)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}

/// Runs `body` on a new thread named `name`; if no thread can be made
/// (resource exhaustion), the process cannot serve and stops with a message.
func detachThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    guard tryStartThread(name, body) else {
        fatalError("RangeServer: cannot start a thread: \(String(cString: strerror(errno)))")
    }
}
