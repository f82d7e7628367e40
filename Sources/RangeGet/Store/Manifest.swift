// Manifest: the resume state beside the data file, `OUTPUT.part.json`.
// It lists only bytes that were durable (fdatasync'ed) when it was written,
// and it is replaced atomically: temp file, fsync, rename, fsync directory.
// Bytes written since, in this boot, are in the write journal (WriteJournal),
// which `load` adds.
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a partial download has finished, and of which remote file.
package struct Manifest: Codable, Equatable, Sendable {
    /// The format written by this version.
    package static let currentVersion = 1

    /// The format version; a newer one is refused rather than misread.
    package var version: Int
    /// The URL the download was started from, without userinfo (no passwords on disk).
    package var url: String
    /// Every other URL that served bytes of this file (mirrors, or URLs a
    /// later run resumed it from), without userinfo; nil when there is none.
    package var urls: [String]?
    /// The remote file's complete length.
    package var size: Int64
    /// The entity tag (strong or weak) the bytes were validated against.
    package var etag: String?
    /// The `Last-Modified` value the bytes were validated against.
    package var lastModified: String?
    /// Durable byte ranges, as `[start, end)` pairs.
    package var done: RangeSet
    /// Why complete data was not given its final name (a checksum that does
    /// not match); nil for a download in progress.
    package var problem: String?
    /// True when the bytes come from one plain stream (the server served no
    /// byte ranges): a later run resumes them only if the server serves
    /// ranges by then, and otherwise starts over. Nil for a ranged download.
    package var singleStream: Bool?
    /// The pieces of `done` whose digests were checked and matched
    /// (`PieceHashes`), as byte ranges; nil when none were checked. A resume
    /// hashes again only the done pieces outside it.
    package var verified: RangeSet?
    /// Which piece digests `verified` was checked against (`PieceHashes.fingerprint`):
    /// a resume with other digests checks every piece again.
    package var pieceList: String?

    /// A manifest with nothing done yet for `remote`.
    package init(remote: RemoteFile, size: Int64) {
        version = Self.currentVersion
        url = OutgoingText.withoutUserinfo(remote.url)
        self.size = size
        etag = remote.etag
        lastModified = remote.lastModified
        done = RangeSet()
    }

    /// True when every done byte is in a piece verified against `pieces`.
    package func isProven(by pieces: PieceHashes?) -> Bool {
        guard let pieces, pieceList == pieces.fingerprint, let verified else { return false }
        return done.subtracting(verified).isEmpty
    }

    /// Every URL known to serve this file: `url`, then `urls`.
    package var knownURLs: [String] { [url] + (urls ?? []) }

    /// Records `urls` (redacted) as serving this file too.
    package mutating func record(_ urls: [String]) {
        var known = knownURLs
        for url in urls.map(OutgoingText.withoutUserinfo) where !known.contains(url) { known.append(url) }
        self.urls = known.count > 1 ? Array(known.dropFirst()) : nil
    }

    /// Why `remote` is not the file these bytes came from, or nil when it is.
    package func mismatch(with remote: RemoteFile) -> String? {
        if remote.size != size {
            return "its size changed from \(size) to \(remote.size.map(String.init) ?? "unknown") bytes"
        }
        if etag != remote.etag {
            return "its ETag changed from \(etag ?? "none") to \(remote.etag ?? "none")"
        }
        if let lastModified, let now = remote.lastModified, now != lastModified {
            return "its Last-Modified changed from \(lastModified) to \(now)"
        }
        return nil
    }

    /// Reads the manifest at `path`; nil when there is none. Its `done` also
    /// holds the bytes the write journal beside it (`OUTPUT.part.journal` for
    /// `OUTPUT.part.json`) lists, when they were written in this boot to the
    /// data file there now: a killed process loses nothing the kernel has.
    /// A symbolic link or a file with other hard links is never read.
    package static func load(from path: String) throws(ManifestError) -> Manifest? {
        let contents: Data?
        do {
            contents = try StateFile.read(path)
        } catch {
            throw ManifestError(path: path, problem: error.problem)
        }
        guard let data = contents else { return nil }
        if data.isEmpty { throw ManifestError(path: path, problem: "is empty") }
        if data.allSatisfy({ $0 == 0 }) { throw ManifestError(path: path, problem: "holds only zero bytes") }
        struct Header: Decodable { var version: Int }
        guard let header = try? JSONDecoder().decode(Header.self, from: data) else {
            throw ManifestError(path: path, problem: "is not a valid manifest (damaged or truncated JSON)")
        }
        guard header.version == currentVersion else {
            throw ManifestError(
                path: path, problem: "has format version \(header.version), this rangeget reads \(currentVersion)")
        }
        let manifest: Manifest
        do {
            manifest = try JSONDecoder().decode(Manifest.self, from: data)
        } catch {
            throw ManifestError(path: path, problem: "is not a valid manifest (\(error.shortDescription))")
        }
        guard manifest.size >= 0, manifest.done.fits(size: manifest.size) else {
            throw ManifestError(path: path, problem: "lists bytes beyond the file's size")
        }
        guard let files = PartialFiles(manifest: path) else { return manifest }
        var usable = manifest
        usable.done = manifest.done.union(
            JournalFile.written(at: files.journal, dataPath: files.data, size: manifest.size))
        return usable
    }

    /// Replaces the manifest at `path` atomically, mode 0600; `durable` also
    /// fsyncs it and its directory.
    package func save(to path: String, calls: SystemCalls = .live, durable: Bool = true) throws(IOError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(self) } catch { throw IOError("encode", path, code: EINVAL) }
        try StateFile.replace(path, with: data, durable: durable, calls: calls)
    }
}

/// A manifest that exists but cannot be used; what gets past it is
/// `DownloadOptions.restart` (`DownloadError.manifest` says so).
public struct ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The manifest's path.
    public let path: String
    /// What is wrong with it, as the end of a sentence.
    public let problem: String

    /// "manifest PATH PROBLEM".
    public var description: String { "manifest \(path) \(problem)" }
}

extension Error {
    /// A one-line description of a decoding error without the coding-path noise.
    var shortDescription: String {
        if let decoding = self as? DecodingError {
            switch decoding {
            case .dataCorrupted(let context), .typeMismatch(_, let context), .valueNotFound(_, let context):
                return context.debugDescription
            case .keyNotFound(let key, _):
                return "missing field \(key.stringValue)"
            @unknown default:
                return "\(decoding)"
            }
        }
        return "\(self)"
    }
}

extension Manifest {
    /// True when the file at `dataFile` is a partial download rangeget made
    /// (it carries rangeget's mark), with or without a manifest beside it.
    package static func isPartialDownload(dataFile: String) -> Bool {
        (try? OutputFile(existing: dataFile, calls: .live))?.isMarked ?? false
    }
}
