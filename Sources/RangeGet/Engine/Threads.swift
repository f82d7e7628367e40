// Threads for blocking work: the transfer loop of a started download and the
// probes of several mirrors. Plain POSIX threads: the global dispatch queue
// runs only about one blocking job per core, and Foundation's Thread would
// pull all of Foundation (and ICU) into every program using the library.
import Glibc

/// Runs `body` on a new detached thread with a 4 MiB stack.
func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Job: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let job = Unmanaged.passRetained(Job(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, 4 << 20)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(&thread, &attributes, { raw in
        Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, job)
    if result != 0 {
        // No thread to be had: do the work here rather than never.
        Unmanaged<Job>.fromOpaque(job).takeRetainedValue().body()
    }
}
