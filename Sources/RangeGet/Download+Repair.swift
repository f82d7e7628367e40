// Checking a file on disk against the hashes its publisher gave (a
// Metalink's pieces and whole-file hash, a --checksum), and repairing it:
// the file becomes a partial download (renamed to its `.part`, nothing
// copied) whose good pieces are done and verified, and an ordinary download
// from the mirrors fetches the bad pieces into it and renames it back once
// every piece matches. A repair that fails puts the file back under its
// name; one killed midway leaves a `.part` that the same command, or a
// download, resumes.
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What checking a file against its published hashes found.
public struct FileVerification: Sendable, Equatable {
    /// The file checked.
    public var path: String
    /// Its length in bytes.
    public var size: Int64
    /// Pieces checked against their digests (0 without piece hashes).
    public var piecesChecked: Int
    /// The pieces whose bytes do not have their published digest, by index.
    public var badPieces: [Int]
    /// Whether the whole file has the expected checksum; nil without one.
    public var checksumMatches: Bool?

    /// True when every hash given matched.
    public var isIntact: Bool { badPieces.isEmpty && checksumMatches != false }
}

extension Download {
    /// Checks the file at `path` against `pieces` (each piece's digest) and
    /// `checksum` (the whole file's).
    ///
    /// Throws ``DownloadError/usage(_:remedy:)`` when neither is given (a file with
    /// no hashes cannot be checked), and ``DownloadError/verification(_:remedy:)``
    /// when the file's size is not the one the pieces describe.
    public static func verify(
        _ path: String, pieces: PieceHashes?, checksum: Checksum?
    ) throws(DownloadError) -> FileVerification {
        guard pieces != nil || checksum != nil else {
            throw .usage("\(path): no hashes to check it against (a Metalink's, or a checksum)")
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .io(IOError("open", path)) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw .io(IOError("stat", path)) }
        let size = Int64(info.st_size)
        if let pieces, !pieces.fits(size: size) {
            throw .verification(
                "\(path) has \(size) bytes; its \(pieces.count) published pieces of \(pieces.length) bytes "
                    + "describe another size")
        }
        // Each piece as the engine checks it, mapped in place; the whole
        // file's checksum in a pass of its own (both only when both are given).
        var badPieces: [Int] = []
        if let pieces {
            badPieces = (0..<pieces.count).filter { index in
                let range = pieces.range(ofPiece: index, size: size)
                return !pieces.matches(piece: index, descriptor: descriptor, offset: range.start, count: range.count)
            }
        }
        var checksumMatches: Bool?
        if let checksum {
            do { checksumMatches = try Checksum.digest(of: path, algorithm: checksum.algorithm) == checksum.hex } catch
            {
                throw .io(error)
            }
        }
        return FileVerification(
            path: path, size: size, piecesChecked: pieces?.count ?? 0, badPieces: badPieces,
            checksumMatches: checksumMatches)
    }

    /// Checks the file at `path` against `options.pieces` (and
    /// `options.checksum`) and fetches the bad pieces again from `mirrors`,
    /// in place: the file is renamed to its `.part` (nothing is copied) and
    /// gets its name back once every piece matches.
    ///
    /// Returns what the check found, and the download's result when pieces
    /// were fetched (nil when the file was intact). A repair that fails puts
    /// the file back under its name before it throws; one killed midway
    /// leaves the `.part`, which the next call resumes (the check is then of
    /// the finished file). Throws
    /// ``DownloadError/usage(_:remedy:)`` without piece hashes (a whole-file
    /// checksum cannot tell which part is bad), when a partial download of
    /// the file is in the way, or when `path` is a symbolic link or has
    /// other hard links (a rename would split them).
    public static func repair(
        _ path: String, mirrors: [String], options: DownloadOptions
    ) async throws(DownloadError) -> (found: FileVerification, repaired: DownloadResult?) {
        guard let pieces = options.pieces else {
            throw .usage(
                "a repair needs piece hashes (a Metalink's): a whole-file checksum cannot tell which part is bad")
        }
        let files = PartialFiles(output: path)
        let noMirror = DownloadError.usage("no URL to fetch the bad pieces from")
        if access(path, F_OK) != 0, access(files.data, F_OK) == 0, access(files.manifest, F_OK) == 0 {
            // A repair (or a download) cut short by a kill: its `.part` is
            // resumed, then the file checked. One that fails again stays a
            // `.part`: it may lack more than bad pieces.
            guard !mirrors.isEmpty else { throw noMirror }
            let repaired = try await fetchPieces(into: path, from: mirrors, options: options)
            return (try verify(path, pieces: pieces, checksum: options.checksum), repaired)
        }
        let found = try verify(path, pieces: pieces, checksum: options.checksum)
        guard !found.isIntact else { return (found, nil) }
        guard !mirrors.isEmpty else { throw noMirror }
        try prepareRepair(of: path, found: found, pieces: pieces, options: options)
        do {
            return (found, try await fetchPieces(into: path, from: mirrors, options: options))
        } catch {
            restore(path, calls: options.systemCalls)
            throw error
        }
    }

