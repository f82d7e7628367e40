// ProbeRetry: whether a round of probes that found no usable mirror goes
// again, and after how long: the engine's backoff for a piece, or the
// server's Retry-After within `longestRetryAfter`; the count of rounds is
// `retries`, as for a piece. A failure no other round would mend ends the
// download at once.

enum ProbeRetry {
    /// The seconds to wait before probing again after the `failures`th round
    /// that failed with `failure`; the error the download ends with when
    /// there is to be no other round.
    static func delay(
        after failure: ProbeFailure, failures: Int,
        options: DownloadOptions
    ) throws(DownloadError) -> Double {
        guard failure.isTransient else { throw failure.error }
        guard failures <= options.retries else {
            throw failure.error.prefixed("giving up after \(failures) attempts: ")
        }
        var delay = options.backoff(failures: failures)
        if let retryAfter = failure.retryAfter {
            guard retryAfter <= options.longestRetryAfter else {
                let status = failure.error.httpStatus ?? 503
                throw .server(
                    url: failure.error.url ?? "",
                    message: "the server "
                        + Rejection.overlongWait(
                            retryAfter, status: status, longest: options.longestRetryAfter), status: status)
            }
            delay = max(delay, retryAfter)
        }
        return delay
    }

    /// The cause a `.retry` event names: the failure without its URL, as the
    /// engine's retries name theirs.
    static func reason(_ error: DownloadError) -> String {
        switch error {
        case let .network(_, message, _), let .server(_, message, _): return message
        default: return error.description
        }
    }
}

extension DownloadError {
    /// This failure with `prefix` before its message (a server's or the
    /// network's; any other as it is).
    func prefixed(_ prefix: String) -> DownloadError {
        switch self {
        case let .network(url, message, failure): return .network(url: url, message: prefix + message, failure: failure)
        case let .server(url, message, status): return .server(url: url, message: prefix + message, status: status)
        default: return self
        }
    }
}
