// Threads for blocking work: the transfer loop, a started download, the probes
// of several mirrors, and (through `tryStartThread`) the lanes of a list. Plain
// POSIX threads: the global dispatch queue runs only about one blocking job
// per core, and Foundation's Thread would pull all of Foundation (and ICU)
// into every program using the library. (RangeServer keeps a copy of its own:
// it must not depend on this library.)
import CCurlShim
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Runs `body` on a new detached thread with a 4 MiB stack, named `name`
/// (at most 15 bytes: what `top -H`, perf and gdb show).
func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    if !tryStartThread(name, body) {
        // No thread to be had: do the work here rather than never.
        body()
    }
}

/// `body` of each of `keys`, each on a thread of its own (named `name`), all
/// at once; returns when every one has ended.
func concurrently<Key: Hashable & Sendable, Value: Sendable>(
    _ keys: [Key], named name: String, _ body: @escaping @Sendable (Key) -> Value
) -> [Key: Value] {
    let results = Mutex<[Key: Value]>([:])
    let finished = DispatchGroup()
    for key in keys {
        finished.enter()
        startThread(name) {
            let value = body(key)
            results.withLock { $0[key] = value }
            finished.leave()
        }
    }
    finished.wait()
    return results.withLock { $0 }
}

/// Starts `body` on a new detached thread (4 MiB stack); false when none
/// could be made, for a caller that must not run it in its own place.
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
        rg_name_thread(job.name)
        job.body()
        return nil
    }, job)
    guard result == 0 else {
        Unmanaged<Job>.fromOpaque(job).release()
        return false
    }
    return true
}

/// Tunes glibc's malloc for a program about to run many threads that each
/// make and free a few blocks per file (call it before they start):
/// - at most `arenas` arenas (eight per core by default), as every arena
///   keeps its own free memory;
/// - blocks up to `largestKept` bytes come from the arenas, and freed ones
///   stay there for the next file. By default a block of 128 KiB or more
///   (libcurl's receive buffer, one per request) is mapped for it and
///   unmapped when freed, and an arena's free top is given back past
///   128 KiB, so each file faulted its pages in anew.
package func tuneMalloc(arenas: Int, largestKept: Int) {
    rg_tune_malloc(Int32(arenas), Int32(largestKept))
}
