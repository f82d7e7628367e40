// Named POSIX threads for blocking work. Plain pthreads: the global dispatch
// queue runs only about one blocking job per core, and Foundation's Thread
// would pull all of Foundation (and ICU) into every program using the
// library.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts `body` on a new detached thread with a 4 MiB stack, named `name`
/// (at most 15 bytes: what `top -H`, perf, gdb and `/proc/self/task` show);
/// false when no thread could be made, for a caller that must not run it in
/// its own place.
package func tryStartThread(_ name: String, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Job: Sendable {
        // Handed to exactly one new thread, which takes ownership.
        let name: String
        let body: @Sendable () -> Void
        init(_ name: String, _ body: @escaping @Sendable () -> Void) { (self.name, self.body) = (name, body) }
    }
    let job = Unmanaged.passRetained(Job(name, body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, 4 << 20)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(&thread, &attributes, { raw in
        let job = Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue()
        nameThisThread(job.name)
        job.body()
        return nil
    }, job)
    guard result == 0 else {
        Unmanaged<Job>.fromOpaque(job).release()
        return false
    }
    return true
}

/// Runs `body` on a new thread named `name`; with no thread to be had, here
/// and now rather than never.
package func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    if !tryStartThread(name, body) { body() }
}

/// Names the calling thread (the kernel keeps 15 bytes of it). On Linux
/// through `/proc/thread-self/comm`, what `prctl(PR_SET_NAME)` sets: glibc's
/// `pthread_setname_np` and the variadic `prctl` do not reach Swift.
private func nameThisThread(_ name: String) {
    let short = Array(name.utf8.prefix(15))
    #if canImport(Glibc)
    let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return }
    _ = short.withUnsafeBytes { bytes in retryingOnInterrupt { write(descriptor, bytes.baseAddress, bytes.count) } }
    close(descriptor)
    #elseif canImport(Darwin)
    _ = pthread_setname_np(String(decoding: short, as: UTF8.self))
    #endif
}
