// DownloadError: every way a download can fail, typed so the executable can
// map each to its exit code and the library's users can react to each: the
// HTTP status of a server's refusal, the kind of a network failure.

/// Why a download did not complete.
public enum DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The request itself is wrong: bad option, bad URL, an output in the way.
    case usage(String)
    /// The transfer failed below HTTP (after retries, or at once when another
    /// attempt would fail the same way); `failure` says how: DNS, connect,
    /// TLS, certificate, timeout, a connection lost, ...
    case network(url: String, message: String, failure: TransportFailure)
    /// The server answered, but not with what was needed; `status` is the
    /// HTTP status when that answer was an error status (404, 403, 500, ...).
    case server(url: String, message: String, status: Int? = nil)
    /// The bytes could not be verified (size, checksum, a file that kept changing).
    case verification(String)
    /// The local disk or file system failed.
    case io(IOError)
    /// The resume state beside the output is unusable.
    case manifest(ManifestError)
    /// Another process is writing the same output.
    case busy(String)
    /// Stopped on request; the partial download is resumable.
    case interrupted

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

    /// The URL the failure is about, when it is about one.
    public var url: String? {
        switch self {
        case let .network(url, _, _), let .server(url, _, _): return url
        default: return nil
        }
    }

    /// One line for people: URLs without `user:password@`, and no control
    /// character a server may have put into a header the message quotes.
    public var description: String {
        OutgoingText.clean(text)
    }

    private var text: String {
        switch self {
        case let .usage(message): return message
        case let .network(url, message, _): return "\(url): \(message)"
        case let .server(url, message, _): return "\(url): \(message)"
        case let .verification(message): return message
        case let .io(error): return error.description
        case let .manifest(error): return error.description
        case let .busy(message): return message
        case .interrupted: return "interrupted; the partial download is kept for a later run to resume"
        }
    }
}
