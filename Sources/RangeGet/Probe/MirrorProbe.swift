// Probing the mirrors of a download: all at once, the first through the
// opening request of the zero-round-trip start when there is one; a mirror
// that disagrees about the file (its size, or its bytes where the validators
// do not vouch for it: MirrorVote) is left out.
import SystemSupport

extension Download {
    /// Probes every mirror at once. The first that answers (in the order
    /// given) sets the size; a mirror that disagrees on it is left out with a
    /// message, and so is one whose sampled bytes most mirrors do not serve
    /// (`MirrorVote`) unless all name one strong ETag.
    /// With `opening`, the first mirror is probed by the opening request of
    /// the zero-round-trip start, sent on that loop and returned running when
    /// its answer was usable.
    ///
    /// When no mirror answered usably and one of them may on another try (a
    /// refused or broken connection, a 503, a malformed answer: not a 404, a
    /// certificate, or a server that answered nothing in twice the stall
    /// timeout), every mirror is probed again after the backoff a piece gets,
    /// or the `Retry-After` asked for (up to `longestRetryAfter`), each wait
    /// a `.retry` event, up to `retries` times, as `curl --retry-connrefused`
    /// does: a server restarting as the download starts is waited for.
    ///
    /// The mirrors the first mirror's response lists (`Link: rel=duplicate`)
    /// follow the given ones: `addingDiscoveredMirrors` (MirrorDiscovery.swift).
    func probeMirrors(
        _ prober: Prober, skipHead: Bool = false, opening loop: TransferLoop? = nil,
        onEvent: @Sendable (DownloadEvent) -> Void
    ) async throws(DownloadError) -> ([RemoteFile], [MirrorReport], Opening?) {
        // A pause or cancel ends these probes (and a small file's held body)
        // at once: a signal of their own, so a pause that a resume undid at
        // once still ends them as interrupted (and the next attempt probes
        // with a fresh one), never as failed.
        let stop = StopSignal(loop: loop ?? prober.loop)
        let prober = prober.stopping(on: stop)
        if controller.register(stop) { stop.request() }
        defer { _ = controller.register(nil) }
        var failures = 0
        // On a session's loop the other mirrors' probes take slots of its
        // budget, while an opening request holds its slot until the engine
        // adopts it: downloads holding every slot with their openings, each
        // waiting for its other mirrors' probes, would wait for ever. So
        // there, several mirrors are probed without an opening request (each
        // probe gives its slot back as it ends).
        var loop = mirrors.count > 1 && loop?.hasOwnThread == true ? nil : loop
        while true {
            let failure: ProbeFailure
            do throws(ProbeFailure) {
                let round = try await probeRound(
                    prober, skipHead: skipHead, opening: loop, stop: stop, onEvent: onEvent)
                return await addingDiscoveredMirrors(to: round, prober: prober, stop: stop, onEvent: onEvent)
            } catch {
                failure = error
            }
            // Probes a stop ended failed for that alone.
            if stop.isRequested { throw .stopped }
            // The opening request goes with the first round.
            loop = nil
            failures += 1
            let delay = try ProbeRetry.delay(after: failure, failures: failures, options: options)
            onEvent(
                .retry(
                    connection: 0, cause: RetryCause(failure.error), reason: ProbeRetry.reason(failure.error),
                    delay: delay,
                    attempt: failures + 1, attempts: options.retries + 1))
            // Waited without a thread: the task sleeps, and looks at the stop every 50 ms.
            let until = MonotonicClock.now() + delay
            while !stop.isRequested, MonotonicClock.now() < until {
                let slice = min(0.05, max(0.001, until - MonotonicClock.now()))
                try? await Task.sleep(nanoseconds: UInt64(slice * 1e9))
            }
            if stop.isRequested { throw .stopped }
        }
    }

    /// One round of `probeMirrors`: every mirror probed once.
    private func probeRound(
        _ prober: Prober, skipHead: Bool, opening loop: TransferLoop?, stop: StopSignal,
        onEvent: @Sendable (DownloadEvent) -> Void
    ) async throws(ProbeFailure) -> ([RemoteFile], [MirrorReport], Opening?) {
        var outcomes: [Int: Result<RemoteFile, ProbeFailure>] = [:]
        var opened: Opening?
        if mirrors.count == 1 {
            // One URL (a list's every file): no group of tasks to make.
            if let loop {
                (opened, outcomes[0]) = await openingProbe(prober, on: loop, stop: stop)
            } else {
                outcomes[0] = await Self.probe(url, with: prober, skipHead: skipHead)
            }
        } else {
            await probeEach(prober, skipHead: skipHead, opening: loop, stop: stop, into: &outcomes, opened: &opened)
        }
        // Probes a stop ended failed for that alone.
        if stop.isRequested { throw ProbeFailure(.stopped) }
        // The size most mirrors report sets the file's (a tie: the first
        // mirror's): one mirror claiming another size is that mirror's fault.
        let answered = mirrors.indices.compactMap { try? outcomes[$0]!.get() }
        let reference = MirrorVote.majority(answered.map(\.size)).flatMap { size in answered.first { $0.size == size } }
        var usable: [RemoteFile] = []
        var reports: [MirrorReport] = []
        // The failure to report: the first transient one (another round may
        // mend it), else the first.
        var failed: ProbeFailure?
        for index in mirrors.indices {
            var report = MirrorReport(url: mirrors[index], bytes: 0, seconds: 0, errors: 0, dropped: nil)
            switch outcomes[index]! {
            case let .failure(failure):
                if failed == nil || (failure.isTransient && !failed!.isTransient) { failed = failure }
                report.errors = 1
                report.dropped = "probe failed: \(failure.error)"
            case let .success(remote):
                if let reference, let problem = Self.disagreement(remote, with: reference) {
                    report.dropped = problem
                } else {
                    usable.append(remote)
                }
            }
            if let dropped = report.dropped, mirrors.count > 1 {
                onEvent(.mirrorDropped(url: mirrors[index], reason: dropped))
            }
            reports.append(report)
        }
        guard !usable.isEmpty else { throw failed! }
        // Mirrors whose validators do not vouch for one another: their bytes decide.
        if usable.count > 1, !MirrorVote.validatorsAgree(usable), let size = usable[0].size {
            var random = SystemRandomNumberGenerator()
            let samples = SpotCheck.spread(size: size, using: &random)
            let outvoted = MirrorVote.outvoted(usable, samples: samples, options: options.transfer)
            if outvoted.count == usable.count {
                throw ProbeFailure(
                    .server(
                        url: usable[0].url,
                        message: "no mirror could serve bytes to compare: "
                            + (outvoted[0] ?? "")))
            }
            for (index, reason) in outvoted.sorted(by: { $0.key < $1.key }) {
                let report = reports.firstIndex { $0.url == usable[index].url }!
                reports[report].dropped = reason
                onEvent(.mirrorDropped(url: usable[index].url, reason: reason))
            }
            // The opening request runs for the first mirror: it goes when that mirror does.
            if outvoted[0] != nil, let request = opened {
                request.cancel()
                opened = nil
            }
            usable = usable.indices.filter { outvoted[$0] == nil }.map { usable[$0] }
        }
        return (usable, reports, opened)
    }

