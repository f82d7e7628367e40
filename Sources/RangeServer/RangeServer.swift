// The public face of the test server: configuration, lifecycle, content,
// faults and statistics. See README.md in this folder.
import FoundationEssentials

/// A range-capable HTTP/1.1 server on 127.0.0.1 with per-connection and
/// server-wide rate limits, latency and injectable faults, for tests, demos
/// and benchmarks.
///
/// One thread accepts connections and one thread serves each connection.
/// Every method is thread-safe; settings changed while running apply to the
/// next response (the rate to the next slice of a body).
public final class RangeServer: Sendable {
    /// How a server starts out; everything but the port and the rate change
    /// can change later.
    public struct Configuration: Sendable {
        /// The port to listen on; 0 picks a free one.
        public var port: UInt16
        /// Bytes per second per connection (a smooth token bucket over the
        /// connection's lifetime); nil for no limit.
        public var ratePerConnection: Int?
        /// Bytes per second for the whole server, shared by all its
        /// connections (one token bucket, like an uplink; connections
        /// sending at once get equal shares); nil for no limit. Applies on
        /// top of ``ratePerConnection``: a send waits for both.
        public var totalRate: Int?
        /// Bytes a paced body sends at once (nil: smooth pacing, slices of
        /// about 1/64 s of the rate, at most 64 KiB). Each burst goes to the
        /// socket without a pause, then the connection waits as long as its
        /// rate asks for those bytes, as nginx's `limit_rate` does with its
        /// default `sendfile_max_chunk` (2 MiB). Applies only where a rate
        /// paces the body; the shared uplink books a whole burst at a time.
        public var burst: Int?
        /// Seconds to wait before sending each response's headers.
        public var latency: Double
        /// Fault rules; the first matching rule wins.
        public var faults: [FaultRule]
        /// Seconds a keep-alive connection may sit idle before it is closed.
        public var idleTimeout: Double
        /// The most requests ``Statistics/requests`` keeps, so a long-running
        /// server stays small; later ones are only counted.
        public var maxRecordedRequests: Int
        /// The most requests processed at once, from reading a request's head
        /// to the end of its response body, as nginx's `limit_conn` counts;
        /// a request beyond gets 503 with `Retry-After: 1` and the connection
        /// closes. Nil for no limit.
        public var connectionLimit: Int?
        /// Seconds a signed URL stays valid; nil serves every resource at its
        /// plain URL. When set, `GET /sign/NAME` answers with a fresh URL
        /// `http://127.0.0.1:PORT/NAME?token=T`, and a request for `/NAME`
        /// without a token that is valid now gets 403. A request admitted
        /// before its token expires is answered in full.
        public var urlLifetime: Double?
        /// Rate limits that replace ``ratePerConnection`` and ``totalRate``
        /// a set time after the first request since ``RangeServer/start()``;
        /// nil for none.
        public var rateChange: RateChange?

        /// A configuration; the defaults give an ephemeral port, no limits,
        /// smooth pacing, no latency, no faults, a 30 s idle timeout, 100,000
        /// records, plain URLs and no rate change.
        public init(
            port: UInt16 = 0, ratePerConnection: Int? = nil, totalRate: Int? = nil, burst: Int? = nil,
            latency: Double = 0, faults: [FaultRule] = [], idleTimeout: Double = 30, maxRecordedRequests: Int = 100_000,
            connectionLimit: Int? = nil, urlLifetime: Double? = nil, rateChange: RateChange? = nil
        ) {
            self.port = port
            self.ratePerConnection = ratePerConnection
            self.totalRate = totalRate
            self.burst = burst
            self.latency = latency
            self.faults = faults
            self.idleTimeout = idleTimeout
            self.maxRecordedRequests = maxRecordedRequests
            self.connectionLimit = connectionLimit
            self.urlLifetime = urlLifetime
            self.rateChange = rateChange
        }
    }

    private let core: ServerCore

    /// A server that does nothing until ``start()``.
    public init(configuration: Configuration = .init()) {
        core = ServerCore(configuration: configuration)
    }

    deinit { core.stop() }

