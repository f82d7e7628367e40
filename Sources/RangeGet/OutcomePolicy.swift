// OutcomePolicy: what a download does after each engine run, decided from
// the run's outcome alone (and how often the same thing happened before:
// files that keep changing, signed URLs renewed again and again with no byte
// fetched in between).
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
    /// The signed URL of mirror `index` expired: renew it (from
    /// `DownloadOptions.refreshURL`, else by resolving its original URL
    /// again) and go on where the download stands.
    case renew(index: Int)
    /// Ranged requests do not work after all: one stream from byte 0.
    case singleStream(reason: String)
}

struct OutcomePolicy {
    /// Times the file was started over because it changed.
    private(set) var restarts = 0
    /// Expiries in a row with no byte fetched in between.
    private(set) var expiriesWithoutBytes = 0

    /// Changes of the remote file before the download gives up on it.
    static let restartLimit = 2
    /// Expiries in a row with no byte fetched in between before the
    /// download gives up: however often a long download's URL expires, it
    /// goes on while each renewal brings bytes.
    static let renewalLimit = 3

    /// The step after `outcome`, for a download of `url` from `mirrors`;
    /// `unprobed` while the download runs on its manifest's word alone;
    /// `progressed` when the run fetched bytes.
    mutating func next(
        after outcome: EngineOutcome, url: String, mirrors: [String], unprobed: Bool, progressed: Bool
    ) -> NextStep {
        if progressed { expiriesWithoutBytes = 0 }
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
            // A run that fetched nothing counts against the renewal before it (or the expiry it began with).
            if !progressed { expiriesWithoutBytes += 1 }
            guard expiriesWithoutBytes < Self.renewalLimit else {
                return .fail(
                    .server(
                        url: mirrors[index],
                        message:
                            "\(reason), again: its URL expired \(expiriesWithoutBytes) times in a row with no byte "
                            + "fetched in between"))
            }
            return .renew(index: index)
        case let .rangesUnsupported(reason):
            return .singleStream(reason: reason)
        }
    }
}
