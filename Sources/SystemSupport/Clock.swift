// SystemSupport: the few helpers over the C library that the library, the
// test server and the command all need, in one copy: the monotonic clock,
// EINTR retries and named threads. (The two StopSignals stay apart: the
// library's is a flag that wakes a curl multi handle, the server's a pipe
// every blocking poll of its sockets listens to; they share a name, not a
// mechanism.)
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A monotonic clock in seconds, cheap enough for the transfer loop.
package enum MonotonicClock {
    /// Seconds since an arbitrary fixed point; never goes backwards.
    package static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
