// SyncGroup: the group commit of the files of a list. A finished file is
// made durable in two steps, its data (fdatasync) before its rename, then its
// directory (fsync) after it; each sync of a small file costs a journal
// commit, far more than fetching it over a fast link. Threads that need a sync
// while another thread is syncing queue their request; when that sync is
// done, one of them syncs everything queued meanwhile, in one pass: starts
// writeback of every queued data file, then fdatasyncs each (the blocks of
// all of them go into the same journal commit), then each directory once
// however many files were renamed into it.
// A request returns only when its own sync is done, so the promise per file
// is unchanged: its final name appears only after its data is durable, and
// the download reports success only after the name is.
import Dispatch
import Synchronization

/// Syncs requested by several downloads at once, done in batches.
public final class SyncGroup: Sendable {
    private let state = Mutex(Queue())

    private struct Queue {
        var waiting: [Request] = []
        var syncing = false
    }

    /// What one request makes durable.
    enum Target {
        case data(OutputFile)
        case directory(String)
    }

    private final class Request: @unchecked Sendable {
        // Written by the thread that syncs it before `done` is signalled; read after.
        let target: Target
        let done = DispatchSemaphore(value: 0)
        var leads = false
        var failure: IOError?
        init(_ target: Target) { self.target = target }
    }

    /// A group; share it between the downloads whose syncs it should batch.
    public init() {}

    /// Makes `target` durable, together with whatever other threads ask for meanwhile.
    func synchronize(_ target: Target, calls: SystemCalls) throws(IOError) {
        let request = Request(target)
        let leads = state.withLock { queue -> Bool in
            queue.waiting.append(request)
            guard !queue.syncing else { return false }
            queue.syncing = true
            return true
        }
        if !leads {
            request.done.wait()
            // Woken to sync the batch it is in, rather than with its result.
            if request.leads { syncWaiting(calls: calls) }
        } else {
            syncWaiting(calls: calls)
        }
        if let failure = request.failure { throw failure }
    }

    /// Syncs every waiting request, then hands the turn to one that queued
    /// meanwhile (it syncs its own batch), or ends the turn.
    private func syncWaiting(calls: SystemCalls) {
        let batch = state.withLock { queue in
            defer { queue.waiting = [] }
            return queue.waiting
        }
        var directories: [String: IOError?] = [:]
        // Writeback of every file first, so one journal commit covers all their
        // blocks; each fdatasync then mostly waits for what is already under way.
        for request in batch {
            if case let .data(file) = request.target { file.startWriteback() }
        }
        for request in batch {
            switch request.target {
            case let .data(file):
                do { try file.synchronize() } catch { request.failure = error }
            case .directory:
                break
            }
        }
        for request in batch {
            guard case let .directory(path) = request.target else { continue }
            if directories[path] == nil {
                do {
                    try StateFile.synchronize(directory: path, calls: calls)
                    directories[path] = .some(nil)
                } catch {
                    directories[path] = .some(error)
                }
            }
            request.failure = directories[path] ?? nil
        }
        let next = state.withLock { queue -> Request? in
            guard let first = queue.waiting.first else {
                queue.syncing = false
                return nil
            }
            return first
        }
        for request in batch { request.done.signal() }
        if let next {
            next.leads = true
            next.done.signal()
        }
    }
}
