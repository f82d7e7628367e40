// InterruptHandler: Ctrl-C and SIGTERM as a call on a queue, never in signal context.
import Dispatch
import Glibc
import Synchronization

/// Turns SIGINT and SIGTERM into a call of `handler` (on a dispatch queue, not
/// in signal context); a second signal exits at once.
final class InterruptHandler {
    private let sources: [DispatchSourceSignal]

    init(_ handler: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "rangeget.signals")
        sources = [SIGINT, SIGTERM].map { signalNumber in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            let count = Mutex(0)
            source.setEventHandler {
                let seen = count.withLock { value in value += 1; return value }
                if seen > 1 { _exit(ExitCode.interrupted.rawValue) }
                handler()
            }
            source.resume()
            return source
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}
