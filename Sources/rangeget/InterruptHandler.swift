// InterruptHandler: Ctrl-C and SIGTERM as a call on a queue, never in signal context.
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns SIGINT and SIGTERM into a call of `handler` (on a dispatch queue, not
/// in signal context). A second signal within `sameInterrupt` seconds of the
/// first is taken as the same one: one Ctrl-C can arrive twice (the terminal
/// signals the whole process group, and a wrapper script forwards it too),
/// and exiting on it cut off the orderly stop and its "interrupted" line. A
/// later one exits at once, saying so.
final class InterruptHandler {
    /// How far apart two signals are still one interrupt, in seconds.
    static let sameInterrupt = 1.0
    private let sources: [DispatchSourceSignal]

    init(_ handler: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "rangeget.signals")
        // When the first signal came (seconds on the monotonic clock); one for SIGINT and SIGTERM both.
        let first = Mutex<Double?>(nil)
        sources = [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler {
                let now = Self.now()
                let since = first.withLock { first -> Double? in
                    defer { first = first ?? now }
                    return first.map { now - $0 }
                }
                guard let since else { return handler() }
                if since < Self.sameInterrupt { return }
                Self.exitAtOnce()
            }
            source.resume()
            return source
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
    }

    /// The second interrupt: no orderly stop, only a line saying why (after
    /// clearing a progress line on a terminal). What is durable stays resumable.
    private static func exitAtOnce() -> Never {
        let line = (isatty(STDERR_FILENO) == 1 ? "\r\u{1B}[K" : "") + "rangeget: interrupted again: exiting at once\n"
        _ = line.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        _exit(ExitCode.interrupted.rawValue)
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
