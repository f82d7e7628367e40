// Resumability: what the next run can make of a download interrupted now,
// read from its events, so that the Ctrl-C line promises no more than that.
import RangeGet

/// What the next run can make of a download interrupted now, as its events
/// tell it, so that the Ctrl-C line promises no more than that run will do.
enum Resumability: Sendable {
    /// Fetched in ranges: the same command resumes it.
    case resumable
    /// One stream of known length from a server without ranges: its
    /// manifest is kept, but a later run resumes it only if the server then
    /// serves ranges (the probe line says so too).
    case onlyWithRanges
    /// One stream of unknown length: nothing to resume.
    case startsOver

    /// The state after `event`.
    func after(_ event: DownloadEvent) -> Resumability {
        switch event {
        case let .probed(remote):
            return remote.size == nil ? .startsOver : remote.acceptsRanges ? .resumable : .onlyWithRanges
        case let .restarting(reason) where reason.hasSuffix("downloading as one stream from the start"):
            // A 200 to a ranged request (a resume from a server that still
            // serves no ranges, say): one stream from byte 0 now.
            return .onlyWithRanges
        default:
            return self
        }
    }

    /// What a failed run says of its partial download, when it has bytes in it (`kept`).
    func keptMessage(_ kept: Bool) -> String? {
        guard kept else { return nil }
        switch self {
        case .resumable: return "the partial download is kept: run the same command again to resume"
        case .onlyWithRanges:
            return "the partial download is kept, but a later run resumes it only if the server then serves byte ranges"
        case .startsOver: return nil
        }
    }

    /// The line for an interrupted download.
    var interruptedMessage: String {
        switch self {
        case .resumable:
            "interrupted; run the same command again to resume"
        case .onlyWithRanges:
            "interrupted; the server does not serve byte ranges: a later run resumes it only if the server then "
                + "serves them, and otherwise starts over"
        case .startsOver:
            "interrupted; the server did not say how long the file is, so nothing can be resumed: the next run starts over"
        }
    }
}
