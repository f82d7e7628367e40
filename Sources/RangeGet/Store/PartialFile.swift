import Synchronization
import SystemSupport

// PartialFile: a download's `.part` file and its manifest, from the claim to
// the commit. It claims the data file (a new one created and marked as
// rangeget's, or an earlier run's, locked), decides what an earlier run left
// is worth (resume it, or start over and say why), gives a new plan its
// manifest and its space, and at the end verifies the data, makes it
// durable and moves it to its final name (PartialFile+Commit.swift).
// Download drives it; the engine writes into `file` and checkpoints
// `manifest` at `files.manifest`. It makes no network request: where a
// resume must compare bytes on disk with a server's, it picks the samples
// and its caller hands it the comparison (`SampleComparison`, the spot
// check's fetch in Probe/SpotCheck.swift).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class PartialFile {
    /// The final name.
    let output: String
    let files: PartialFiles
    let file: OutputFile
    /// What is done and durable; nil until a plan needs one (a file fetched
    /// whole by its first response never gets one) or after a discard.
    private(set) var manifest: Manifest?
    /// (Also read by the commit, in PartialFile+Commit.swift.)
    let options: DownloadOptions

    private init(output: String, file: OutputFile, options: DownloadOptions) {
        self.output = output
        files = PartialFiles(output: output)
        self.file = file
        self.options = options
    }

    /// Claims the data file of a download of `remote` to `output`: creates
    /// it, or takes an earlier run's (any other `.part` too when
    /// `replacingOthers`); its mark holds the remote's validators.
    /// `unnamed`: the caller has the whole file in memory, and found nothing
    /// beside `output`: the data file gets no name until it is committed
    /// (`OutputFile.unnamed`), so it costs no `.part` created, marked and
    /// renamed, and a kill meanwhile leaves nothing (those bytes are fetched
    /// again). Where the file system has no unnamed files (NFS), an
    /// `OUTPUT.part.new` (`OutputFile.temporary`), whose name marks it.
    static func claim(
        output: String, remote: RemoteFile, replacingOthers: Bool, unnamed: Bool = false,
        options: DownloadOptions
    ) throws(DownloadError) -> PartialFile {
        let files = PartialFiles(output: output)
        do {
            if unnamed {
                if let file = OutputFile.unnamed(
                    in: StateFile.directory(of: output), naming: output,
                    calls: options.systemCalls, learned: options.syncGroup?.refusals)
                {
                    return PartialFile(output: output, file: file, options: options)
                }
                return PartialFile(
                    output: output, file: try OutputFile.temporary(files, calls: options.systemCalls),
                    options: options)
            }
            let file = try OutputFile.claim(
                files, replacingOthers: replacingOthers,
                mark: FileOrigin(url: nil, etag: remote.etag, lastModified: remote.lastModified).partMark(
                    path: files.data),
                calls: options.systemCalls)
            return PartialFile(output: output, file: file, options: options)
        } catch {
            switch error {
            case .busy: throw .busy("another rangeget is downloading to \(unnamed ? files.new : files.data)")
            case let .notOurs(problem):
                throw .usage("\(files.data) \(problem) (move it away to keep it)", remedy: .restart)
            case let .io(error): throw .io(error)
            }
        }
    }

    // MARK: - Before the transfers

    /// True when a manifest or a data file lies beside `output`: a partial
    /// download to resume (or a file of another program's, to refuse).
    static func exists(beside output: String) -> Bool {
        let files = PartialFiles(output: output)
        var info = stat()
        return lstat(files.manifest, &info) == 0 || lstat(files.data, &info) == 0
    }

    /// The file of `url` as the manifest beside `output` describes it, when
    /// that manifest records `url` and holds a validator `If-Range` can carry
    /// (a strong ETag, else Last-Modified when there is no ETag): the resume
    /// then sends its first ranged requests at once, each with `If-Range`,
    /// instead of probing first, and a changed file is still caught (its
    /// server answers 200, with the new validator).
    static func resumable(url: String, beside output: String) -> RemoteFile? {
        guard let stored = try? Manifest.load(from: PartialFiles(output: output).manifest),
            stored.knownURLs.contains(OutgoingText.withoutUserinfo(url))
        else { return nil }
        let remote = RemoteFile(
            url: url, effectiveURL: url, size: stored.size, etag: stored.etag,
            lastModified: stored.lastModified, acceptsRanges: true, contentDisposition: nil)
        return remote.ifRange == nil ? nil : remote
    }

    /// Refuses to overwrite a finished file at `output` without `overwrite`,
    /// and fails early on an unusable directory. True when a finished file is
    /// there already (and `overwrite` is off): the download then only checks
    /// that it is still the server's. `knownAbsent`: nothing is there (a
    /// list's SharedDirectory says so), only the directory is checked.
    static func checkOutput(_ output: String, overwrite: Bool, knownAbsent: Bool = false) throws(DownloadError) -> Bool
    {
        var info = stat()
        var exists = false
        if !knownAbsent, lstat(output, &info) == 0 {
            if (info.st_mode & S_IFMT) == S_IFDIR { throw .usage("\(output) is a directory") }
            if !overwrite {
                guard (info.st_mode & S_IFMT) == S_IFREG else {
                    throw .usage("\(output) already exists and is not a regular file", remedy: .overwrite)
                }
                exists = true
            }
        }
        let folder = StateFile.directory(of: output)
        if usableFolders.withLock({ $0.contains(folder) }) { return exists }
        var folderInfo = stat()
        // A missing directory is created with its parents, as the command
        // line's `-d` and `-o` (and `mkdir -p`, aria2c, wget) do.
        if stat(folder, &folderInfo) != 0, errno == ENOENT {
            if let failure = Directories.make(folder) {
                throw .usage("\(folder) does not exist and cannot be created: \(failure)")
            }
        }
        guard stat(folder, &folderInfo) == 0, (folderInfo.st_mode & S_IFMT) == S_IFDIR else {
            throw .usage("\(folder) is not a directory")
        }
        guard access(folder, W_OK) == 0 else {
            throw .usage("cannot write to directory \(folder): \(String(cString: strerror(errno)))")
        }
        usableFolders.withLock { _ = $0.insert(folder) }
        return exists
    }

    /// The folders `checkOutput` found usable in this process: checked once,
    /// not once per file of a list. (One that stops being usable later fails
    /// the file's create instead, with the file system's own error.)
    private static let usableFolders = Mutex<Set<String>>([])

    /// Takes up what an earlier run left, for the file `sources` serve now:
    /// its manifest when it still describes that file, else (or with
    /// `restart`) nothing, the data file emptied. `nothingBeside`: no
    /// manifest or data file was there just before this claim created the
    /// data file, so no manifest is looked for (a list's new files);
    /// `listedClear`: nor a journal, by the list's directory read
    /// (`SharedDirectory`), so none is removed either. `compare` fetches
    /// the samples of a spot check (a resume without validators, a URL the
    /// manifest does not record).
    func resume(
        from sources: [RemoteFile], restart: Bool, nothingBeside: Bool = false, listedClear: Bool = false,
        compare: SampleComparison, onEvent: @Sendable (DownloadEvent) -> Void
    ) throws(DownloadError) {
        // An unnamed or temporary file is new, and nothing was beside its name.
        if file.hasNoName || file.isTemporary { return }
        if restart {
            try discard()
            return
        }
        let loaded: Manifest?
        do {
            loaded = nothingBeside && file.isNew ? nil : try Manifest.load(from: files.manifest)
        } catch {
            throw .manifest(error)
        }
        guard var stored = loaded else {
            // Rangeget's own data file without a manifest (a single stream):
            // empty it, and drop any journal a lost manifest left behind (a
            // file just created is empty already, and no manifest is there).
            if file.isNew {
                if listedClear { return }
                do { try StateFile.remove(files.journal, calls: options.systemCalls) } catch { throw .io(error) }
            } else {
                try discard()
            }
            return
        }
        // The manifest belongs to the file, not to one URL: a URL it records
        // is compared as usual; any other must prove it serves the same file.
        let known = stored.knownURLs
        guard let remote = sources.first(where: { known.contains(OutgoingText.withoutUserinfo($0.url)) }) else {
            try checkSameFile(stored, served: sources[0], compare: compare)
            stored.record(sources.map(\.url))
            onEvent(.reusing(bytesDone: stored.done.byteCount))
            manifest = stored
            return
        }
        stored.record(sources.map(\.url))
        // Another size starts over even under the same ETag: the server lied
        // in one of its answers, the manifest's plan cannot describe the file
        // it serves now, and refusing (as rangeget did) left nothing to run
        // but --restart.
        var reason = stored.mismatch(with: remote).map { "the remote file changed since the last run: \($0)" }
        if reason == nil, !remote.acceptsRanges { reason = "the server does not serve the byte ranges a resume needs" }
        if reason == nil, file.currentSize() < (stored.done.ranges.last?.end ?? 0) {
            reason = "\(file.path) is shorter than its manifest says"
        }
        if reason == nil, stored.etag == nil, stored.lastModified == nil, !stored.isProven(by: options.pieces),
            let differing = try spotCheck(stored, against: remote, compare: compare)
        {
            // Nothing to send as If-Range: a few stored bytes were compared with the server's.
            reason =
                "the remote file changed since the last run: its bytes \(differing) differ from the partial "
                + "download (the server sends no ETag or Last-Modified to tell)"
        }
        if let reason {
            onEvent(.restarting(reason: reason + "; starting over"))
            try discard()
            return
        }
        onEvent(.reusing(bytesDone: stored.done.byteCount))
        manifest = stored
    }

    /// Reads the manifest again (the engine checkpointed it), to go on with other sources.
    func reload() throws(DownloadError) {
        do {
            manifest = try Manifest.load(from: files.manifest)
        } catch {
            throw .manifest(error)
        }
    }

    /// Accepts a URL the manifest does not record as a source of its file
    /// only when it serves that file: the same size and strong ETag, or (with
    /// no strong ETag on either side) the same bytes at a few random places
    /// of those on disk. Anything else is someone else's file: refused (exit
    /// 4), never spliced, and the partial download is kept for its own URLs.
    private func checkSameFile(
        _ stored: Manifest, served remote: RemoteFile,
        compare: SampleComparison
    ) throws(DownloadError) {
        let known = stored.knownURLs.joined(separator: ", ")
        func refuse(_ why: String) -> DownloadError {
            .manifest(
                ManifestError(
                    path: files.manifest,
                    problem: "was started from \(known), and "
                        + "\(OutgoingText.withoutUserinfo(remote.url)) \(why) (one of those URLs resumes it)"))
        }
        guard remote.size == stored.size else {
            throw refuse(
                "serves \(remote.size.map { "\($0) bytes" } ?? "a file of unknown length"), not \(stored.size)")
        }
        let storedTag = stored.etag.flatMap { $0.hasPrefix("W/") ? nil : $0 }
        if let storedTag, let theirs = remote.strongETag {
            guard storedTag == theirs else { throw refuse("serves ETag \(theirs), not \(storedTag)") }
            return
        }
        // Bytes that matched their published piece digests are the file's,
        // whoever serves it: nothing to compare.
        if stored.isProven(by: options.pieces) { return }
        if let differing = try spotCheck(stored, against: remote, compare: compare) {
            throw refuse("serves other bytes at \(differing)")
        }
    }

    /// Compares the bytes of `file` at `samples` with those a `size`-byte
    /// file at `url` serves there: the first sample that differs, or nil.
    /// The request headers were given for `origin`. The caller's fetch
    /// (`SpotCheck.firstDifference`).
    typealias SampleComparison = (
        _ file: OutputFile, _ url: String, _ origin: String, _ size: Int64,
        _ samples: [ByteRange]
    ) throws(DownloadError) -> ByteRange?

    /// Compares a few random samples of the bytes `stored` lists as done with
    /// what `remote` serves there (by `compare`); the first range that differs, if any.
    private func spotCheck(
        _ stored: Manifest, against remote: RemoteFile,
        compare: SampleComparison
    ) throws(DownloadError) -> ByteRange? {
        var random = SystemRandomNumberGenerator()
        let samples = SpotCheck.samples(
            of: stored.done, count: SpotCheck.sampleCount, length: SpotCheck.sampleLength,
            using: &random)
        return try compare(file, remote.effectiveURL, remote.url, stored.size, samples)
    }

    /// Gives a new plan for `remote`, a `size`-byte file fetched from
    /// `sources`, its space (the whole file, reserved; for a `plain` stream,
    /// a check that it fits) and its manifest, which lists nothing done yet.
    func prepare(for remote: RemoteFile, size: Int64, plain: Bool, sources: [RemoteFile]) throws(DownloadError) {
        do {
            // A size the server chose must fit before a byte is written.
            if plain { try file.checkFreeSpace(for: size) } else { try file.preallocate(size: size) }
        } catch {
            // The data file is empty here: nothing of it is worth keeping.
            file.unmark(keeping: nil)
            for path in [files.data, files.manifest] { try? StateFile.remove(path, calls: options.systemCalls) }
            throw .io(error)
        }
        // A single stream of known length keeps a manifest too: the bytes
        // from 0 it has, which a later run resumes if the server then
        // serves ranges (and starts over, saying why, if it still does not).
        var fresh = Manifest(remote: remote, size: size)
        fresh.record(sources.map(\.url))
        if plain { fresh.singleStream = true }
        do {
            // Not fsynced: it lists nothing done yet, and a manifest lost
            // to a power cut only means the empty .part is started afresh.
            try fresh.save(to: files.manifest, calls: options.systemCalls, durable: false)
        } catch {
            throw .io(error)
        }
        manifest = fresh
    }

    /// Removes the write journal (first: its bytes must never be added to a
    /// new manifest) and the manifest, then empties the data file: a manifest
    /// never outlives the bytes it lists.
    func discard() throws(DownloadError) {
        do {
            try StateFile.remove(files.journal, calls: options.systemCalls)
            try StateFile.remove(files.manifest, calls: options.systemCalls)
            try file.truncate(to: 0)
        } catch {
            throw .io(error)
        }
        manifest = nil
    }

    /// Removes the `.part` file at `partPath`, its manifest, journal and
    /// mark, unless another download holds the lock on it (then it is theirs
    /// to keep) or it is not rangeget's (a link, another program's file).
    static func discard(at partPath: String, calls: SystemCalls) throws(DownloadError) {
        let files = PartialFiles(data: partPath)
        let file: OutputFile
        do {
            file = try OutputFile(existing: partPath, calls: calls)
            guard try file.lockExclusively(), file.ownershipProblem(manifest: files.manifest) == nil else { return }
        } catch {
            if error.code == ENOENT || error.code == ELOOP { return }
            throw .io(error)
        }
        do {
            file.unmark(keeping: nil)
            for path in [files.journal, partPath, files.manifest] { try StateFile.remove(path, calls: calls) }
        } catch {
            throw .io(error)
        }
    }
}
