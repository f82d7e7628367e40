// Checking a file on disk against the hashes its publisher gave (a
// Metalink's pieces and whole-file hash, a --checksum), and repairing it: a
// copy of it becomes a partial download whose good pieces are done and
// verified, and an ordinary download from the mirrors fetches the bad
// pieces into it and renames it over the file. The file keeps its name and
// its bytes until the repaired copy replaces it whole; a repair killed
// midway leaves a `.part` that the same command, or a download, resumes.
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
    /// behind a `.part` renamed over the file once every piece matches.
    ///
    /// Returns what the check found, and the download's result when pieces
    /// were fetched (nil when the file was intact). Throws
    /// ``DownloadError/usage(_:remedy:)`` without piece hashes (a whole-file
    /// checksum cannot tell which part is bad) or when a partial download of
    /// the file is in the way.
    public static func repair(
        _ path: String, mirrors: [String], options: DownloadOptions
    ) async throws(DownloadError) -> (found: FileVerification, repaired: DownloadResult?) {
        guard let pieces = options.pieces else {
            throw .usage(
                "a repair needs piece hashes (a Metalink's): a whole-file checksum cannot tell which part is bad")
        }
        let found = try verify(path, pieces: pieces, checksum: options.checksum)
        guard !found.isIntact else { return (found, nil) }
        guard !mirrors.isEmpty else { throw .usage("no URL to fetch the bad pieces from") }
        try prepareRepair(of: path, found: found, pieces: pieces, options: options)
        var repairing = options
        repairing.overwrite = true
        let download = Download(mirrors: mirrors, destination: .file(path), options: repairing)
        return (found, try await download.run())
    }

    /// Makes `path`'s `.part`: a copy of the file whose good pieces are
    /// listed done and verified in its manifest (synced first), under no
    /// URL's validators, so the download resuming it compares sampled
    /// bytes with the server before it trusts them.
    private static func prepareRepair(
        of path: String, found: FileVerification, pieces: PieceHashes, options: DownloadOptions
    ) throws(DownloadError) {
        let files = PartialFiles(output: path)
        guard access(files.data, F_OK) != 0, access(files.manifest, F_OK) != 0 else {
            throw .usage("\(files.data) is there already: resume that download, or remove it, before a repair")
        }
        var good = RangeSet([ByteRange(0, found.size)])
        for index in found.badPieces { good.remove(pieces.range(ofPiece: index, size: found.size)) }
        let origin = RemoteFile(
            url: "file://" + path, effectiveURL: "file://" + path, size: found.size, acceptsRanges: true)
        let part = try PartialFile.claim(output: path, remote: origin, replacingOthers: false, options: options)
        try part.prepare(for: origin, size: found.size, plain: false, sources: [origin])
        var manifest = part.manifest!
        do {
            try copy(good, from: path, to: part.file)
            try part.file.synchronize()
            manifest.done = good
            manifest.verified = good
            manifest.pieceList = pieces.fingerprint
            try manifest.save(to: files.manifest, calls: options.systemCalls, durable: true)
        } catch {
            throw .io(error)
        }
    }

    /// Copies `ranges` of the file at `source` into `file` at the same offsets.
    private static func copy(_ ranges: RangeSet, from source: String, to file: OutputFile) throws(IOError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw IOError("open", source) }
        defer { close(input) }
        let block = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: block, alignment: 4096)
        defer { buffer.deallocate() }
        for range in ranges.ranges {
            var offset = range.start
            while offset < range.end {
                let count = Int(min(Int64(block), range.end - offset))
                let got = retryingOnInterrupt { pread(input, buffer, count, off_t(offset)) }
                guard got > 0 else { throw IOError("read", source) }
                try file.write(buffer, count: got, at: offset)
                offset += Int64(got)
            }
        }
    }
}
