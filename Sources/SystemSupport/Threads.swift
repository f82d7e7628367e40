import Synchronization

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
    let result = pthread_create(
        &thread, &attributes,
        { raw in
            let job = Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue()
            nameThisThread(job.name)
            let id = threadID()
            startedThreads.withLock { _ = $0.insert(id) }
            job.body()
            startedThreads.withLock { _ = $0.remove(id) }
            return nil
        }, job)
    guard result == 0 else {
        Unmanaged<Job>.fromOpaque(job).release()
        return false
    }
    return true
}

/// The kernel's ids of the threads started here and still running. A
/// thread another library makes from one of them (libdispatch's pool, a
/// resolver) inherits its name, so the name alone does not say who started
/// a thread: these ids do (`/proc/self/task/<id>`).
package var runningThreadIDs: Set<Int32> { startedThreads.withLock { $0 } }

private let startedThreads = Mutex(Set<Int32>())

/// The calling thread's id in the kernel (`gettid`, which Swift's Glibc
/// does not export: read off the `/proc/thread-self` link, `<pid>/task/<id>`).
private func threadID() -> Int32 {
    #if canImport(Glibc)
    var target = [CChar](repeating: 0, count: 64)
    let count = readlink("/proc/thread-self", &target, target.count - 1)
    guard count > 0 else { return 0 }
    let text = String(decoding: target[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return text.split(separator: "/").last.flatMap { Int32($0) } ?? 0
    #else
    var id: UInt64 = 0
    pthread_threadid_np(nil, &id)
    return Int32(truncatingIfNeeded: id)
    #endif
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
