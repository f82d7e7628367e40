import SystemSupport

// PartialFile+Commit: after the transfers, the data verified (length,
// checksum), the validators recorded, and the commit that makes it durable
// and gives it its final name; or, where it cannot have that name, the data
// kept as a complete `.part` with its manifest.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension PartialFile {
    /// Verifies the length (and checksum), makes the data durable and moves
    /// it to `output`: never over a file that appeared there since the
    /// start, unless `overwrite`; then the data stays, recorded as complete.
    func commit(size: Int64, remote: RemoteFile, onEvent: @Sendable (DownloadEvent) -> Void) throws(DownloadError) {
        let commit = try verify(size: size, remote: remote, onEvent: onEvent)
        do {
            if let group = options.syncGroup {
                try group.commit(commit, calls: options.systemCalls)
            } else {
                SyncGroup.run([commit], calls: options.systemCalls)
                if let failure = commit.failure { throw failure }
            }
        } catch {
            throw Self.downloadError(error)
        }
    }

    /// `commit`, handed to `group`: verifies here, then returns at once;
    /// `then` gets nil once the file is in place and durable, else why not,
    /// on the thread that commits it.
    func commit(
        size: Int64, remote: RemoteFile, in group: SyncGroup, onEvent: @Sendable (DownloadEvent) -> Void,
        then: @escaping @Sendable (DownloadError?) -> Void
    ) throws(DownloadError) {
        let commit = try verify(size: size, remote: remote, onEvent: onEvent)
        group.submit(commit, calls: options.systemCalls) { failure in then(failure.map(Self.downloadError)) }
    }

    /// Removes each of `paths`, all of them even when one fails (the
    /// manifest, say, after the journal): throws the first failure.
    private static func remove(_ paths: [String], calls: SystemCalls) throws(IOError) {
        var failure: IOError?
        for path in paths {
            do { try StateFile.remove(path, calls: calls) } catch { failure = failure ?? error }
        }
        if let failure { throw failure }
    }

    /// What a commit's step threw, as the download's error.
    private static func downloadError(_ error: any Error) -> DownloadError {
        if let error = error as? IOError { return .io(error) }
        return error as! DownloadError
    }

    /// The steps before the commit: the length, the checksum, the validators
    /// recorded on the file; returns the commit that publishes it.
    private func verify(
        size: Int64, remote: RemoteFile,
        onEvent: @Sendable (DownloadEvent) -> Void
    ) throws(DownloadError) -> SyncGroup.Commit {
        do {
            var actual = file.currentSize()
            if actual > size {
                try file.truncate(to: size)
                actual = file.currentSize()
            }
            guard actual == size else {
                throw DownloadError.verification("\(files.data) has \(actual) bytes, expected \(size)")
            }
            let origin = FileOrigin(
                url: options.recordOriginURL ? OutgoingText.withoutUserinfo(remote.url) : nil, etag: remote.etag,
                lastModified: remote.lastModified)
            let expected: (checksum: Checksum, publishedIn: String?)?
            do {
                expected = try options.expectedChecksum(savingAs: output, data: files.data, remote: remote)
            } catch {
                // Kept as complete: a later run with a list that has the entry only verifies it.
                try keepUnnamed(origin)
                try keepAsComplete(remote: remote, size: size)
                throw error
            }
            if let (checksum, publishedIn) = expected {
                let actual = try Checksum.digest(of: file, algorithm: checksum.algorithm)
                guard actual == checksum.hex else {
                    let source = publishedIn.map { " (the server's \(Self.fieldName($0)) header)" } ?? ""
                    let problem = "\(checksum.algorithm.rawValue) is \(actual), expected \(checksum.hex)\(source)"
                    // Complete, but not what was expected: `status` says so, and
                    // a rerun checks again without fetching a byte.
                    try keepUnnamed(origin)
                    try keepAsComplete(remote: remote, size: size, problem: problem)
                    throw DownloadError.verification(
                        "\(checksum.algorithm.rawValue) of the download is \(actual), expected \(checksum.hex)\(source); "
                            + "the data stays in \(files.data)", remedy: .restart)
                }
            }
            // An unnamed or temporary file has no mark: its record is written
            // once, once it has its name (one attribute write per file, as
            // for a marked one: a second cost a fifth of a 20,000-file list).
            let unnamed = file.hasNoName
            let unmarked = unnamed || file.isTemporary
            let attributes = try origin.record(on: file) && (!unmarked || file.keepsAttributes)
            if !attributes || file.isMarkedBeside {
                onEvent(
                    .notice(
                        "the file system of \(output) keeps no extended attributes: a later run cannot tell "
                            + "the file is unchanged, and needs a checksum to take it as complete"))
            }
            // Once the data is durable: the final name, then the directory
            // made durable. A sync that fails takes the journal with it, as a
            // checkpoint's does: else a rerun in this boot would trust it,
            // fetch nothing, and (its own fdatasync finding no error to
            // report) publish pages the kernel may have dropped.
            return SyncGroup.Commit(
                file: file, directory: StateFile.directory(of: output),
                unsynced: { [files, options] in
                    WriteJournal.discard(at: files.journal, calls: options.systemCalls)
                },
                publish: { [self] in
                    // Without a manifest there is no journal either (the engine keeps one only beside a manifest).
                    let stateFiles = manifest == nil ? [] : [files.journal, files.manifest]
                    do {
                        // The record is written once the file has its name: its
                        // stamp holds the change time that the link or rename set.
                        let record = { [file] () throws(IOError) in
                            _ = try file.recordValidators(origin.validators(stamping: file.descriptor))
                        }
                        if unnamed {
                            try file.link(to: output)
                            do {
                                try record()
                            } catch {
                                // The name is this run's own (a link never replaces a file): it goes with the failure.
                                _ = retryingOnInterrupt { options.systemCalls.unlink(output) }
                                throw error
                            }
                            try Self.remove(stateFiles, calls: options.systemCalls)
                        } else {
                            // While the file is still open and locked: the mark
                            // becomes the finished file's validators, and the
                            // manifest and journal go.
                            try file.move(
                                to: output, replacing: options.overwrite,
                                learned: options.syncGroup?.refusals
                            ) { () throws(IOError) in
                                // (Best effort, the file being in place: without it a rerun asks for a checksum.)
                                if unmarked {
                                    try? record()
                                } else {
                                    file.unmark(keeping: origin.validators(stamping: file.descriptor))
                                }
                                try Self.remove(stateFiles, calls: options.systemCalls)
                            }
                        }
                    } catch let error as IOError where error.code == EEXIST {
                        // A file fetched whole whose name another run (of the
                        // same file) gave it meanwhile, with the same bytes: saved.
                        if unmarked, file.isSaved(as: output, size: size) {
                            if file.isTemporary { try StateFile.remove(files.new, calls: options.systemCalls) }
                            return
                        }
                        try keepUnnamed(origin)
                        try keepAsComplete(remote: remote, size: size)
                        throw DownloadError.usage(
                            "\(output) appeared during the download (the data stays in \(files.data))",
                            remedy: .overwrite)
                    }
                })
        } catch {
            throw Self.downloadError(error)
        }
    }

    /// Gives an unnamed or temporary file its `.part` name, marked and
    /// durable, where the data is to stay (a checksum that failed or has no
    /// entry, a final name taken meanwhile): the messages say it is there,
    /// and `keepAsComplete` saves its manifest next (whose directory sync
    /// makes the name durable). The mark attribute goes on before the link,
    /// so the name never shows an unmarked file; a mark file, where there
    /// are no attributes, after it (a link never replaces another run's
    /// `.part`, but a mark file would replace its mark), the file's
    /// `.part.new` name marking it meanwhile, and going last.
    private func keepUnnamed(_ origin: FileOrigin) throws(IOError) {
        guard file.hasNoName || file.isTemporary else { return }
        let marked = try file.recordValidators(origin.partMark(path: files.data))
        // Without the attribute, the `.part.new` name marks the file until
        // its mark file is written: an unnamed file gets that name first,
        // locked as a temporary file is (another run finds it busy rather
        // than a leftover to clear), where the name is free (else it is
        // linked as its `.part` alone).
        let twinned =
            file.isTemporary
            || (!marked && (try? file.lockExclusively()) == true && (try? file.link(to: files.new)) != nil)
        if file.isTemporary {
            // By name: linking an open file by its descriptor wants /proc (or a capability).
            guard retryingOnInterrupt({ options.systemCalls.link(files.new, files.data) }) == 0 else {
                throw IOError("save", files.data)
            }
        } else {
            do {
                try file.link(to: files.data)
            } catch {
                if twinned { try? StateFile.remove(files.new, calls: options.systemCalls) }
                throw error
            }
        }
        if !marked {
            do {
                try file.markBeside(dataPath: files.data)
            } catch {
                // The `.part.new` name stays as the mark: the next run's
                // claim of the `.part` takes it, as rangeget's. (Only a
                // temporary file's deinit would remove it.)
                if file.isTemporary { file.keepName() }
                throw error
            }
        }
        try file.synchronizeWithInode()
        if twinned { try StateFile.remove(files.new, calls: options.systemCalls) }
    }

    /// Saves the manifest as complete, durably (a new one for a file fetched
    /// in one response: `status` and the next run need one now), once the
    /// data is durable: the manifest never runs ahead of the disk. When the
    /// data cannot be made durable the manifest stays as it was, and the
    /// journal goes (as at a failed commit), so a later run fetches again
    /// what was not durable.
    private func keepAsComplete(remote: RemoteFile, size: Int64, problem: String? = nil) throws(IOError) {
        do {
            try file.synchronize()
        } catch {
            WriteJournal.discard(at: files.journal, calls: options.systemCalls)
            throw error
        }
        var complete = manifest ?? Manifest(remote: remote, size: size)
        if manifest == nil { complete.record([remote.url]) }
        complete.done = RangeSet([ByteRange(0, size)])
        complete.problem = problem
        try complete.save(to: files.manifest, calls: options.systemCalls)
    }

    /// A header field's name as servers write it (`repr-digest`: `Repr-Digest`).
    static func fieldName(_ lowercased: String) -> String {
        lowercased.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: "-")
    }
}
