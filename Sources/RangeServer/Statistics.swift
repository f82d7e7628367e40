// What the server did: every request, and the body bytes it really wrote.
import FoundationEssentials

/// One request as the server saw and answered it.
public struct RequestRecord: Sendable, Equatable {
    /// The request method, e.g. `GET`.
    public var method: String
    /// The percent-decoded path, with its leading `/` and without the query.
    public var path: String
    /// The request-target as sent, query included.
    public var target: String
    /// The Range header value, if any.
    public var rangeHeader: String?
    /// The If-Range header value, if any.
    public var ifRangeHeader: String?
    /// All request headers, names lowercased; repeated fields joined with ", ".
    public var headers: [String: String]
    /// The status code sent, or 0 when no response was sent (`head-hang`).
    public var status: Int
    /// Body bytes written to the socket for this response (headers excluded).
    public var bodyBytesSent: Int64
    /// The injected fault in spec form (e.g. `cut:100`), nil if none.
    public var fault: String?
    /// Which connection carried the request: 1 for the first accepted.
    public var connection: Int
}

/// A snapshot of what the server did since it started or was last reset.
public struct Statistics: Sendable, Equatable {
    /// Every request, in the order the server answered them.
    public var requests: [RequestRecord] = []
    /// All body bytes written to sockets (response headers excluded).
    public var bodyBytesSent: Int64 = 0
    /// Connections accepted.
    public var connectionsAccepted = 0
    /// When the first request since the start or the last reset was read.
    public var firstRequestAt: Date?
    /// Requests answered 503 because ``RangeServer/Configuration/connectionLimit``
    /// others were being processed.
    public var refusedOverLimit = 0
    /// Signed URLs issued by `GET /sign/NAME` (with ``RangeServer/Configuration/urlLifetime``).
    public var urlsSigned = 0
    /// Requests answered 403 for a missing, unknown or expired token.
    public var refusedForToken = 0
    /// Requests answered but left out of ``requests`` (over the configured
    /// ``RangeServer/Configuration/maxRecordedRequests``).
    public var requestsNotRecorded = 0

    /// The requests to `path` (with or without its leading `/`).
    public func requests(to path: String) -> [RequestRecord] {
        let wanted = "/" + path.drop { $0 == "/" }
        return requests.filter { $0.path == wanted }
    }
}
