// QuickState: bytes written to the data file but perhaps not on disk yet,
// saved about twenty times a second without any fsync, in a file of its own,
// `OUTPUT.part.quick`. A killed process loses nothing the kernel already has,
// so in the same boot, for the same data file, those bytes are good; after a
// reboot only the manifest's durable `done` counts.
//
// It is never renamed over the durable manifest: on XFS, or on ext4 with
// noauto_da_alloc, a power cut can bring back a renamed file that was never
// fsynced as an empty one. That may happen to this file, and costs only the
// bytes since the last durable save; the manifest is replaced only by files
// that were fsynced first.
import FoundationEssentials
import Glibc

/// The bytes written to a data file in this boot, beyond its manifest's `done`.
struct QuickState: Codable, Equatable, Sendable {
    /// The kernel's boot ID when `written` was recorded.
    var bootID: String
    /// The data file the bytes were written to.
    var file: FileIdentity
    /// Byte ranges written to it, as `[start, end)` pairs.
    var written: RangeSet

    /// Replaces the quick state at `path` (temporary file and rename, no fsync).
    func save(to path: String, calls: SystemCalls) throws(IOError) {
        let data: Data
        do { data = try JSONEncoder().encode(self) } catch { throw IOError("encode", path, code: EINVAL) }
        try StateFile.replace(path, with: data, durable: false, calls: calls)
    }

    /// The bytes the quick state at `path` adds to a manifest of a `size`-byte
    /// file whose data is at `dataPath`: empty when there is none, when it
    /// cannot be read (what a power cut may leave), or when it was recorded in
    /// another boot, for another data file or past `size`.
    static func written(at path: String, dataPath: String, size: Int64) -> RangeSet {
        guard let data = try? StateFile.read(path),
              let state = try? JSONDecoder().decode(QuickState.self, from: data),
              state.bootID == currentBootID(), state.file == FileIdentity(path: dataPath),
              state.written.fits(size: size) else { return RangeSet() }
        return state.written
    }

    /// This boot of the kernel (`/proc/sys/kernel/random/boot_id`), nil if unknown.
    static func currentBootID() -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/sys/kernel/random/boot_id") else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingWhitespace()
        return text.isEmpty ? nil : text
    }
}
