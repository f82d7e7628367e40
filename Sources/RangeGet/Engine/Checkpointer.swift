// Checkpointer: makes progress durable without stalling the transfers. On its
// own queue it runs fdatasync on the data file and then replaces the manifest,
// so a byte is recorded only after it reached the disk (invariant 2).
import Dispatch
import Synchronization

final class Checkpointer: Sendable {
    private let file: OutputFile
    private let path: String
    private let calls: SystemCalls
    private let queue = DispatchQueue(label: "rangeget.checkpoint")
    private let busy = Atomic<Bool>(false)
    private let firstFailure = Mutex<IOError?>(nil)

    init(file: OutputFile, manifestPath: String, calls: SystemCalls) {
        self.file = file
        path = manifestPath
        self.calls = calls
    }

    /// Saves `manifest` in the background unless a save is still running;
    /// `manifest.done` must hold only bytes already written to the file.
    func saveInBackground(_ manifest: Manifest, then: @escaping @Sendable (Manifest) -> Void) {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        queue.async { [self] in
            if (try? save(manifest)) != nil { then(manifest) }
            busy.store(false, ordering: .releasing)
        }
    }

    /// Asks the kernel to start writing dirty data to disk now, in the
    /// background, so that the next fdatasync (and the final one) finds little
    /// left to do: disk writes overlap the download instead of following it.
    func startWriteback() {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        queue.async { [self] in
            file.startWriteback()
            busy.store(false, ordering: .releasing)
        }
    }

    /// Waits until no background save is running (before the manifest is
    /// deleted or replaced, so a late save cannot bring it back).
    func waitForBackgroundSave() {
        queue.sync {}
    }

    /// Waits for a background save, then saves `manifest` on this thread.
    func saveNow(_ manifest: Manifest) throws(IOError) {
        queue.sync {}
        try save(manifest)
    }

    /// The first failure of a background save, if any (disk full, I/O error).
    var failure: IOError? { firstFailure.withLock { $0 } }

    private func save(_ manifest: Manifest) throws(IOError) {
        do {
            try file.synchronize()
            try manifest.save(to: path, calls: calls)
        } catch {
            firstFailure.withLock { if $0 == nil { $0 = error } }
            throw error
        }
    }
}
