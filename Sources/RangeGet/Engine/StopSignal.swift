// StopSignal: what another thread may do to an engine.
import Synchronization

/// A request to stop one engine soon, keeping its resume state: a flag and a
/// wakeup of its loop, the only part of an engine another thread may touch.
final class StopSignal: Sendable {
    private let requested = Atomic<Bool>(false)
    private let loop: TransferLoop?

    /// A signal for work on `loop`, which a request wakes; nil for work that
    /// looks at the signal on its own (a probe's progress callback).
    init(loop: TransferLoop?) {
        self.loop = loop
    }

    /// Asks for the stop; safe from any thread.
    func request() {
        requested.store(true, ordering: .relaxed)
        loop?.wakeup()
    }

    var isRequested: Bool { requested.load(ordering: .relaxed) }
}
