// RetryCause: why a transfer or a probe is tried again, typed, as the
// `retry` event carries it: the command line counts "2 cuts, 1 stall" from
// it, and a program can tell a throttling server from a broken network
// without reading the message. It is decided where the failure is seen (the
// connection that ended, the probe that failed), never from the text.

/// Why a transfer (or a probe) is tried again.
public enum RetryCause: Sendable, Hashable, CustomStringConvertible {
    /// The server answered with this error status (429, 503, 500, ...).
    case status(Int)
    /// The connection broke during the body, or the body ended short.
    case cut
    /// No data arrived for the stall timeout, or it came too slowly.
    case stall
    /// No usable connection, or another failure below HTTP, of this kind
    /// (a refused connection, a name that did not resolve, a TLS failure).
    case transport(TransportFailure)
    /// An answer that failed the checks every response passes: a wrong
    /// `Content-Range`, a range the server ignored, another size.
    case badAnswer

    /// `HTTP 503`, `cut`, `stall`, `connectFailed`, `bad answer`.
    public var description: String {
        switch self {
        case let .status(code): return "HTTP \(code)"
        case .cut: return "cut"
        case .stall: return "stall"
        case let .transport(failure): return failure.rawValue
        case .badAnswer: return "bad answer"
        }
    }

    /// The cause of a libcurl failure: a connection lost mid-body is a cut,
    /// a timeout once data flowed is a stall (before, no connection was made
    /// in time), the rest is the transport failure it is.
    init(_ error: CurlError, delivered: Bool) {
        switch error.failure {
        case .connectionLost: self = .cut
        case .timeout where delivered: self = .stall
        default: self = .transport(error.failure)
        }
    }

    /// The cause of an answer rangeget refused: an error status is itself,
    /// a body that ran past its range was cut off, anything else is a bad answer.
    init(_ rejection: Rejection) {
        switch rejection {
        case let .status(code, _): self = .status(code)
        case .overlong: self = .cut
        default: self = .badAnswer
        }
    }

    /// The cause of a failed probe, from the error it ended with.
    init(_ error: DownloadError) {
        switch error {
        case let .network(_, _, failure) where failure == .connectionLost: self = .cut
        case let .network(_, _, failure): self = .transport(failure)
        case let .server(_, _, status?): self = .status(status)
        default: self = .badAnswer
        }
    }
}
