// Mirror discovery (Metalink/HTTP, RFC 6249): the mirrors the first URL's
// response lists in `Link: <URL>; rel=duplicate` (DuplicateLinks) join a
// download the way mirrors the user named do: each is probed, must report
// the file's size, and must serve the bytes the user's mirrors serve at the
// sampled places (MirrorVote), unless all name the same strong ETag; one that
// fails any of that is dropped with a `mirrorDropped` event, never failing
// the download. Only the first URL's response is read, never a discovered
// mirror's (no chain of links, no loop), and the discovered mirrors never
// vote: they are compared with the first usable mirror, so a server's list
// cannot outvote the file the user asked for.
//
// Where it does not happen: with `discovery` off; when the first URL's probe
// failed or that mirror was dropped; for a file served as one stream (no
// size or no ranges) or no larger than `minimumSplit` (one piece: the extra
// probes and samples would cost more than they bring); for an output file
// that is there already (it is checked, not fetched); and on a resume from
// one URL that goes on from its manifest without asking the server (Download+
// Attempt: there is no response to read until a probe follows). Links on a
// redirect's response are not seen either: a probe keeps the final
// response's head.
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Download {
    /// The `discoveredIn` of a mirror a `Link: rel=duplicate` named.
    static let duplicateLink = "Link: rel=duplicate"

    /// How long the discovered mirrors' probes may take, at most: a mirror
    /// the user did not name should not hold up the start by a connect
    /// timeout (15 s) and a stall timeout, as a dead one would.
    static let discoveryProbeSeconds = 5.0

    /// `round` (a probe round's usable mirrors, reports and opening request)
    /// with the mirrors the first URL's response lists appended after the
    /// user's, in the server's order of preference, each probed and compared
    /// (see above) and reported, kept or dropped, with its `discoveredIn`.
    func addingDiscoveredMirrors(
        to round: ([RemoteFile], [MirrorReport], Opening?), prober: Prober, stop: StopSignal,
        onEvent: @Sendable (DownloadEvent) -> Void
    ) async -> ([RemoteFile], [MirrorReport], Opening?) {
        let (usable, reports, _) = round
        var opened = round.2
        guard options.discovery, let origin = usable.first, origin.url == url, origin.acceptsRanges,
            let size = origin.size, size > options.minimumSplit, !stop.isRequested, !outputExists
        else { return round }
        let found = discoveredMirrors(of: origin, onEvent: onEvent)
        guard !found.isEmpty else { return round }
        for mirror in found { onEvent(.notice("mirror \(mirror) from \(Self.duplicateLink)")) }
        // On a session's loop the opening request holds a slot that the
        // probes below may wait for (MirrorProbe's rule for several mirrors).
        if let request = opened, request.loop.hasOwnThread {
            request.cancel()
            opened = nil
        }
        let outcomes = await probeDiscovered(found, prober: prober, stop: stop)
        // A pause or cancel ended the probes: the caller sees to it.
        if stop.isRequested { return (usable, reports, opened) }
        var candidates: [RemoteFile] = []
        var discovered: [MirrorReport] = []
        for (mirror, outcome) in zip(found, outcomes) {
            var report = MirrorReport(url: mirror, bytes: 0, seconds: 0, errors: 0, discoveredIn: Self.duplicateLink)
            switch outcome {
            case nil:
                report.dropped = "no answer to its probe within \(Int(Self.discoveryProbeSeconds)) s"
            case let .failure(failure)?:
                report.errors = 1
                report.dropped = "probe failed: \(failure.error)"
            case let .success(remote)?:
                report.dropped = Self.disagreement(remote, with: origin)
                if report.dropped == nil { candidates.append(remote) }
            }
            discovered.append(report)
        }
        // Compared with the first mirror alone, which already agrees with the user's others.
        if !candidates.isEmpty, !MirrorVote.validatorsAgree([origin] + candidates) {
            var random = SystemRandomNumberGenerator()
            let outvoted = MirrorVote.outvoted(
                [origin] + candidates, samples: SpotCheck.spread(size: size, using: &random),
                options: options.transfer, voters: 1)
            for (index, candidate) in candidates.enumerated() {
                let reason =
                    outvoted[0].map { "the bytes of \(url) to compare it with could not be fetched (\($0))" }
                    ?? outvoted[index + 1]
                guard let reason else { continue }
                discovered[discovered.firstIndex { $0.url == candidate.url }!].dropped = reason
            }
            candidates = candidates.filter { candidate in
                discovered.first { $0.url == candidate.url }?.dropped == nil
            }
        }
        for report in discovered {
            if let dropped = report.dropped { onEvent(.mirrorDropped(url: report.url, reason: dropped)) }
        }
        return (usable + candidates, reports + discovered, opened)
    }

    /// True when the output file is there already and is not to be
    /// overwritten: it is checked against the server, not fetched.
    private var outputExists: Bool {
        guard window == nil, !options.overwrite, case let .file(path) = destination else { return false }
        return access(path, F_OK) == 0
    }

    /// The mirrors `origin`'s Link header lists that the user did not name.
    /// With request headers that may not leave the user's origin
    /// (`HeaderPolicy`: a token, a cookie), only mirrors at that origin: a
    /// server's list must not lead them elsewhere.
    private func discoveredMirrors(of origin: RemoteFile, onEvent: (DownloadEvent) -> Void) -> [String] {
        let links = DuplicateLinks(field: origin.headers["link"], responseURL: origin.effectiveURL, givenURL: url)
        let named = Set(mirrors.map(DuplicateLinks.key))
        let found = links.duplicates.filter { !named.contains(DuplicateLinks.key($0)) }
        guard !options.transfer.headerLines.allSatisfy(HeaderPolicy.mayCrossOrigins) else { return found }
        let here = found.filter { HeaderPolicy.sameOrigin($0, url) }
        if here.count < found.count {
            onEvent(
                .notice(
                    "\(found.count - here.count) mirror(s) from \(Self.duplicateLink) not used: the request "
                        + "headers were given for \(HeaderPolicy.origin(of: url)) only"))
        }
        return here
    }

    /// Each of `urls` probed, all at once, for at most `discoveryProbeSeconds`
    /// (or until `stop`): the outcomes in the order of `urls`, nil for a
    /// probe that had not ended by then.
    private func probeDiscovered(
        _ urls: [String], prober: Prober, stop: StopSignal
    ) async -> [Result<RemoteFile, ProbeFailure>?] {
        let deadline = StopSignal(loop: prober.loop)
        let probing = prober.stopping(on: deadline)
        var outcomes: [Int: Result<RemoteFile, ProbeFailure>] = [:]
        await withTaskGroup(of: (Int, Result<RemoteFile, ProbeFailure>)?.self) { group in
            for (index, url) in urls.enumerated() {
                group.addTask {
                    do throws(ProbeFailure) {
                        return (index, .success(try await probing.attempt(url)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            // The watch that ends the probes at the deadline, or at a pause or cancel.
            group.addTask {
                let until = MonotonicClock.now() + Self.discoveryProbeSeconds
                while !stop.isRequested, !Task.isCancelled, MonotonicClock.now() < until {
                    try? await Task.sleep(nanoseconds: 50_000_000)
                }
                if !Task.isCancelled { deadline.request() }
                return nil
            }
            for await case let (index, outcome)? in group {
                // A probe the deadline ended failed for that alone.
                if !deadline.isRequested { outcomes[index] = outcome }
                if outcomes.count == urls.count { group.cancelAll() }
            }
        }
        return urls.indices.map { outcomes[$0] }
    }
}
