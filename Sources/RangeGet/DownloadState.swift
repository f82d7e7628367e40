// DownloadState: where a download stands, as `Download.state` reports it.

/// Where a download stands: ready, running, paused, or how it ended.
public enum DownloadState: Sendable, Equatable {
    /// Created; neither `start()` nor `run()` has been called.
    case ready
    /// Probing or transferring.
    case running
    /// `pause()` was called and the transfers are stopping; `paused` follows.
    case pausing
    /// No connection is open and the manifest is saved; `resume()` continues.
    case paused
    /// The file is complete and in place.
    case finished(DownloadResult)
    /// The download failed; a new `Download` of the same file and
    /// destination resumes from what is on disk.
    case failed(DownloadError)
    /// Cancelled. When `keptResumeState`, the `.part` file and its manifest
    /// are on disk and a new `Download` (in any process) resumes from them;
    /// otherwise both were deleted (a stream never has them).
    case cancelled(keptResumeState: Bool)
}
