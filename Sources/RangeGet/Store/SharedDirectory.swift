import Synchronization

// SharedDirectory: the directory the files of a list are saved into, read
// once as the run begins. Before a file is fetched, its download looks for
// its manifest, its `.part` and the output itself: three lookups of names
// that are usually not there, the costly kind (the kernel searches the
// directory's blocks, with the directory locked against the links of the
// files being saved meanwhile; on a network file system, a round trip
// each). 1000 files of 16 KiB into a fresh ext4 made 3000 such lookups, and
// a lane blocked on the directory's lock 337 times. A file none of whose
// names were there, and that no other download of the run took, skips them.
//
// The snapshot is as old as the run: another process may create a name
// after it was read. So it is trusted only where that costs little and is
// caught: a download uses it to send its opening request at once, and skips
// the lookups for good only when that request brought the whole file (at
// most 128 KiB). Such a file is linked to its name without replacing
// anything; when the name was taken meanwhile, a file with the same bytes
// counts as saved, and any other is left alone (the data stays in the
// `.part`, and the download fails saying so). A larger file is looked up
// after its opening request, as always. A directory that does not tell
// names apart by case (vfat, exFAT, SMB, a casefolded ext4), where a hash
// of `a.bin` would miss `A.bin`, gets no snapshot. (One that folds Unicode
// forms but not case, such as ZFS with normalization=formD, passes that
// test: there a name spelt otherwise than the one listed is taken as free,
// and its link meets the file, as above.) Names are kept as hashes of their
// bytes (a collision only costs the lookups), 8 bytes a file.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

package final class SharedDirectory: Sendable {
    /// The directory as the outputs' paths name it (no trailing '/').
    private let directory: String
    /// The names it held when the run began.
    private let listed: Set<Int>
    /// Every output a download of the run took.
    private let taken = Mutex(Set<Int>())

    /// Reads `directory`'s names; nil when it cannot be read, does not tell
    /// names apart by case, or holds more than `limit` entries (reading
    /// them would cost more than the lookups they save).
    package init?(directory: String, limit: Int) {
        var trimmed = Substring(directory)
        while trimmed.utf8.count > 1, trimmed.utf8.last == UInt8(ascii: "/") { trimmed = trimmed.dropLast() }
        self.directory = String(trimmed)
        guard Self.tellsCaseApart(self.directory), let stream = opendir(self.directory) else { return nil }
        defer { closedir(stream) }
        var names = Set<Int>()
        while true {
            errno = 0
            guard let entry = readdir(stream) else { break }
            guard names.count < limit else { return nil }
            names.insert(
                withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    Self.hash(UnsafeRawBufferPointer(rebasing: raw[..<(raw.firstIndex(of: 0) ?? raw.count)]))
                })
        }
        // A listing cut short by an error is no listing.
        guard errno == 0 else { return nil }
        listed = names
    }

    /// True when none of the names a download to `output` uses (the file,
    /// its `.part`, manifest, journal, mark and `.part.new`) was in the directory, and no
    /// download of the run took any of them before; `output` is taken, so
    /// a second download of it (another entry, or another attempt) looks
    /// its names up. False for a file in another directory.
    func take(_ output: String) -> Bool {
        var output = output
        guard let (own, stems) = output.withUTF8({ names(from: UnsafeRawBufferPointer($0)) }) else { return false }
        let wasListed = own.contains(where: listed.contains)
        return taken.withLock { taken in
            defer { taken.insert(own[0]) }
            return !wasListed && !own.contains(where: taken.contains) && !stems.contains(where: taken.contains)
        }
    }

    /// The hashes of the names a download to the path `bytes` uses (the
    /// file's, then those beside it), and of the outputs whose names
    /// include its name; nil for a file in another directory.
    private func names(from bytes: UnsafeRawBufferPointer) -> (own: [Int], stems: [Int])? {
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        // `dir//name` is in `dir` too.
        var folderEnd = slash
        while folderEnd > 0, bytes[folderEnd - 1] == UInt8(ascii: "/") { folderEnd -= 1 }
        guard folderEnd == 0 ? directory == "/" : bytes[..<folderEnd].elementsEqual(directory.utf8) else { return nil }
        let name = UnsafeRawBufferPointer(rebasing: bytes[(slash + 1)...])
        // Hashing a name, then a suffix, hashes the bytes of both joined
        // (Hasher.combine(bytes:), pinned by a test).
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

    /// True when a name in `directory` written in capitals is not the same
    /// name in small letters: an empty file made and removed to see.
    private static func tellsCaseApart(_ directory: String) -> Bool {
        // Named as OutputDirectory's test of a directory's write access.
        let name = "/.rangeget-write-test-\(getpid())-"
        let (small, capitals) = (directory + name + "a", directory + name.uppercased() + "A")
        let descriptor = open(small, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { return false }
        close(descriptor)
        defer { unlink(small) }
        var info = stat()
        return lstat(capitals, &info) != 0 && errno == ENOENT
    }

    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }
}
