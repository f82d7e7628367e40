// EINTR: a system call a signal interrupted is made again, here and nowhere else.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs `call` again while it fails with EINTR; returns its first other
/// result (a failure's `errno` is left as the call set it).
@inline(__always)
package func retryingOnInterrupt<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}
