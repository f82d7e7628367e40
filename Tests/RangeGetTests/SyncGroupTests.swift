import Dispatch
import Foundation
import Glibc
import Synchronization
import XCTest

// SyncGroup with both kinds of commit in one group: callers that wait for
// theirs (`commit`, a library user's `Download.run`) and commits handed off
// (`submit`, the files of a list). The lead passes between waiting callers
// and the committer thread both ways, and the committer exits whenever the
// queue is empty and starts again with the next commit.
@testable import RangeGet

final class SyncGroupTests: TemporaryDirectoryTestCase {
    /// Eight threads commit 50 files each, one in three waiting for it and
    /// the others handing it off, with flushes of up to 0.6 ms and pauses
    /// between commits (so batches form, and the queue empties and fills
    /// again): every waiting caller returns, every handed-off commit is told
    /// once, no two flushes ever overlap, and every file gets its name.
    func testWaitingAndHandedOffCommitsMixInOneGroup() throws {
        let flushes = FlushMeter()
        var calls = SystemCalls.live
        calls.fdatasync = flushes.timed(calls.fdatasync)
        calls.fsync = flushes.timed(calls.fsync)
        calls.syncfs = flushes.timed(calls.syncfs)
        let group = SyncGroup()
        let directory: String = directory
        let (threadCount, perThread) = (8, 50)
        let told = Mutex<[String: Int]>([:])
        let waited = Atomic<Int>(0)
        let handedOff = DispatchGroup()
        let threads = DispatchGroup()
        for thread in 0..<threadCount {
            threads.enter()
            Thread.detachNewThread { [directory, calls] in
                defer { threads.leave() }
                for index in 0..<perThread {
                    let name = "f\(thread)-\(index)"
                    guard let commit = Self.commit(name, in: directory, calls: calls) else { return }
                    if (thread + index) % 3 == 0 {
                        do {
                            try group.commit(commit, calls: calls)
                        } catch {
                            XCTFail("\(name): \(error)")
                        }
                        waited.add(1, ordering: .relaxed)
                    } else {
                        handedOff.enter()
                        group.submit(commit, calls: calls) { failure in
                            XCTAssertNil(failure, name)
                            told.withLock { $0[name, default: 0] += 1 }
                            handedOff.leave()
                        }
                    }
                    usleep(UInt32((thread * 37 + index * 101) % 900))
                }
            }
        }
        XCTAssertEqual(threads.wait(timeout: .now() + 60), .success, "a waiting caller never returned")
        XCTAssertEqual(handedOff.wait(timeout: .now() + 60), .success, "a handed-off commit was never told")
        let counts = told.withLock { $0 }
        XCTAssertEqual(counts.count + waited.load(ordering: .relaxed), threadCount * perThread)
        XCTAssertEqual(counts.values.filter { $0 != 1 }.count, 0, "a handed-off commit was told more than once")
        XCTAssertEqual(flushes.mostAtOnce.load(ordering: .relaxed), 1, "two flushes overlapped")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        XCTAssertEqual(names.filter { !$0.hasSuffix(".tmp") }.count, threadCount * perThread)
    }