    /// Resumes the `.part` of `path` from `mirrors`: the pieces it lacks.
    private static func fetchPieces(
        into path: String, from mirrors: [String], options: DownloadOptions
    ) async throws(DownloadError) -> DownloadResult {
        var repairing = options
        repairing.overwrite = true
        return try await Download(mirrors: mirrors, destination: .file(path), options: repairing).run()
    }

    /// Puts the file of a repair that failed (or was stopped) back under its
    /// name, with what the repair wrote into its bad pieces, as it was
    /// before the repair: no `.part`, no mark. (A killed repair leaves the
    /// `.part` and its manifest, which the next repair resumes.)
    private static func restore(_ path: String, calls: SystemCalls) {
        let files = PartialFiles(output: path)
        guard access(path, F_OK) != 0, retryingOnInterrupt({ calls.rename(files.data, path) }) == 0 else { return }
        for leftover in [files.journal, files.manifest, files.mark] { try? StateFile.remove(leftover, calls: calls) }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        // The mark the repair's download gave it as a `.part`.
        if FileOrigin.marksPartialDownload(descriptor, path: files.data) {
            _ = calls.fremovexattr(descriptor, FileOrigin.validatorsAttribute)
        }
        close(descriptor)
    }

    /// Makes the file at `path` its own `.part`: a manifest beside it lists
    /// its good pieces done and verified (durable after the file's bytes
    /// are), under no URL's validators, so the download resuming it compares
    /// sampled bytes with the server before it trusts them; then the file is
    /// renamed. Nothing is copied: a repair of a 1 GiB file copied and synced
    /// it whole (3.6 s, and room for a second copy) to fetch one piece. The
    /// file keeps its inode, mode and owner. A kill before the rename leaves
    /// the file and a manifest with no data, which a download starts afresh.
    private static func prepareRepair(
        of path: String, found: FileVerification, pieces: PieceHashes, options: DownloadOptions
    ) throws(DownloadError) {
        let files = PartialFiles(output: path)
        guard access(files.data, F_OK) != 0, access(files.manifest, F_OK) != 0 else {
            throw .usage("\(files.data) is there already: resume that download, or remove it, before a repair")
        }
        try checkRenamable(path)
        var good = RangeSet([ByteRange(0, found.size)])
        for index in found.badPieces { good.remove(pieces.range(ofPiece: index, size: found.size)) }
        let origin = RemoteFile(
            url: "file://" + path, effectiveURL: "file://" + path, size: found.size, acceptsRanges: true)
        var manifest = Manifest(remote: origin, size: found.size)
        manifest.record([origin.url])
        manifest.done = good
        manifest.verified = good
        manifest.pieceList = pieces.fingerprint
        let calls = options.systemCalls
        do throws(IOError) {
            try synchronize(path, calls: calls)
            try manifest.save(to: files.manifest, calls: calls, durable: true)
            guard retryingOnInterrupt({ calls.rename(path, files.data) }) == 0 else {
                throw IOError("rename", path)
            }
            try StateFile.synchronizeDirectory(of: path, calls: calls)
        } catch {
            try? StateFile.remove(files.manifest, calls: calls)
            throw .io(error)
        }
    }

    /// Throws unless `path` is a regular file with no other name: a rename
    /// moves a link's name, not what it names, and takes one name of
    /// several from the file's inode.
    private static func checkRenamable(_ path: String) throws(DownloadError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw .io(IOError("stat", path)) }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw .usage("\(path) is not a regular file: repair the file it names")
        }
        guard info.st_nlink == 1 else {
            throw .usage("\(path) has \(info.st_nlink) hard links, which a repair would split: repair a copy of it")
        }
    }

    /// Makes the bytes of the file at `path` durable.
    private static func synchronize(_ path: String, calls: SystemCalls) throws(IOError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw IOError("open", path) }
        defer { close(descriptor) }
        guard retryingOnInterrupt({ calls.fsync(descriptor) }) == 0 else { throw IOError("sync", path) }
    }
}
