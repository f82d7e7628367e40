// DownloadError: every way a download can fail, typed so the executable can
// map each to its exit code and the library's users can react to each: the
// HTTP status of a server's refusal, the kind of a network failure, and the
// option that gets past a refusal of the library's own.

/// Why a download did not complete.
public enum DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request itself is wrong: bad option, bad URL, an output in the
    /// way; `remedy` is the option that lets the download go on, when one does.
    case usage(String, remedy: Remedy? = nil)
    /// The transfer failed below HTTP (after retries, or at once when another
    /// attempt would fail the same way); `failure` says how: DNS, connect,
    /// TLS, certificate, timeout, a connection lost, ...
    case network(url: String, message: String, failure: TransportFailure)
    /// The server answered, but not with what was needed; `status` is the
    /// HTTP status when that answer was an error status (404, 403, 500, ...).
    case server(url: String, message: String, status: Int? = nil)
    /// The bytes could not be verified (size, checksum, a file that kept
    /// changing); `remedy` is the option that fetches them again, when one does.
    case verification(String, remedy: Remedy? = nil)
    /// The local disk or file system failed.
    case io(IOError)
    /// The resume state beside the output is unusable (`remedy`: `.restart`).
    case manifest(ManifestError)
    /// Another process is writing the same output.
    case busy(String)
    /// Stopped on request: `pause()` with `stop()` or a cancel after it,
    /// `stop()`, `cancel()`, a cancelled task or an abandoned stream.
    /// `keptResumeState` says what a new `Download` can take up, as
    /// `DownloadState.cancelled` does: true when the `.part` file and its
    /// manifest stay (a download to a file stopped, or cancelled with
    /// `keepingResumeState`), false when nothing does (a `cancel()` deleted
    /// them, or a stream, which keeps nothing on disk). Not a distinct case
    /// for a cancel: either way the download stopped because it was told
    /// to, and no option gets past it (no `remedy`).
    case interrupted(keptResumeState: Bool)
    /// `Download.data(from:limit:options:)` refused a resource larger than
    /// `limit` bytes; `size` is nil when the server did not announce it and
    /// the stream ran past the limit.
    case tooLarge(size: Int64?, limit: Int64)

    /// An option of `DownloadOptions` that gets past a failure the download
    /// refuses to work around by itself.
    public enum Remedy: String, Sendable, Hashable, CustomStringConvertible {
        /// `DownloadOptions.restart`: discard the partial download and its
        /// resume state, and fetch the file from the start.
        case restart
        /// `DownloadOptions.overwrite`: replace the file at the destination.
        case overwrite
        /// `DownloadOptions.checksum` to show that the file at the destination
        /// is the expected one, or `DownloadOptions.overwrite` to replace it.
        case verifyOrOverwrite

        /// What to do, in the library's terms.
        public var description: String {
            switch self {
            case .restart: return "set DownloadOptions.restart to start over"
            case .overwrite: return "set DownloadOptions.overwrite to replace it"
            case .verifyOrOverwrite:
                return "set DownloadOptions.checksum to verify it, or DownloadOptions.overwrite to replace it"
            }
        }
    }

    /// What the code that stops on a pause, cancel or stop throws, before
    /// the download's end says what was kept (`DownloadController`).
    static let stopped = DownloadError.interrupted(keptResumeState: true)

    /// The HTTP error status the server answered with, when that is why the download failed.
    public var httpStatus: Int? {
        if case let .server(_, _, status) = self { return status }
        return nil
    }

    /// What failed below HTTP, when that is why the download failed.
    public var transportFailure: TransportFailure? {
        if case let .network(_, _, failure) = self { return failure }
        return nil
    }

    /// The option that gets past this failure, when one does.
    public var remedy: Remedy? {
        switch self {
        case let .usage(_, remedy), let .verification(_, remedy): return remedy
        case .manifest: return .restart
        default: return nil
        }
    }

    /// The URL the failure is about, when it is about one.
    public var url: String? {
        switch self {
        case let .network(url, _, _), let .server(url, _, _): return url
        default: return nil
        }
    }

    /// One line for people: what went wrong, then the `remedy` in the
    /// library's terms. URLs come without `user:password@`, and with no
    /// control character a server may have put into a header the message quotes.
    public var description: String {
        guard let remedy else { return problem }
        return "\(problem); \(remedy)"
    }

    /// `description` without the remedy, for a caller that words it itself
    /// (the `rangeget` command names its `--restart` and `--force`).
    public var problem: String {
        OutgoingText.clean(text)
    }

    private var text: String {
        switch self {
        case let .usage(message, _): return message
        case let .network(url, message, _): return "\(url): \(message)"
        case let .server(url, message, _): return "\(url): \(message)"
        case let .verification(message, _): return message
        case let .io(error): return error.description
        case let .manifest(error): return error.description
        case let .busy(message): return message
        case .interrupted(keptResumeState: true):
            return "interrupted; the partial download is kept for a later download to resume"
        case .interrupted(keptResumeState: false):
            return "interrupted; nothing is kept for a later download to resume"
        case let .tooLarge(size?, limit):
            return "the resource has \(size) bytes, more than the limit of \(limit)"
        case let .tooLarge(nil, limit):
            return "the resource is larger than the limit of \(limit) bytes"
        }
    }
}
