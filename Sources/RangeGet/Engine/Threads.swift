// Threads for blocking work: the transfer loop, a started download, the probes
// of several mirrors, and (through `runOnThreads`) the lanes of a list. Plain
// POSIX threads: the global dispatch queue runs only about one blocking job
// per core, and Foundation's Thread would pull all of Foundation (and ICU)
// into every program using the library. (RangeServer keeps a copy of its own:
// it must not depend on this library.)
import Glibc

/// Runs `body` on a new detached thread with a 4 MiB stack.
func startThread(_ body: @escaping @Sendable () -> Void) {
    var thread = pthread_t()
    if !spawn(&thread, detached: true, body) {
        // No thread to be had: do the work here rather than never.
        body()
    }
}

/// Runs `body` on `count` new threads at once and waits for all of them.
package func runOnThreads(count: Int, _ body: @escaping @Sendable () -> Void) {
    var threads: [pthread_t] = []
    for _ in 0..<count {
        var thread = pthread_t()
        if spawn(&thread, detached: false, body) {
            threads.append(thread)
        } else {
            body()
        }
    }
    for thread in threads { pthread_join(thread, nil) }
}

/// Starts `body` on a new thread (4 MiB stack); false when none could be made.
private func spawn(_ thread: inout pthread_t, detached: Bool, _ body: @escaping @Sendable () -> Void) -> Bool {
    final class Job: Sendable {
        // Handed to exactly one new thread, which takes ownership.
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let job = Unmanaged.passRetained(Job(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, 4 << 20)
    pthread_attr_setdetachstate(&attributes, Int32(detached ? PTHREAD_CREATE_DETACHED : PTHREAD_CREATE_JOINABLE))
    let result = pthread_create(&thread, &attributes, { raw in
        Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, job)
    guard result == 0 else {
        Unmanaged<Job>.fromOpaque(job).release()
        return false
    }
    return true
}
