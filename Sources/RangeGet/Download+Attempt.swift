import SystemSupport

// One attempt of a download to a file: probe (or trust the manifest of a
// resume), claim the `.part` (PartialFile), run the engine, and carry out
// what OutcomePolicy decides after each run, until the file is in place, the
// download fails, or a pause or cancel stops it. A download read in order
// takes the same steps in Download+Stream.swift.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Download {
    /// One attempt: probe, then transfer until the file is complete, the
    /// download fails or a pause or cancel stops it (`.interrupted`).
    /// `tally` carries the figures of earlier attempts and gains this one's.
    /// Nil: the verified file's commit was handed off (`runHandingOffCommit`),
    /// and the committer ends the download.
    func attempt(
        tally: inout Tally, onEvent: @escaping @Sendable (DownloadEvent) -> Void
    ) async throws(DownloadError) -> DownloadResult? {
        if let problem = options.problem { throw .usage(problem) }
        if let window { return try await stream(into: window, tally: &tally, onEvent: onEvent) }
        if !options.urlsChecked { for mirror in mirrors { try RemoteURL.check(mirror) } }
        let started = MonotonicClock.now()
        defer { tally.seconds += MonotonicClock.now() - started }
        tally.attempts += 1
        // A restart discards what was there before this download, not what its own earlier attempts fetched.
        let restart = options.restart && tally.attempts == 1
        // Where the file goes unless Content-Disposition names it, and whether
        // the list's directory had nothing of it as the run began
        // (SharedDirectory): then the opening request goes out at once.
        let guessed = outputPath(url: url, contentDisposition: nil)
        let fresh = options.sharedDirectory?.take(guessed) ?? false
        // An output that exists already: done when it is still the server's file.
        var existing = false
        if case let .file(path) = destination {
            existing = try PartialFile.checkOutput(path, overwrite: options.overwrite, knownAbsent: fresh)
        }
        let loop = try transferLoop()
        let prober = Prober(options: options.transfer, loop: loop)
        defer { tally.tcpConnections += prober.connectionsOpened.total }
        var sources: [RemoteFile]
        var probeReports: [MirrorReport]
        var opening: Opening?
        // True while the file is known only from the manifest (a resume that sent no probe).
        var unprobed = false
        // Whether a partial download is there.
        let partial = !fresh && PartialFile.exists(beside: guessed)
        // With several mirrors the others must be probed to be compared; `probeWithHead` asks for a probe.
        if !restart, partial, mirrors.count == 1, !options.probeWithHead,
            let known = PartialFile.resumable(url: url, beside: guessed)
        {
            (sources, probeReports, opening) = ([known], [MirrorReport(url: url, bytes: 0, seconds: 0, errors: 0)], nil)
            unprobed = true
        } else {
            // A partial download's first bytes are usually on disk already (the
            // opening request, from byte 0, would fetch them again), or another
            // run holds it and this one is about to be refused.
            // An output that exists is probed with HEAD: no byte of it is needed.
            let opens = !options.probeWithHead && !partial && !existing && (fresh || access(guessed, F_OK) != 0)
            (sources, probeReports, opening) = try await probeMirrors(
                prober, opening: opens ? loop : nil, onEvent: onEvent)
        }
        var remote = sources[0]
        onEvent(.probed(remote))
        // The options the bytes are checked by: the caller's, or what the
        // Metalink the response points to publishes (DescribedMetalink).
        let checked = await describedIntegrity(options, of: remote, onEvent: onEvent)
        try checkPublishedSize(of: remote, options: checked)
        // Named as guessed unless the server named it (choosing a name parses the URL).
        let output =
            remote.contentDisposition == nil && remote.url == url
            ? guessed : outputPath(url: remote.url, contentDisposition: remote.contentDisposition)
        // The snapshot vouches for a file the opening request brought whole
        // (a name taken meanwhile is caught at its link); a larger one is
        // looked up now, after its opening request.
        let vouched =
            opening?.heldBody != nil && (output == guessed ? fresh : options.sharedDirectory?.take(output) ?? false)
        if case .directory = destination {
            existing = try PartialFile.checkOutput(output, overwrite: options.overwrite, knownAbsent: vouched)
        } else if fresh, !vouched {
            existing = try PartialFile.checkOutput(output, overwrite: options.overwrite)
        }
        if existing {
            opening?.cancel()
            let result = try alreadyComplete(
                output, remote: remote, reports: probeReports,
                seconds: tally.seconds + MonotonicClock.now() - started,
                tcpConnections: tally.tcpConnections + prober.connectionsOpened.total)
            onEvent(.finished(result))
            return result
        }

        // A small file the opening request brought whole, with nothing beside
        // its name to take up: its data file gets a name only at the commit.
        let unnamed =
            opening?.heldBody != nil && !options.overwrite
            && (vouched || (output == guessed && !fresh ? !partial : !PartialFile.exists(beside: output)))
        let part = try PartialFile.claim(
            output: output, remote: remote, replacingOthers: restart, unnamed: unnamed,
            options: checked)
        controller.setPartPath(part.files.data)
        try part.resume(
            from: sources, restart: restart, nothingBeside: !partial && output == guessed,
            listedClear: fresh && output == guessed, compare: spotCheck, onEvent: onEvent)
        var policy = OutcomePolicy()
        while true {
            // Reused: what earlier runs left that is still there. A start-over
            // (here or in `resume`) discards it; bytes this download fetched
            // itself, in earlier attempts or runs of the engine, never count.
            let held = part.manifest?.done.byteCount ?? 0
            tally.reused = min(tally.reused ?? held, held)
            if controller.isStopRequested { throw .stopped }
            let fetchedBefore = tally.fetched
            let plain = !remote.acceptsRanges || remote.size == nil
            if plain { sources = [remote] }
            // A file of at most the minimum split that the opening request
            // fetches whole needs no plan: no manifest, no journal, no
            // preallocation. A run killed in the middle of it finds
            // rangeget's marked .part without a manifest, and starts it over.
            // A larger one (a list's opening may ask for the whole file) keeps
            // its plan, so a kill costs only what was not yet durable; one
            // kept in memory (at most 128 KiB, whatever `--min-split` says)
            // has nothing on disk before it is whole.
            let whole =
                !plain && part.manifest == nil && opening?.isUsable == true
                && opening?.served == remote.size.map { ByteRange(0, $0) }
                && ((remote.size ?? .max) <= options.minimumSplit || opening?.heldBody != nil)
            if part.manifest == nil, !whole, let size = remote.size {
                try part.prepare(for: remote, size: size, plain: plain, sources: sources)
            }
            let outcome: EngineOutcome
            if let held = opening, let body = held.heldBody {
                outcome = write(
                    held: body, from: held, of: remote, into: part.file, pieces: checked.pieces, tally: &tally,
                    onEvent: onEvent)
            } else {
                let engine = Engine(
                    mirrors: sources, sink: .file(part.file), manifest: part.manifest,
                    manifestPath: part.files.manifest,
                    settings: checked, plain: plain, loop: loop, opening: opening, unprobed: unprobed,
                    onEvent: onEvent)
                outcome = await run(engine, tally: &tally)
            }
            opening = nil
            let step = policy.next(
                after: outcome, url: url, mirrors: sources.map(\.url), unprobed: unprobed,
                progressed: tally.fetched > fetchedBefore)
            switch step {
            case let .finish(size):
                onEvent(.fetched(bytes: size))
                if controller.handsOffCommit, let group = options.syncGroup {
                    let (tally, probeReports, remote) = (tally, probeReports, remote)
                    try part.commit(size: size, remote: remote, in: group, onEvent: onEvent) { [self] failure in
                        let outcome =
                            failure.map(DownloadOutcome.failure)
                            ?? .success(
                                finished(
                                    path: output, size: size, remote: remote, tally: tally, since: started,
                                    probed: probeReports,
                                    prober: prober, onEvent: onEvent))
                        _ = end(outcome, discarding: nil)
                    }
                    return nil
                }
                try part.commit(size: size, remote: remote, onEvent: onEvent)
                return finished(
                    path: output, size: size, remote: remote, tally: tally, since: started, probed: probeReports,
                    prober: prober, onEvent: onEvent)
            case let .fail(error):
                throw error
            case .probe:
                unprobed = false
                (sources, probeReports, _) = try await probeMirrors(prober, onEvent: onEvent)
                remote = sources[0]
                try checkPublishedSize(of: remote, options: checked)
                try part.resume(from: sources, restart: false, compare: spotCheck, onEvent: onEvent)
            case let .startOver(reason):
                onEvent(.restarting(reason: "the remote file changed (\(reason)); starting over"))
                (sources, probeReports, _) = try await probeMirrors(prober, skipHead: true, onEvent: onEvent)
                remote = sources[0]
                try checkPublishedSize(of: remote, options: checked)
                try part.discard()
            case let .renew(index):
                // Go on from the manifest with the mirror's new URL.
                try await renew(&sources, index: index, prober: prober, onEvent: onEvent)
                if index == 0 { remote = sources[0] }
                try part.reload()
            case let .singleStream(reason):
                onEvent(.restarting(reason: "\(reason); downloading as one stream from the start"))
                remote.acceptsRanges = false
                try part.discard()
            }
        }
    }

    /// The loop to run the transfers on: the session's, else one of this download's own.
    func transferLoop() throws(DownloadError) -> TransferLoop {
        if let session { return try session.transferLoop() }
        do {
            return try TransferLoop(
                threaded: false, multiplex: options.transfer.multiplex,
                connections: options.automaticConnections
                    ? max(options.connections, options.maxPerHost) : options.connections)
        } catch {
            throw .network(url: url, message: "cannot set up libcurl: \(error.message)", failure: error.failure)
        }
    }

    /// Runs `engine` until it ends, stoppable through the controller, and adds its figures to `tally`.
    func run(_ engine: Engine, tally: inout Tally) async -> EngineOutcome {
        // The bytes each mirror served in earlier runs, and a resumed partial download's (the first mirror's).
        var served = tally.mirrors.mapValues(\.bytes)
        if let reused = tally.reused, reused > 0, let first = mirrors.first { served[first, default: 0] += reused }
        engine.credit(served: served)
        if controller.register(engine.stop) { engine.stop.request() }
        let outcome = await engine.run()
        _ = controller.register(nil)
        tally.fetched += engine.bytesFetched
        tally.retries += engine.retries
        tally.connectionsUsed = max(tally.connectionsUsed, engine.connectionsUsed)
        tally.connectionCount = engine.connectionCountReport
        tally.add(engine.mirrorReports)
        return outcome
    }

    /// Writes the whole small file the opening request kept in memory, on
    /// the calling thread and without an engine (nothing to plan, no
    /// connection to make: for a list of small files, an engine per file was
    /// a tenth of the CPU): the events and figures of the one transfer that
    /// fetched it, as an engine reports them.
    private func write(
        held body: [UInt8], from opening: Opening, of remote: RemoteFile, into file: OutputFile,
        pieces: PieceHashes?, tally: inout Tally, onEvent: (DownloadEvent) -> Void
    ) -> EngineOutcome {
        if controller.isStopRequested { return .stopped }
        // Pieces learned after the body came (a Metalink the response pointed to) are checked here.
        if let pieces, let bad = body.withUnsafeBytes({ pieces.badPieces(in: $0) }).first {
            return .failed(
                .verification(
                    "piece \(bad) of \(remote.url) does not match its published \(pieces.algorithm.rawValue) "
                        + "(the whole file came in one response)"))
        }
        let range = ByteRange(0, Int64(body.count))
        onEvent(.transfer(.pieceStarted(connection: 0, range: range, url: remote.url)))
        let failure = body.withUnsafeBytes { bytes -> IOError? in
            do throws(IOError) {
                _ = try file.accept(bytes.baseAddress!, count: bytes.count, at: 0)
                return nil
            } catch {
                return error
            }
        }
        if let failure { return .failed(.io(failure)) }
        onEvent(.transfer(.pieceFinished(connection: 0, written: range, complete: true)))
        onEvent(
            .progress(
                DownloadProgress(
                    bytesDone: range.count, totalBytes: remote.size, bytesPerSecond: 0,
                    activeConnections: 0, completed: RangeSet([range]))))
        tally.fetched += range.count
        tally.connectionsUsed = max(tally.connectionsUsed, 1)
        tally.add([
            MirrorReport(
                url: remote.url, bytes: range.count, seconds: opening.heldSeconds, errors: 0,
                tcpConnections: opening.connectionsOpened,
                httpVersion: opening.connection.easy.httpVersion)
        ])
        // Its transfer is over: the connection can serve the next file's opening.
        opening.loop.recycle(opening.connection)
        return .complete(size: range.count)
    }

    /// What a download that completed did (`tally` of its earlier attempts,
    /// this one's since `started`, with the figures of the probes), also
    /// sent as the `finished` event.
    func finished(
        path: String, size: Int64, remote: RemoteFile, tally: Tally, since started: Double,
        probed: [MirrorReport], prober: Prober, onEvent: @Sendable (DownloadEvent) -> Void
    ) -> DownloadResult {
        let result = DownloadResult(
            path: path, size: size, seconds: tally.seconds + MonotonicClock.now() - started,
            bytesFetched: tally.fetched, bytesReused: tally.reused ?? 0, retries: tally.retries,
            mirrors: merge(probed, tally.mirrors), connectionsUsed: tally.connectionsUsed,
            tcpConnections: tally.tcpConnections + prober.connectionsOpened.total,
            connectionCount: tally.connectionCount, remoteFile: remote)
        onEvent(.finished(result))
        return result
    }

    /// The signed URL of mirror `index` expired: gives the mirror a new one
    /// for the same file, from `DownloadOptions.refreshURL` when there is
    /// one (handed the URL in use), else where its original URL leads now.
    /// The mirror keeps its given URL as its identity (`RemoteFile.url`);
    /// the new one must show the same size and validators before a byte of
    /// it is written.
    func renew(
        _ sources: inout [RemoteFile], index: Int, prober: Prober, onEvent: @Sendable (DownloadEvent) -> Void
    ) async throws(DownloadError) {
        let expired = sources[index]
        guard let refreshURL = options.refreshURL else {
            let fresh = try await prober.probe(expired.url)
            if let problem = Self.disagreement(fresh, with: sources[0]) ?? expired.differs(from: fresh) {
                throw .server(url: fresh.url, message: "resolved anew, it now \(problem)")
            }
            sources[index] = fresh
            return
        }
        let next: String
        do {
            next = try await refreshURL(expired.effectiveURL)
        } catch let error as DownloadError {
            throw error
        } catch {
            throw .server(url: expired.url, message: "its expired URL could not be refreshed: \(error)")
        }
        if let problem = RemoteURL.problem(next) {
            throw .server(url: expired.url, message: "its expired URL was refreshed to \(problem)")
        }
        // The headers given for the mirror's URL go to the new one as they go along a redirect.
        var fresh = try await prober.sending(to: next, headersGivenFor: expired.url).probe(next)
        if let problem = expired.differs(from: fresh) {
            throw .server(url: expired.url, message: "the refreshed URL serves another file: \(next) \(problem)")
        }
        fresh.url = expired.url
        sources[index] = fresh
        onEvent(.notice("the URL of \(expired.url) expired; refreshed, the download goes on where it was"))
    }

    /// The output path, named (for a directory) from `contentDisposition` or `url`.
    private func outputPath(url: String, contentDisposition: String?) -> String {
        switch destination {
        case let .file(path):
            return path
        case let .directory(directory):
            let name = FileName.choose(url: url, contentDisposition: contentDisposition)
            return directory.hasSuffix("/") ? directory + name : directory + "/" + name
        }
    }

    /// The result for a finished file already at `output` shown to be what
    /// `remote` serves: by a checksum the options give for it, else by
    /// rangeget's own record on it (`FileOrigin.verdict`), sampled bytes
    /// standing in for a validator the server does not send. Anything else
    /// (another tool's partial download, zeros, a file changed since) is a
    /// usage error saying what is known and naming the two ways on.
    private func alreadyComplete(
        _ output: String, remote: RemoteFile, reports: [MirrorReport], seconds: Double,
        tcpConnections: Int
    ) throws(DownloadError) -> DownloadResult {
        var info = stat()
        guard lstat(output, &info) == 0 else { throw .io(IOError("examine", output)) }
        // Another download's data file (marked, or with its manifest beside it) may have every byte's room and no byte.
        var manifestInfo = stat()
        if Manifest.isPartialDownload(dataFile: output)
            || lstat(PartialFiles(data: output).manifest, &manifestInfo) == 0
        {
            throw .usage("\(output) already exists and is a partial download, not a finished file", remedy: .overwrite)
        }
        let size = Int64(info.st_size)
        // The user's checksum, the list's entry, or the one the server published.
        let expected = try? options.expectedChecksum(savingAs: output, data: output, remote: remote)?.checksum
        if let expected {
            let actual: String
            do { actual = try Checksum.digest(of: output, algorithm: expected.algorithm) } catch { throw .io(error) }
            guard actual == expected.hex else {
                throw .usage(
                    "\(output) already exists and is not the expected file (its \(expected.algorithm.rawValue) "
                        + "is \(actual), expected \(expected.hex))", remedy: .overwrite)
            }
        } else {
            switch FileOrigin.verdict(path: output, remote: remote) {
            case .proven:
                break
            case .needsSample:
                if let differing = try sampleDifference(output, size: size, remote: remote) {
                    throw .usage(
                        "\(output) already exists and is not the server's file now (it differs from it at bytes "
                            + "\(differing))", remedy: .overwrite)
                }
            case let .serverChanged(why):
                throw .usage("\(output) already exists and is not the server's file now (\(why))", remedy: .overwrite)
            case let .unproven(why):
                throw .usage(
                    "\(output) already exists and is not shown to be the server's file (\(why))",
                    remedy: .verifyOrOverwrite)
            }
        }
        return DownloadResult(
            path: output, size: size, seconds: seconds, bytesFetched: 0,
            bytesReused: size, retries: 0, mirrors: reports, connectionsUsed: 0,
            tcpConnections: tcpConnections, alreadyComplete: true, remoteFile: remote)
    }

    /// The first of a few ranges sampled over the whole file at `output` whose
    /// bytes differ from what `remote` serves there, or nil when all agree.
    private func sampleDifference(_ output: String, size: Int64, remote: RemoteFile) throws(DownloadError) -> ByteRange?
    {
        guard size > 0 else { return nil }
        let file: OutputFile
        do { file = try OutputFile(existing: output, calls: options.systemCalls) } catch { throw .io(error) }
        var random = SystemRandomNumberGenerator()
        return try spotCheck(file, remote.url, remote.url, size, SpotCheck.spread(size: size, using: &random))
    }

    /// How bytes on disk are compared with a server's (a resume's spot check,
    /// `PartialFile.resume`, and a finished file's): fetched with this
    /// download's transfer options.
    private func spotCheck(
        _ file: OutputFile, _ url: String, _ origin: String, _ size: Int64,
        _ samples: [ByteRange]
    ) throws(DownloadError) -> ByteRange? {
        try SpotCheck.firstDifference(
            in: file, url: url, headersGivenFor: origin, size: size, samples: samples, options: options.transfer)
    }
}

extension Download {
    /// Refuses a file whose size is not the one its publisher gave
    /// (`expectedSize`, or what `pieces` describe), before a byte is written.
    func checkPublishedSize(of remote: RemoteFile, options: DownloadOptions) throws(DownloadError) {
        guard let size = remote.size else { return }
        if let expected = options.expectedSize, expected != size {
            throw .server(
                url: remote.url,
                message: "the server reports \(size) bytes, but the file is published as \(expected) bytes")
        }
        if let pieces = options.pieces, !pieces.fits(size: size) {
            throw .server(
                url: remote.url,
                message: "the server reports \(size) bytes, but the \(pieces.count) published pieces of "
                    + "\(pieces.length) bytes describe another size")
        }
    }
}
