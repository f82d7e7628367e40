// OutcomePolicy: what a download does after each engine run, decided from
// the run's outcome alone (and how often the same thing happened before).
// Pure: Download (to a file) and the stream (to a reader) carry the steps
// out, each with what its sink allows; the table is tested on its own.

/// What a download does after an engine run.
enum NextStep: Equatable {
    /// Every byte is in: verify and finish.
    case finish(size: Int64)
    /// End with this error (`.stopped` after a stop).
    case fail(DownloadError)
    /// A resume sent its requests on the manifest's word alone and the file
    /// looks changed: probe now, which tells a changed file (start over,
    /// saying why) from a manifest that cannot describe this one.
    case probe
    /// The remote file changed: discard what was fetched, probe again
    /// without trusting HEAD (a lying HEAD is the usual culprit) and start over.
    case startOver(reason: String)
    /// A signed URL mirror `index` was redirected to has expired: resolve
    /// its original URL again and go on where the download stands.
    case resolve(index: Int)
    /// Ranged requests do not work after all: one stream from byte 0.
    case singleStream(reason: String)
}

struct OutcomePolicy {
    /// Times the file was started over because it changed, and mirrors resolved anew.
    private(set) var restarts = 0
    private(set) var resolves = 0

    /// Changes of the remote file before the download gives up on it.
    static let restartLimit = 2
    /// Expired signed URLs resolved anew before the download gives up.
    static let resolveLimit = 3

    /// The step after `outcome`, for a download of `url` from `mirrors`;
    /// `unprobed` while the download runs on its manifest's word alone.
    mutating func next(after outcome: EngineOutcome, url: String, mirrors: [String], unprobed: Bool) -> NextStep {
        switch outcome {
        case let .complete(size):
            return .finish(size: size)
        case .stopped:
            return .fail(.stopped)
        case let .failed(error):
            return .fail(error)
        case .remoteChanged where unprobed:
            return .probe
        case let .remoteChanged(reason):
            restarts += 1
            guard restarts <= Self.restartLimit else {
                return .fail(.verification("\(url) keeps changing during the download (\(reason))"))
            }
            return .startOver(reason: reason)
        case let .expired(index, reason):
            resolves += 1
            guard resolves <= Self.resolveLimit else {
                return .fail(.server(url: mirrors[index], message: "\(reason), again after resolving it anew"))
            }
            return .resolve(index: index)
        case let .rangesUnsupported(reason):
            return .singleStream(reason: reason)
        }
    }
}
