// SharedDirectory: the directory the files of a list are saved into, as the
// run knows it. Two things, both about names:
//
// - What the directory held when the run began, read once. Before a file is
//   fetched its download looks for its manifest, its `.part` and the output
//   itself: three lookups of names that are usually not there, the costly
//   kind (the kernel searches the directory's blocks, with the directory
//   locked against the links of the files being saved meanwhile; on a
//   network file system, a round trip each). 1000 files of 16 KiB into a
//   fresh ext4 made 3000 such lookups, and a lane blocked on the directory's
//   lock 337 times. A file none of whose names were there, and which no
//   other download of the run took, skips them.
// - Which outputs the run's downloads hold. A download holds its output from
//   its first attempt to its end; another whose names meet those (the same
//   output, or the one's output the other's `.part`) waits for that end, and
//   then looks its names up: a list naming one file twice fetches it once,
//   and the second entry finds it complete. (Without the wait both were
//   fetched, and the second failed to take a name the first had just given.)
//   Only a download's first `take` waits, when it holds nothing yet, so no
//   two downloads ever wait for each other.
//
// What the snapshot cannot see is another process creating those names
// during the run. The later steps are on guard for that, as before: a
// `.part` is created with O_EXCL (one that exists is claimed as usual, or
// refused), and a finished file is linked or renamed to its name without
// replacing anything; it stays in its `.part`, with a message, instead.
// Names are kept as hashes of their bytes (a collision only costs the
// lookups), 8 bytes a file.
import Dispatch
import Glibc
import Synchronization

public final class SharedDirectory: Sendable {
    /// The directory as the outputs' paths name it (no trailing '/').
    private let directory: String
    /// The names it held when the run began.
    private let listed: Set<Int>
    private let state = Mutex(Holds())

    private struct Holds {
        /// Every output a download of the run took.
        var taken: Set<Int> = []
        /// The outputs held now, by the download holding each, with what a
        /// download waiting for it waits on; and each download's outputs.
        var held: [Int: (owner: ObjectIdentifier, released: DispatchGroup)] = [:]
        var outputs: [ObjectIdentifier: [Int]] = [:]
    }

    private enum Taking {
        case fresh, lookUp
        case wait(DispatchGroup)
    }

    /// Reads `directory`'s names; nil when it cannot be read, or holds more
    /// than `limit` entries (reading them would cost more than the lookups
    /// they save).
    public init?(directory: String, limit: Int) {
        var trimmed = Substring(directory)
        while trimmed.utf8.count > 1, trimmed.utf8.last == UInt8(ascii: "/") { trimmed = trimmed.dropLast() }
        guard let stream = opendir(String(trimmed)) else { return nil }
        defer { closedir(stream) }
        var names = Set<Int>()
        while true {
            errno = 0
            guard let entry = readdir(stream) else { break }
            guard names.count < limit else { return nil }
            names.insert(withUnsafeBytes(of: entry.pointee.d_name) { raw in
                Self.hash(UnsafeRawBufferPointer(rebasing: raw[..<(raw.firstIndex(of: 0) ?? raw.count)]))
            })
        }
        // A listing cut short by an error is no listing.
        guard errno == 0 else { return nil }
        self.directory = String(trimmed)
        listed = names
    }

    /// Holds `output` for `owner`'s download until `release(heldBy:)`,
    /// first waiting (with `waiting`) while another download holds any of
    /// its names; without `waiting`, such a name is neither held nor
    /// vouched for. True when none of the names a download to `output` uses
    /// (the file, its `.part`, manifest, journal and mark) was in the
    /// directory and no download took any of them before: nothing of it
    /// needs looking up. False for a file in another directory.
    func take(_ output: String, for owner: AnyObject, waiting: Bool) -> Bool {
        var output = output
        // Its own names, then the other outputs whose own names it is one of.
        guard let (own, stems) = output.withUTF8({ names(from: UnsafeRawBufferPointer($0)) }) else { return false }
        let related = own + stems
        let wasListed = own.contains(where: listed.contains)
        let id = ObjectIdentifier(owner)
        while true {
            let taking = state.withLock { holds -> Taking in
                for hash in related {
                    guard let other = holds.held[hash], other.owner != id else { continue }
                    return waiting ? .wait(other.released) : .lookUp
                }
                let fresh = !wasListed && !related.contains(where: holds.taken.contains)
                holds.taken.insert(own[0])
                if holds.held[own[0]] == nil {
                    let released = DispatchGroup()
                    released.enter()
                    holds.held[own[0]] = (id, released)
                    holds.outputs[id, default: []].append(own[0])
                }
                return fresh ? .fresh : .lookUp
            }
            switch taking {
            case .fresh: return true
            case .lookUp: return false
            case let .wait(released): released.wait()
            }
        }
    }

    /// Ends every hold of `owner`'s download, letting those waiting go on.
    func release(heldBy owner: AnyObject) {
        let released = state.withLock { holds -> [DispatchGroup] in
            let outputs = holds.outputs.removeValue(forKey: ObjectIdentifier(owner)) ?? []
            return outputs.compactMap { holds.held.removeValue(forKey: $0)?.released }
        }
        released.forEach { $0.leave() }
    }

    /// The hashes of the names a download to the path `bytes` uses (the
    /// file's, then those beside it), and of the outputs whose names
    /// include its name; nil for a file in another directory.
    private func names(from bytes: UnsafeRawBufferPointer) -> (own: [Int], stems: [Int])? {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")),
              slash == 0 ? directory == "/" : bytes[..<slash].elementsEqual(directory.utf8) else { return nil }
        let name = UnsafeRawBufferPointer(rebasing: bytes[(slash + 1)...])
        var hasher = Hasher()
        hasher.combine(bytes: name)
        var own = [hasher.finalize()]
        var stems: [Int] = []
        for suffix in Self.suffixes {
            var beside = hasher
            suffix.withUnsafeBytes { beside.combine(bytes: $0) }
            own.append(beside.finalize())
            if name.count > suffix.count, name.suffix(suffix.count).elementsEqual(suffix) {
                stems.append(Self.hash(UnsafeRawBufferPointer(rebasing: name.dropLast(suffix.count))))
            }
        }
        return (own, stems)
    }

    /// What each file beside an output adds to its name (PartialFiles).
    private static let suffixes = PartialFiles.besideSuffixes.map { Array($0.utf8) }

    private static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }
}
