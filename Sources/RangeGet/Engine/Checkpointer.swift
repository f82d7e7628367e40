// Checkpointer: makes progress durable without stalling the transfers, on
// its own queue. About once a second: fdatasync the data, then list the bytes
// as `done` in the manifest and fsync it: a byte is `done` only once it is on
// disk (invariant 2), whatever happens to the machine. In between, twenty
// times a second, it starts writeback of the dirty pages, so that the next
// fdatasync (and the final one) finds little left. What is written but not
// yet durable is in the write journal, recorded at each write by the
// connections (WriteJournal); the manifest is only ever replaced by a fsynced
// file, so a power cut can cost the journal, never the durable progress.
import Dispatch
import Synchronization

final class Checkpointer: Sendable {
    private let file: OutputFile
    private let path: String
    private let journalPath: String
    private let calls: SystemCalls
    private let base: Manifest
    private let queue = DispatchQueue(label: "rangeget.checkpoint")
    private let busy = Atomic<Bool>(false)
    private let firstFailure = Mutex<IOError?>(nil)
    /// What the last durable background save made `done`, until the engine takes it.
    private let saved = Mutex<RangeSet?>(nil)
    /// The `done` of this run's last durable save, nil before one (the
    /// manifest it started from lists none of the bytes it fetches): changed
    /// on `queue` only.
    private let listed = Mutex<RangeSet?>(nil)
    /// The verified pieces that save listed (`Manifest.verified`).
    private let listedVerified = Mutex<RangeSet?>(nil)

    /// A checkpointer for `manifest` (whose `done` is durable already) at `manifestPath`.
    init(file: OutputFile, manifest: Manifest, manifestPath: String, calls: SystemCalls) {
        self.file = file
        path = manifestPath
        journalPath = PartialFiles(data: file.path).journal
        self.calls = calls
        base = manifest
    }

    /// Makes `written` durable in the background unless a save is still
    /// running (then returns false: try again soon). `written` must hold only
    /// bytes already written to the file; `verified`, the pieces of it whose
    /// digests matched (nil: no piece hashes).
    @discardableResult
    func saveInBackground(_ written: RangeSet, verified: RangeSet? = nil) -> Bool {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return false }
        queue.async { [self] in
            if (try? save(written, verified: verified)) != nil { saved.withLock { $0 = written } }
            busy.store(false, ordering: .releasing)
        }
        return true
    }

    /// Starts writeback of the data in the background (no durability promise).
    func startWriteback() {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        queue.async { [self] in
            file.startWriteback()
            busy.store(false, ordering: .releasing)
        }
    }

    /// What the durable background save that finished last made `done`, once.
    func takeSaved() -> RangeSet? {
        saved.withLock { value in
            defer { value = nil }
            return value
        }
    }

    /// Waits until no background save is running (before the manifest is
    /// deleted or replaced, so a late save cannot bring it back).
    func waitForBackgroundSave() {
        queue.sync {}
    }

    /// Waits for a background save, then makes `written` durable on this thread.
    func saveNow(_ written: RangeSet, verified: RangeSet? = nil) throws(IOError) {
        queue.sync {}
        _ = takeSaved()
        try save(written, verified: verified)
    }

    /// Takes `range` out of the manifest: its bytes turned out not to count.
    /// After any save under way, a manifest that lists some of them is saved
    /// again without them, durably, before this returns (a resume after a
    /// kill must not trust them). The data needs no sync for it: a manifest
    /// that lists fewer bytes never runs ahead of the disk.
    func retract(_ range: ByteRange) {
        queue.sync {
            saved.withLock { $0?.remove(range) }
            guard let before = listed.withLock({ $0 }) else { return }
            var after = before
            after.remove(range)
            guard after != before else { return }
            var manifest = base
            manifest.done = after
            manifest.verified = listedVerified.withLock { $0 }.map { verified in
                var kept = verified
                kept.remove(range)
                return kept
            }
            do throws(IOError) {
                try manifest.save(to: path, calls: calls, durable: true)
                listed.withLock { $0 = after }
                listedVerified.withLock { $0 = manifest.verified }
            } catch {
                note(error)
            }
        }
    }

    /// The first failure of a background save, if any (disk full, I/O error).
    var failure: IOError? { firstFailure.withLock { $0 } }

    private func save(_ written: RangeSet, verified: RangeSet?) throws(IOError) {
        // After a failed sync nothing more is ever recorded: Linux reports a
        // writeback error once, and a later fdatasync succeeds even though the
        // bytes it covered never reached the disk.
        if let failure { throw failure }
        do throws(IOError) {
            do {
                try file.synchronize()
            } catch {
                WriteJournal.discard(at: journalPath, calls: calls)
                throw error
            }
            var manifest = base
            manifest.done = written
            manifest.verified = verified
            try manifest.save(to: path, calls: calls, durable: true)
            listed.withLock { $0 = written }
            listedVerified.withLock { $0 = verified }
        } catch {
            note(error)
            throw error
        }
    }

    /// Keeps `failure` if it is the first: no save is made after it.
    private func note(_ failure: IOError) {
        firstFailure.withLock { if $0 == nil { $0 = failure } }
    }
}
