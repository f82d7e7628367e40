// RateLimit: a token bucket shared by every transfer of a run (`--max-speed`),
// also across the files of a list. A write callback that finds the bucket
// empty pauses its transfer (CURL_WRITEFUNC_PAUSE); the engine loop resumes
// it once tokens are back. libcurl's own per-transfer limit is not used: it
// averages over seconds and lets short transfers through unthrottled.
import Synchronization
import SystemSupport

/// A cap on the bytes per second of everything that shares this value.
package final class RateLimit: Sendable {
    /// The cap in bytes per second.
    package let bytesPerSecond: Int64
    private let bucket: Mutex<(tokens: Double, refilled: Double)>

    /// A limit of `bytesPerSecond` (at least 1).
    package init(bytesPerSecond: Int64) {
        self.bytesPerSecond = max(1, bytesPerSecond)
        bucket = Mutex((0, MonotonicClock.now()))
    }

    /// Takes `count` bytes if any token is left (the bucket may go into debt,
    /// which later calls repay); false means: wait.
    func take(_ count: Int) -> Bool {
        bucket.withLock { state in
            refill(&state)
            guard state.tokens > 0 else { return false }
            state.tokens -= Double(count)
            return true
        }
    }

    /// True when a paused transfer may go on.
    var hasTokens: Bool {
        bucket.withLock { state in
            refill(&state)
            return state.tokens > 0
        }
    }

    private func refill(_ state: inout (tokens: Double, refilled: Double)) {
        let now = MonotonicClock.now()
        let burst = Double(bytesPerSecond) / 10
        state.tokens = min(burst, state.tokens + (now - state.refilled) * Double(bytesPerSecond))
        state.refilled = now
    }
}
