// A monotonic clock in seconds, cheap enough for the transfer loop.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

package enum MonotonicClock {
    /// Seconds since an arbitrary fixed point; never goes backwards.
    package static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
