// LibraryThreads: the threads the library started, alive in the kernel's
// list of this process's threads (/proc/self/task/<id>/comm), every 2 ms.
// The library names every thread it starts "rangeget ..." (SystemSupport's
// startThread), and keeps their ids: a thread libdispatch's pool starts
// from one of them inherits its name, so a name alone counted the Swift
// runtime's threads too.
import Foundation
import Synchronization
import SystemSupport

final class LibraryThreads: Sendable {
    private struct Seen {
        var peak = 0
        var names: Set<String> = []
        /// The threads alive at the peak.
        var atPeak: [String] = []
    }

    private let seen = Mutex(Seen())
    private let running = Atomic<Bool>(true)
    private let done = DispatchSemaphore(value: 0)

    /// Starts watching; returns once the first look was taken.
    init() {
        let watching = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            var first = true
            while running.load(ordering: .relaxed) {
                let names = Self.current()
                seen.withLock { seen in
                    if names.count > seen.peak { (seen.peak, seen.atPeak) = (names.count, names.sorted()) }
                    seen.names.formUnion(names)
                }
                if first { watching.signal() }
                first = false
                usleep(2000)
            }
            done.signal()
        }
        watching.wait()
    }

    /// Stops watching; the most library threads seen at once (and their
    /// names then), and every name seen.
    func stop() -> (peak: Int, atPeak: [String], names: Set<String>) {
        running.store(false, ordering: .relaxed)
        done.wait()
        return seen.withLock { ($0.peak, $0.atPeak, $0.names) }
    }

    /// The names of the library's threads alive now, one per thread.
    static func current() -> [String] {
        runningThreadIDs.compactMap { id in
            guard let handle = FileHandle(forReadingAtPath: "/proc/self/task/\(id)/comm") else { return nil }
            defer { try? handle.close() }
            let name = String(decoding: handle.availableData, as: UTF8.self).trimmingCharacters(
                in: .whitespacesAndNewlines)
            // The test server starts its threads the same way ("rangeserver ...").
            return name.hasPrefix("rangeget ") ? name : nil
        }
    }

    /// Waits up to `seconds` for the library's threads of earlier tests to end; true when none is left.
    static func waitForNone(within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !current().isEmpty {
            if Date() > deadline { return false }
            usleep(10_000)
        }
        return true
    }
}