    /// Binds 127.0.0.1 and starts accepting connections on a thread of its
    /// own. After ``stop()`` it may start again, on the same port.
    /// Ignores SIGPIPE in the whole process (a closed peer then gives EPIPE).
    public func start() throws(RangeServerError) {
        try core.start()
    }

    /// The bound port (the configured one before ``start()``).
    public var port: UInt16 { core.port }

    /// `http://127.0.0.1:PORT/` followed by `path` without its leading `/`.
    public func url(_ path: String) -> String {
        "http://127.0.0.1:\(port)/" + path.drop { $0 == "/" }
    }

    /// Closes the listener and every connection (stalled ones included) and
    /// waits for the threads to end. Idempotent; also done on deinit.
    public func stop() {
        core.stop()
    }

    /// Serves the regular files below `path` at `/NAME`; paths with a `..`
    /// segment (percent-encoded too) or leading out of the directory get
    /// 404. Resources set with ``setResource(_:at:)`` take precedence.
    public func serveDirectory(_ path: String) {
        core.state.withLock { $0.directory = path }
    }

    /// Serves `resource` at `path` (with or without leading `/`), replacing
    /// any; a replacement that would have the same automatic ETag gets a new
    /// generation, hence a new ETag.
    public func setResource(_ resource: Resource, at path: String) {
        core.setResource(resource, at: path)
    }

    /// Stops serving the resource at `path` (a directory file there shows again).
    public func removeResource(at path: String) {
        _ = core.state.withLock { $0.resources.removeValue(forKey: ServerCore.key(path)) }
    }

    /// What is served at `path` now, after any change faults; nil if nothing.
    public func resource(at path: String) -> Resource? {
        core.resource(at: path)
    }

    /// Replaces the fault rules and restarts the per-path request counts
    /// that `nthRequest` and `fromRequest` triggers use.
    public func setFaults(_ rules: [FaultRule]) {
        core.state.withLock {
            $0.faults = rules
            $0.requestCounts = [:]
        }
    }

    /// Sets the per-connection rate in bytes per second; nil for no limit.
    public func setRatePerConnection(_ bytesPerSecond: Int?) {
        core.state.withLock { $0.rate = bytesPerSecond.map { max(1, $0) } }
    }

    /// Sets the rate of the whole server in bytes per second, shared by all
    /// its connections; nil for no limit. Applies from each connection's
    /// next slice.
    public func setTotalRate(_ bytesPerSecond: Int?) {
        core.state.withLock { $0.totalRate = bytesPerSecond.map { max(1, $0) } }
    }

    /// Sets the size of the bursts a paced body is sent in (see
    /// ``Configuration/burst``); nil for smooth pacing. Applies from each
    /// connection's next burst or slice.
    public func setBurst(_ bytes: Int?) {
        core.state.withLock { $0.burst = bytes.map { max(1, $0) } }
    }

    /// Sets the most requests processed at once (see
    /// ``Configuration/connectionLimit``); nil for no limit. Applies to the
    /// next request.
    public func setConnectionLimit(_ requests: Int?) {
        core.state.withLock { $0.connectionLimit = requests.map { max(0, $0) } }
    }

    /// Sets how long a signed URL stays valid (see
    /// ``Configuration/urlLifetime``); nil serves plain URLs again. URLs
    /// issued before keep their deadlines.
    public func setURLLifetime(_ seconds: Double?) {
        core.state.withLock { $0.urlLifetime = seconds.map { max(0, $0) } }
    }

    /// Sets the delay before each response's headers, in seconds.
    public func setLatency(_ seconds: Double) {
        core.state.withLock { $0.latency = max(0, seconds) }
    }

    /// A snapshot of the requests and byte counts so far.
    public var statistics: Statistics {
        core.state.withLock { $0.statistics }
    }

    /// Requests being processed now: the places of `connectionLimit` taken.
    /// A place is given back once the response's last byte is written, a
    /// moment after a client may have read it.
    public var requestsInProgress: Int {
        core.state.withLock { $0.activeRequests }
    }

    /// Client connections open now (accepted and not yet closed).
    public var openConnections: Int {
        core.state.withLock { $0.clients.count }
    }

    /// Clears the statistics (not the request counts of fault triggers).
    public func resetStatistics() {
        core.resetStatistics()
    }
}
