// Checkpointer: records progress without stalling the transfers, on its own
// queue. Two kinds of save:
// - durable, about once a second: fdatasync the data, then list the bytes as
//   `done` in the manifest and fsync it: a byte is `done` only once it is on
//   disk (invariant 2), whatever happens to the machine;
// - quick, about twenty times a second: list the bytes written so far in the
//   quick state (`OUTPUT.part.quick`), tagged with the kernel's boot ID and
//   the data file's identity, without any fsync. A killed process loses
//   nothing the kernel already has, so in the same boot those bytes are good;
//   after a reboot only `done` counts (see Manifest.load). The quick state is
//   a file of its own: the manifest is only ever replaced by a fsynced one,
//   so a power cut can cost the quick state, never the durable progress.
import Dispatch
import Synchronization

final class Checkpointer: Sendable {
    private let file: OutputFile
    private let path: String
    private let quickPath: String
    private let calls: SystemCalls
    private let base: Manifest
    private let bootID = QuickState.currentBootID()
    private let identity: FileIdentity?
    private let queue = DispatchQueue(label: "rangeget.checkpoint")
    private let busy = Atomic<Bool>(false)
    private let firstFailure = Mutex<IOError?>(nil)

    /// A checkpointer for `manifest` (whose `done` is durable already) at
    /// `manifestPath`, with the quick state beside the data file.
    init(file: OutputFile, manifest: Manifest, manifestPath: String, calls: SystemCalls) {
        self.file = file
        path = manifestPath
        quickPath = PartialFiles(data: file.path).quickState
        self.calls = calls
        base = manifest
        identity = FileIdentity(descriptor: file.descriptor)
    }

    /// Saves in the background unless a save is still running (then returns
    /// false: try again soon). `written` must hold only bytes already written
    /// to the file; `durable` makes them `done` after an fdatasync. `then`
    /// gets the bytes now durable.
    @discardableResult
    func saveInBackground(_ written: RangeSet, durable: Bool, then: @escaping @Sendable (Int64) -> Void) -> Bool {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return false }
        queue.async { [self] in
            if (try? save(written, durable: durable)) != nil, durable { then(written.byteCount) }
            busy.store(false, ordering: .releasing)
        }
        return true
    }

    /// Waits until no background save is running (before the manifest is
    /// deleted or replaced, so a late save cannot bring it back).
    func waitForBackgroundSave() {
        queue.sync {}
    }

    /// Waits for a background save, then makes `written` durable on this thread.
    func saveNow(_ written: RangeSet) throws(IOError) {
        queue.sync {}
        try save(written, durable: true)
    }

    /// The first failure of a background save, if any (disk full, I/O error).
    var failure: IOError? { firstFailure.withLock { $0 } }

    private func save(_ written: RangeSet, durable: Bool) throws(IOError) {
        // After a failed sync nothing more is ever recorded: Linux reports a
        // writeback error once, and a later fdatasync succeeds even though the
        // bytes it covered never reached the disk.
        if let failure { throw failure }
        do throws(IOError) {
            if durable {
                do {
                    try file.synchronize()
                } catch {
                    // The kernel may have dropped what it could not write: bytes
                    // a quick save listed are no longer good, even in this boot.
                    try? StateFile.remove(quickPath)
                    throw error
                }
                var manifest = base
                manifest.done = written
                try manifest.save(to: path, calls: calls, durable: true)
            } else {
                // Start writing dirty data to disk now, so the next fdatasync
                // (and the final one) has little left: disk writes overlap the download.
                file.startWriteback()
                guard let bootID, let identity else { return }
                try QuickState(bootID: bootID, file: identity, written: written).save(to: quickPath, calls: calls)
            }
        } catch {
            firstFailure.withLock { if $0 == nil { $0 = error } }
            throw error
        }
    }
}
