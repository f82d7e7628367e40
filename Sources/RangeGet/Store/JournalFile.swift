// JournalFile: reading a write journal (WriteJournal writes it), kept apart
// from the writer so the manifest's parser, which adds the journal's bytes,
// stays free of C modules (it is fuzzed on its own). The layout is described
// in WriteJournal.swift.
import FoundationEssentials

enum JournalFile {
    /// "RGJRNL01" as a little-endian word.
    static let magic = Int64(bitPattern: 0x3130_4C4E_524A_4752)
    static let headerWords = 16

    /// The bytes the journal at `path` says were written to the data file at
    /// `dataPath` (`size` bytes) in this boot; empty when there is none, when it
    /// is damaged, or when it was written in another boot or for another file.
    static func written(at path: String, dataPath: String, size: Int64) -> RangeSet {
        guard let data = try? StateFile.read(path), data.count % 8 == 0, data.count >= headerWords * 8,
            let boot = currentBoot(), let identity = FileIdentity(path: dataPath)
        else { return RangeSet() }
        let words = data.withUnsafeBytes { Array($0.bindMemory(to: Int64.self)) }
        let slots = Int(clamping: words[6])
        let capacity = Int(clamping: words[7])
        let active = words[8]
        guard words[0] == magic, words[1] == boot.0, words[2] == boot.1,
            UInt64(bitPattern: words[3]) == identity.device, UInt64(bitPattern: words[4]) == identity.inode,
            words[5] == size, slots > 0, slots <= 4096, capacity > 0, capacity <= 1 << 20,
            active == 0 || active == 1,
            words.count == headerWords + 2 * slots + 2 * (1 + capacity)
        else { return RangeSet() }
        var written = RangeSet()
        func add(_ start: Int64, _ end: Int64) {
            if start >= 0, start < end, end <= size { written.insert(ByteRange(start, end)) }
        }
        for slot in 0..<slots { add(words[headerWords + 2 * slot], words[headerWords + 2 * slot + 1]) }
        let log = headerWords + 2 * slots + Int(active) * (1 + capacity)
        let count = min(max(0, Int(clamping: words[log])), capacity)
        for record in 0..<count { add(words[log + 1 + 2 * record], words[log + 2 + 2 * record]) }
        return written
    }

    /// This boot of the kernel (`/proc/sys/kernel/random/boot_id`) as two
    /// words, nil when unknown: without it no journal is kept or trusted.
    static func currentBoot() -> (Int64, Int64)? {
        guard let data = FileManager.default.contents(atPath: "/proc/sys/kernel/random/boot_id") else { return nil }
        let hex = String(decoding: data, as: UTF8.self).filter(\.isHexDigit)
        guard hex.count == 32, let high = UInt64(hex.prefix(16), radix: 16), let low = UInt64(hex.suffix(16), radix: 16)
        else { return nil }
        return (Int64(bitPattern: high), Int64(bitPattern: low))
    }
}