    /// A file handed off is closed before its owner is told it is saved:
    /// a list counts it as gone then (its bound on the files waiting is one
    /// on open descriptors), so the commit must not keep it open while the
    /// other files of the batch are told (one told may block, writing a
    /// `--json` line to a pipe nobody reads).
    func testAHandedOffFileIsClosedBeforeItsOwnerIsTold() throws {
        let flushing = DispatchSemaphore(value: 0)
        var calls = SystemCalls.live
        calls.fdatasync = { descriptor in
            flushing.wait()
            return SystemCalls.live.fdatasync(descriptor)
        }
        let group = SyncGroup()
        let told = DispatchSemaphore(value: 0)
        let openWhenTold = Mutex<[Bool]>([])
        // Made and handed off in a function of its own, so this test holds no reference to the file.
        func handOff(_ name: String) -> Int32? {
            guard let commit = Self.commit(name, in: directory, calls: calls) else { return nil }
            let descriptor = commit.file.descriptor
            group.submit(commit, calls: calls) { failure in
                XCTAssertNil(failure)
                openWhenTold.withLock { $0.append(fcntl(descriptor, F_GETFD) != -1) }
                told.signal()
            }
            return descriptor
        }
        XCTAssertNotNil(handOff("closed"))
        flushing.signal()
        XCTAssertEqual(told.wait(timeout: .now() + 10), .success, "the handed-off commit was never told")
        XCTAssertEqual(openWhenTold.withLock { $0 }, [false], "the file was still open when its owner was told")
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory + "/closed"))
    }

    /// Files handed off one after another, each its own batch (the next
    /// comes after the last was told), are committed by one parked thread,
    /// not a new thread each: 40 batches ran on 40 threads before committers
    /// parked. Each batch gets the disk calls it was handed with.
    func testBatchesOneAfterAnotherReuseAParkedCommitter() throws {
        // A thread's specific data starts empty: a thread met for the first time is marked and counted.
        var made = pthread_key_t()
        XCTAssertEqual(pthread_key_create(&made, nil), 0)
        let key = made
        defer { pthread_key_delete(key) }
        let threads = Atomic<Int>(0)
        let counted = Atomic<Int>(0)
        var calls = SystemCalls.live
        calls.fsync = { descriptor in
            counted.add(1, ordering: .relaxed)
            return SystemCalls.live.fsync(descriptor)
        }
        let group = SyncGroup()
        for index in 0..<40 {
            guard let commit = Self.commit("p\(index)", in: directory, calls: calls) else { return }
            let told = DispatchSemaphore(value: 0)
            group.submit(commit, calls: calls) { failure in
                XCTAssertNil(failure)
                if pthread_getspecific(key) == nil {
                    pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
                    threads.add(1, ordering: .relaxed)
                }
                told.signal()
            }
            XCTAssertEqual(told.wait(timeout: .now() + 10), .success, "batch \(index) was never told")
        }
        XCTAssertLessThanOrEqual(threads.load(ordering: .relaxed), 2, "a thread was started per batch")
        // Each lone commit fsyncs its directory with the calls it was handed.
        XCTAssertEqual(counted.load(ordering: .relaxed), 40)
    }

    /// A commit of a new file `name` (its name as its bytes), written as `name.tmp` and renamed.
    private static func commit(_ name: String, in directory: String, calls: SystemCalls) -> SyncGroup.Commit? {
        let final = directory + "/" + name
        do {
            let file = try OutputFile(creating: final + ".tmp", calls: calls)
            XCTAssertEqual(pwrite(file.descriptor, name, name.utf8.count, 0), name.utf8.count)
            return SyncGroup.Commit(file: file, directory: directory) {
                guard rename(final + ".tmp", final) == 0 else { throw IOError("rename", final) }
            }
        } catch {
            XCTFail("\(error)")
            return nil
        }
    }
}

/// Slows the flushes down (up to 0.6 ms each) and records how many ran at once.
private final class FlushMeter: Sendable {
    let running = Atomic<Int>(0)
    let mostAtOnce = Atomic<Int>(0)
    let count = Atomic<Int>(0)

    func timed(_ call: @escaping @Sendable (Int32) -> Int32) -> @Sendable (Int32) -> Int32 {
        { [self] descriptor in
            let now = running.add(1, ordering: .sequentiallyConsistent).newValue
            defer { running.subtract(1, ordering: .sequentiallyConsistent) }
            var most = mostAtOnce.load(ordering: .relaxed)
            while now > most {
                let (exchanged, current) = mostAtOnce.compareExchange(expected: most, desired: now, ordering: .relaxed)
                if exchanged { break }
                most = current
            }
            usleep(UInt32(count.add(1, ordering: .relaxed).newValue % 7) * 100)
            return call(descriptor)
        }
    }
}
