// Threads for blocking work beyond SystemSupport's named threads: several
// jobs at once (the probes of several mirrors), and glibc's malloc tuned for
// a list's many threads.
import CCurlShim
import Dispatch
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
