// Gate: a one-time wake-up for a task, which waits without holding a
// thread (a paused download's driver parks on one).
import Synchronization

/// A one-time wake-up a task waits for without a thread; `open()` may come
/// before or after `wait()`.
package final class Gate: Sendable {
    private struct State {
        var isOpen = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    package init() {}

    /// Lets the waiter go on (at once, if it comes later).
    package func open() {
        let waiter = state.withLock { state in
            state.isOpen = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns once the gate is open.
    package func wait() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state in
                if !state.isOpen { state.waiter = waiter }
                return state.isOpen
            }
            if isOpen { waiter.resume() }
        }
    }

    /// True once `open()` was called.
    package var isOpen: Bool { state.withLock(\.isOpen) }
}