    /// Every mirror probed at once, each in a task of its own; the first
    /// through the opening request on `loop` when given.
    private func probeEach(
        _ prober: Prober, skipHead: Bool, opening loop: TransferLoop?, stop: StopSignal,
        into outcomes: inout [Int: Result<RemoteFile, ProbeFailure>], opened: inout Opening?
    ) async {
        await withTaskGroup(of: (Int, Result<RemoteFile, ProbeFailure>).self) { group in
            for (index, url) in mirrors.enumerated() where !(loop != nil && index == 0) {
                group.addTask { (index, await Self.probe(url, with: prober, skipHead: skipHead)) }
            }
            if let loop {
                (opened, outcomes[0]) = await openingProbe(prober, on: loop, stop: stop)
            }
            for await (index, result) in group { outcomes[index] = result }
        }
    }

    /// One mirror's probe, its failure kept.
    private static func probe(
        _ url: String, with prober: Prober, skipHead: Bool = false,
        rangedUnanswered: Bool = false
    ) async -> Result<RemoteFile, ProbeFailure> {
        do throws(ProbeFailure) {
            return .success(try await prober.attempt(url, skipHead: skipHead, rangedUnanswered: rangedUnanswered))
        } catch {
            return .failure(error)
        }
    }

    /// The first mirror probed by the opening request of the zero-round-trip
    /// start on `loop`: the request, running, when its answer was usable;
    /// else the classic probe's answer.
    private func openingProbe(
        _ prober: Prober, on loop: TransferLoop,
        stop: StopSignal
    ) async -> (Opening?, Result<RemoteFile, ProbeFailure>) {
        let transfer = options.transfer
        let length = min(options.minimumSplit, options.openingLimit)
        // Mirrors share a file's bytes out: their opening is never widened (it is still asked).
        let wholeLength = mirrors.count == 1 ? options.openingLimit : length
        let request = try? Opening(
            // A body kept in memory is written without an engine, so without
            // piece checks: a file with piece hashes always gets one.
            url: url, length: length, options: transfer, holding: window == nil && options.pieces == nil,
            loop: loop, stop: stop, whole: options.filesTakeFreeSlots.map { (wholeLength, $0) })
        // With other mirrors, one that ignores ranges is dropped rather than
        // making the whole download one stream (the classic probe and the
        // engine see to that).
        let timeout = transfer.connectTimeout + transfer.stallTimeout
        if let request, let remote = await request.probe(url: url, timeout: timeout, wholeFile: mirrors.count == 1) {
            return (request, .success(remote))
        }
        // Other mirrors' probes end too (the stop ends them).
        if stop.isRequested { return (nil, .failure(ProbeFailure(.stopped))) }
        prober.connectionsOpened.add(request?.connectionsOpened ?? 0)
        // The opening request was a ranged GET: unanswered, it counts as the probe's.
        let unanswered = request?.gotNoAnswer ?? false
        return (nil, await Self.probe(url, with: prober, rangedUnanswered: unanswered))
    }

    /// Why `remote` cannot be a mirror of `reference`, or nil.
    static func disagreement(_ remote: RemoteFile, with reference: RemoteFile) -> String? {
        if remote.size != reference.size {
            return
                "its size (\(remote.size.map(String.init) ?? "unknown")) differs from \(reference.url) (\(reference.size.map(String.init) ?? "unknown"))"
        }
        return nil
    }

    /// Probe-time reports, each used mirror's replaced by its engine figures
    /// (summed over engine runs), cleaned for the result (`OutgoingText`).
    func merge(_ probed: [MirrorReport], _ engine: [String: MirrorReport]) -> [MirrorReport] {
        probed.map { report in
            guard report.dropped == nil, var used = engine[report.url] else { return report.cleaned }
            used.discoveredIn = report.discoveredIn
            return used.cleaned
        }
    }
}
