// SyncGroup: the group commit of the files of a list. A finished file is
// committed in three steps: its data made durable (fdatasync), then published
// (renamed to its final name, or an unnamed file linked to it), then its
// directory made durable (fsync; after links, a second syncfs). Each
// sync of a small file costs a journal commit, far more than fetching it over
// a fast link. Threads that commit while another thread is committing queue
// their file; when that commit is done, one of them commits everything queued
// meanwhile, in one pass: one syncfs writes back all their data at once
// (and reports their errors; where it cannot, each is fdatasynced, which
// reports its own), each is published, and each directory is fsynced once
// however many files were renamed into it. A commit returns only when its
// own file is done, so the promise per file is the one a lone download
// keeps: its final name appears only after its data is durable, and it is
// reported saved only after the name is. A commit can also be handed off
// (`submit`, the files of a list): its thread goes on at once, and a
// committer thread, started when none is committing, commits the batch and
// tells each file's `then`; what queued meanwhile goes to another committer
// first (a parked one, else a new thread), so telling (a file's result, its
// `--json` line) never delays the next flush. A committer that is done
// parks for a while for the next batch rather than ending.
import Dispatch
import Synchronization
import SystemSupport

/// Commits of finished files by several downloads at once, done in batches.
package final class SyncGroup: Sendable {
    private let state = Mutex(Queue())

    private struct Queue {
        var waiting: [Commit] = []
        var committing = false
        /// Committer threads parked for the next batch, and the disk calls
        /// of the batches handed to them (one each, in order).
        var parked = 0
        var handed: [SystemCalls] = []
    }

    /// Wakes a parked committer: one signal for each taken from `parked`.
    private let wake = DispatchSemaphore(value: 0)
    /// How long a committer thread waits for the next batch before it ends:
    /// a list hands a batch over every few milliseconds, and a thread
    /// started per batch was 73 threads for 1000 small files.
    static let parkSeconds = 0.5

    /// One file to commit. Written by the thread that commits it before
    /// `done` is signalled (or `then` called), read by its owner after.
    final class Commit: @unchecked Sendable {
        let file: OutputFile
        let directory: String
        /// Run when the data cannot be made durable: whatever vouches for
        /// bytes not yet durable (a write journal) must go with the failure.
        let unsynced: () -> Void
        let publish: () throws -> Void
        let done = DispatchSemaphore(value: 0)
        /// For a commit handed off (`submit`): told its failure, or nil, by the committer.
        var then: (@Sendable ((any Error)?) -> Void)?
        var leads = false
        var failure: (any Error)?

        init(
            file: OutputFile, directory: String, unsynced: @escaping () -> Void = {},
            publish: @escaping () throws -> Void
        ) {
            self.file = file
            self.directory = directory
            self.unsynced = unsynced
            self.publish = publish
        }
    }

    /// What the file systems of the group's directories refused (a rename
    /// that replaces nothing, unnamed files), so each is tried once.
    let refusals = Refusals()

    /// A group; share it between the downloads whose commits it should batch.
    package init() {}

    /// Makes `file`'s data durable, then runs `publish` (the rename into
    /// place), then makes `directory` durable: together with whatever other
    /// threads commit meanwhile. Throws the first step's error; the later
    /// steps are skipped for this file after one fails (and `unsynced` runs
    /// when the first one did).
    func commit(_ commit: Commit, calls: SystemCalls) throws {
        if queue(commit) {
            commitWaiting(calls: calls)
        } else {
            commit.done.wait()
            // Woken to commit the batch it is in, rather than with its result.
            if commit.leads { commitWaiting(calls: calls) }
        }
        if let failure = commit.failure { throw failure }
    }

    /// The same steps for `commit`, handed off: returns at once, and the
    /// thread that commits it calls `then` with the first step's error, or nil.
    func submit(_ commit: Commit, calls: SystemCalls, then: @escaping @Sendable ((any Error)?) -> Void) {
        commit.then = then
        if queue(commit), !startCommitter(calls: calls) { commitWaiting(calls: calls) }
    }

    /// Queues `commit`; true when no one is committing, and the caller must see to it.
    private func queue(_ commit: Commit) -> Bool {
        state.withLock { queue -> Bool in
            queue.waiting.append(commit)
            guard !queue.committing else { return false }
            queue.committing = true
            return true
        }
    }

    /// Wakes a parked committer, else starts a thread, to commit what waits;
    /// false when no thread can be had.
    private func startCommitter(calls: SystemCalls) -> Bool {
        let woken = state.withLock { queue -> Bool in
            guard queue.parked > 0 else { return false }
            queue.parked -= 1
            queue.handed.append(calls)
            return true
        }
        if woken {
            wake.signal()
            return true
        }
        return tryStartThread("rangeget commit") { [self] in
            var calls = calls
            while true {
                commitWaiting(calls: calls)
                guard let next = park() else { return }
                calls = next
            }
        }
    }

    /// Parks the calling committer until a batch is handed to it (its disk
    /// calls), or nil when none came for `parkSeconds` (its thread ends).
    private func park() -> SystemCalls? {
        state.withLock { $0.parked += 1 }
        while wake.wait(timeout: .now() + Self.parkSeconds) == .timedOut {
            let gone = state.withLock { queue -> Bool in
                guard queue.parked > 0 else { return false }
                queue.parked -= 1
                return true
            }
            if gone { return nil }
            // A batch was handed over as the wait ended. Its signal is on the
            // way, or another committer that parked since took it, and this
            // one counts as parked in its place: wait again, never unbounded
            // (an untimed wait could hold the thread and its group forever).
        }
        return state.withLock { $0.handed.removeFirst() }
    }

    /// Commits every waiting file; then passes the lead on, if more queued
    /// meanwhile (to a waiting caller among them, else to a new committer
    /// thread), so the next flush starts at once; then tells each file of
    /// its batch. Where no thread can be had, it commits the next batch
    /// itself, after telling.
    private func commitWaiting(calls: SystemCalls) {
        while true {
            var batch = state.withLock { queue in
                defer { queue.waiting = [] }
                return queue.waiting
            }
            Self.run(batch, calls: calls)
            let next = state.withLock { queue -> Commit? in
                guard let first = queue.waiting.first(where: { $0.then == nil }) ?? queue.waiting.first else {
                    queue.committing = false
                    return nil
                }
                return first
            }
            var leads = false
            if let next {
                if next.then == nil {
                    next.leads = true
                    next.done.signal()
                } else {
                    leads = !startCommitter(calls: calls)
                }
            }
            // A handed-off commit is let go before it is told: it holds its
            // file (open), which its owner may count as gone once told.
            var told: [(then: @Sendable ((any Error)?) -> Void, failure: (any Error)?)] = []
            for commit in batch {
                if let then = commit.then { told.append((then, commit.failure)) } else { commit.done.signal() }
            }
            batch = []
            for (then, failure) in told { then(failure) }
            guard leads else { return }
        }
    }

    /// The three steps for every commit of `batch`, each step for all before the next.
    static func run(_ batch: [Commit], calls: SystemCalls) {
        // One syncfs writes back every file of the batch with their I/O in
        // flight together (an fdatasync each waits for each in turn, where a
        // file system syncs each inode alone). Called on the file opened
        // first, a syncfs that succeeds (on a kernel and a file system where
        // that means something: SystemCalls.syncfsVouches) vouches for every
        // file of the batch on its file system: each was written after that
        // open, so any writeback error of theirs would have been reported.
        // Those need no fdatasync (each one a disk cache flush of its own).
        // When it fails, or cannot vouch, or for a file on another file
        // system, each file's fdatasync reports its own errors, finding it clean.
        var vouched: Set<ObjectIdentifier> = []
        if batch.count > 1, let first = batch.min(by: { $0.file.openOrder < $1.file.openOrder }),
            first.file.synchronizeFileSystem(), let device = first.file.device
        {
            for commit in batch where commit.file.device == device { vouched.insert(ObjectIdentifier(commit)) }
        }
        for commit in batch where !vouched.contains(ObjectIdentifier(commit)) {
            do {
                try commit.file.synchronize()
            } catch {
                commit.failure = error
                commit.unsynced()
            }
        }
        let unnamed = Set(batch.filter { $0.file.hasNoName }.map(ObjectIdentifier.init))
        for commit in batch where commit.failure == nil {
            do { try commit.publish() } catch { commit.failure = error }
        }
        // A rename changes its directory only, which the directory's fsync
        // makes durable. A link of an unnamed file (OutputFile.unnamed)
        // changes the file too (its link count), which that fsync does not
        // write: in a batch of several (the first syncfs wrote their data
        // back already) a second syncfs makes both durable, the directories
        // of every file of the batch on its file system too, where it
        // vouches; otherwise each linked file is fsynced, then its directory.
        let linked = batch.filter { $0.failure == nil && unnamed.contains(ObjectIdentifier($0)) }
        var durableNames: Set<ObjectIdentifier> = []
        if batch.count > 1, let first = linked.min(by: { $0.file.openOrder < $1.file.openOrder }),
            first.file.synchronizeFileSystem(), let device = first.file.device
        {
            for commit in batch where commit.failure == nil && commit.file.device == device {
                durableNames.insert(ObjectIdentifier(commit))
            }
        }
        for commit in linked where !durableNames.contains(ObjectIdentifier(commit)) {
            do { try commit.file.synchronizeWithInode() } catch { commit.failure = error }
        }
        var directories: [String: IOError?] = [:]
        for commit in batch where commit.failure == nil && !durableNames.contains(ObjectIdentifier(commit)) {
            if directories[commit.directory] == nil {
                do {
                    try StateFile.synchronize(directory: commit.directory, calls: calls)
                    directories[commit.directory] = .some(nil)
                } catch {
                    directories[commit.directory] = .some(error)
                }
            }
            commit.failure = directories[commit.directory] ?? nil
        }
    }
}
