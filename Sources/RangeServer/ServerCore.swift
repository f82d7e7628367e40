// The server's shared state and its threads: the listener, the accept loop,
// the resource table, fault selection and statistics. Connection threads
// hold this core, not the public RangeServer, so dropping the last
// reference to the server still stops it.
import Dispatch
import FoundationEssentials
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class ServerCore: Sendable {
    /// One listening period, from start() to stop().
    final class Run: Sendable {
        let listener: Int32
        let stop: StopSignal
        let threads = DispatchGroup()

        init(listener: Int32, stop: StopSignal) {
            self.listener = listener
            self.stop = stop
        }
    }

    struct State {
        var port: UInt16
        var rate: Int?
        var totalRate: Int?
        var burst: Int?
        var latency: Double
        var idleTimeout: Double
        var maxRecordedRequests: Int
        var faults: [FaultRule]
        var connectionLimit: Int?
        /// Requests between head read and the end of their response.
        var activeRequests = 0
        var urlLifetime: Double?
        var signedURLs = SignedURLs()
        var rateChange: RateChange?
        /// The rate change waits for the run's first request.
        var rateChangeArmed = false
        /// Resources by path, without leading `/`.
        var resources: [String: Resource] = [:]
        var directory: String?
        /// Requests per path since the fault rules were set, for triggers.
        var requestCounts: [String: Int] = [:]
        var statistics = Statistics()
        /// Bumped by resetStatistics(), so late byte counts of a response
        /// recorded before the reset do not land on another record.
        var statisticsEpoch = 0
        /// Open client sockets, shut down by stop().
        var clients: Set<Int32> = []
        /// Connections accepted since creation; numbers them in records.
        var connectionCount = 0
        var run: Run?
    }

    /// Where a response's byte counts go in the statistics.
    struct RecordHandle {
        var epoch: Int
        /// Nil when the request was counted but not recorded.
        var index: Int?
    }

    /// Whether a request for a path may be served, with signed URLs on.
    enum Access: Equatable {
        /// Signed URLs are off, or the request's token is valid.
        case granted
        /// A `/sign/NAME` request for a resource: the signed URL to send.
        case signed(String)
        /// A `/sign/NAME` request for nothing.
        case notFound
        /// A resource request without a valid token.
        case forbidden
    }

    /// The path prefix that asks for a signed URL.
    static let signPrefix = "/sign/"

    /// What a request needs from the shared state before it is planned.
    struct Preparation {
        var requestNumber: Int
        var fault: Fault?
        var resource: Resource?
    }

    let state: Mutex<State>
    /// The shared bucket of `totalRate`, across start() and stop().
    let uplink = Uplink()

    init(configuration: RangeServer.Configuration) {
        state = Mutex(
            State(
                port: configuration.port, rate: configuration.ratePerConnection,
                totalRate: configuration.totalRate.map { max(1, $0) }, burst: configuration.burst.map { max(1, $0) },
                latency: configuration.latency,
                idleTimeout: configuration.idleTimeout, maxRecordedRequests: configuration.maxRecordedRequests,
                faults: configuration.faults, connectionLimit: configuration.connectionLimit,
                urlLifetime: configuration.urlLifetime, rateChange: configuration.rateChange))
    }

    // MARK: Listening

    func start() throws(RangeServerError) {
        let port = try state.withLock { state throws(RangeServerError) -> UInt16 in
            guard state.run == nil else { throw .alreadyRunning }
            return state.port
        }
        // A peer that closes early must give EPIPE, not kill the process;
        // sendfile() has no MSG_NOSIGNAL.
        signal(SIGPIPE, SIG_IGN)
        let listener = try Self.listen(port: port)
        let stop: StopSignal
        do {
            stop = try StopSignal()
        } catch {
            close(listener)
            throw error
        }
        let run = Run(listener: listener, stop: stop)
        let boundPort = Self.localPort(of: listener)
        let started = state.withLock { state in
            guard state.run == nil else { return false }
            state.run = run
            state.port = boundPort
            state.rateChangeArmed = state.rateChange != nil
            return true
        }
        guard started else {
            close(listener)
            stop.close()
            throw .alreadyRunning
        }
        run.threads.enter()
        detachThread("rangeserver") { [self] in
            acceptConnections(run)
            run.threads.leave()
        }
    }

    /// Closes the listener and every client socket and waits (up to ten
    /// seconds) for the threads to end. Idempotent.
    func stop() {
        let run = state.withLock { state -> Run? in
            defer { state.run = nil }
            // Wakes threads blocked in recv, send or sendfile.
            for fd in state.clients { shutdown(fd, Int32(SHUT_RDWR)) }
            return state.run
        }
        guard let run else { return }
        run.stop.fire()
        if run.threads.wait(timeout: .now() + 10) == .success {
            run.stop.close()
        }
    }

    var port: UInt16 { state.withLock { $0.port } }

    private static func listen(port: UInt16) throws(RangeServerError) -> Int32 {
        let fd = try retryingInterrupts("socket") {
            socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if bound != 0 {
            let error = RangeServerError.errno("bind 127.0.0.1:\(port)")
            close(fd)
            throw error
        }
        if Glibc.listen(fd, SOMAXCONN) != 0 {
            let error = RangeServerError.errno("listen 127.0.0.1:\(port)")
            close(fd)
            throw error
        }
        // Non-blocking, so accept() after poll() cannot hang on a
        // connection the client already abandoned.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return fd
    }

    private static func localPort(of fd: Int32) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    private func acceptConnections(_ run: Run) {
        defer { close(run.listener) }
        while run.stop.wait(forReadable: run.listener, timeout: nil) == .ready {
            let client = accept(run.listener, nil, nil)
            if client < 0 {
                switch errno {
                case EINTR, EAGAIN, ECONNABORTED, EPROTO: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM: _ = run.stop.sleep(0.01)
                default: return
                }
                continue
            }
            setCloseOnExec(client)
            var one: Int32 = 1
            setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let number = state.withLock { state -> Int? in
                guard state.run === run else { return nil }
                state.clients.insert(client)
                state.statistics.connectionsAccepted += 1
                state.connectionCount += 1
                return state.connectionCount
            }
            guard let number else {
                close(client)
                return
            }
            run.threads.enter()
            detachThread("rangeserver conn") { [self] in
                ServerConnection(core: self, socket: ClientSocket(fd: client), number: number, stop: run.stop).run()
                state.withLock { state in
                    // Closed under the lock, so stop() never shuts down a
                    // descriptor number that was already reused.
                    state.clients.remove(client)
                    close(client)
                }
                run.threads.leave()
            }
        }
    }

    // MARK: Resources

    /// The table key of a path: no leading `/`.
    static func key(_ path: String) -> String {
        String(path.drop { $0 == "/" })
    }

    func setResource(_ resource: Resource, at path: String) {
        state.withLock { state in
            var resource = resource
            // Replacing a resource with one that would carry the same ETag
            // must still change it, as a replaced file would.
            if let old = state.resources[Self.key(path)], resource.hasAutomaticETag, old.etag == resource.etag {
                resource.generation = old.generation + 1
            }
            state.resources[Self.key(path)] = resource
        }
    }

    /// The resource served at `path`: the table's, else the directory's file.
    func resource(at path: String) -> Resource? {
        let (resource, directory) = state.withLock { ($0.resources[Self.key(path)], $0.directory) }
        return resource ?? directory.flatMap { Self.fileResource(in: $0, path: Self.key(path)) }
    }

    /// The regular file at `path` below `directory`, or nil when there is
    /// none or the path leaves the directory (`..`, or a symbolic link).
    static func fileResource(in directory: String, path: String) -> Resource? {
        let components = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !path.contains("\0"), !components.contains("..") else { return nil }
        guard let root = realPath(directory), let resolved = realPath(directory + "/" + path),
            resolved.hasPrefix(root == "/" ? "/" : root + "/")
        else { return nil }
        var info = stat()
        guard stat(resolved, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Resource.file(resolved)
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    // MARK: Requests

    /// Notes a request whose head was read: the first since the start or
    /// the last reset sets ``Statistics/firstRequestAt``, and the first of a
    /// run starts the clock of the rate change.
    func noteRequest() {
        let due = state.withLock { state -> (RateChange, Run)? in
            if state.statistics.firstRequestAt == nil { state.statistics.firstRequestAt = Date() }
            guard state.rateChangeArmed, let change = state.rateChange, let run = state.run else { return nil }
            state.rateChangeArmed = false
            return (change, run)
        }
        guard let (change, run) = due else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + max(0, change.after)) { [weak self] in
            self?.state.withLock { state in
                // A server stopped (and maybe started again) since keeps its rates.
                guard state.run === run else { return }
                state.rate = change.ratePerConnection.map { max(1, $0) }
                state.totalRate = change.totalRate.map { max(1, $0) }
            }
        }
    }

    /// Takes one of the connection limit's places for a request, or counts
    /// the request as refused when they are all taken.
    func admit() -> Bool {
        state.withLock { state in
            if let limit = state.connectionLimit, state.activeRequests >= limit {
                state.statistics.refusedOverLimit += 1
                return false
            }
            state.activeRequests += 1
            return true
        }
    }

    /// Gives back the place ``admit()`` took.
    func release() {
        state.withLock { $0.activeRequests -= 1 }
    }

    /// Whether a request for `path` (decoded) with `target` (as sent) is
    /// served, with signed URLs on; issues and counts signed URLs and counts
    /// refusals.
    func access(path: String, target: String) -> Access {
        let signPath = path.hasPrefix(Self.signPrefix) ? String(path.dropFirst(Self.signPrefix.count)) : nil
        let exists = signPath.map { resource(at: $0) != nil } ?? false
        return state.withLock { state in
            guard let lifetime = state.urlLifetime else { return .granted }
            let now = MonotonicClock.now()
            if let signPath {
                guard exists else { return .notFound }
                let token = state.signedURLs.issue(for: Self.key(signPath), lifetime: lifetime, now: now)
                state.statistics.urlsSigned += 1
                // The name as the client wrote it, escapes kept, when it can be cut from the target.
                let written =
                    target.hasPrefix(Self.signPrefix)
                    ? String(target.dropFirst(Self.signPrefix.count).prefix { $0 != "?" }) : signPath
                return .signed("http://127.0.0.1:\(state.port)/\(written)?token=\(token)")
            }
            let token = SignedURLs.token(inTarget: target)
            guard state.signedURLs.admits(token: token, path: Self.key(path), now: now) else {
                state.statistics.refusedForToken += 1
                return .forbidden
            }
            return .granted
        }
    }

    /// Counts the request on its path, picks the first fault rule that
    /// matches and applies, and finds the resource (changing it first when
    /// the fault says the file was replaced).
    func prepare(method: String, path: String, rangeStart: Int64?) -> Preparation {
        let key = Self.key(path)
        let (number, fault, registered, directory) = state.withLock { state in
            let number = (state.requestCounts[key] ?? 0) + 1
            state.requestCounts[key] = number
            let rule = state.faults.first {
                $0.fault.applies(to: method)
                    && $0.trigger.matches(method: method, requestNumber: number, rangeStart: rangeStart)
            }
            return (number, rule?.fault, state.resources[key], state.directory)
        }
        var resource = registered ?? directory.flatMap { Self.fileResource(in: $0, path: key) }
        let newSize: Int64??
        switch fault {
        case .changeContent?: newSize = .some(nil)
        case .changeSize(let size)?: newSize = .some(size)
        default: newSize = nil
        }
        if let newSize, let found = resource {
            resource = state.withLock { state in
                let changed = (state.resources[key] ?? found).replaced(newSize: newSize)
                state.resources[key] = changed
                return changed
            }
        }
        return Preparation(requestNumber: number, fault: fault, resource: resource)
    }

    var latency: Double { state.withLock { $0.latency } }
    /// The per-connection and the shared rate and the burst size, read together.
    var rates: (perConnection: Int?, total: Int?, burst: Int?) {
        state.withLock { ($0.rate, $0.totalRate, $0.burst) }
    }
    var idleTimeout: Double { state.withLock { $0.idleTimeout } }

    // MARK: Statistics

    func record(_ record: RequestRecord) -> RecordHandle {
        state.withLock { state in
            guard state.statistics.requests.count < state.maxRecordedRequests else {
                state.statistics.requestsNotRecorded += 1
                return RecordHandle(epoch: state.statisticsEpoch, index: nil)
            }
            state.statistics.requests.append(record)
            return RecordHandle(epoch: state.statisticsEpoch, index: state.statistics.requests.count - 1)
        }
    }

    func addBodyBytes(_ count: Int, to handle: RecordHandle) {
        state.withLock { state in
            state.statistics.bodyBytesSent += Int64(count)
            if handle.epoch == state.statisticsEpoch, let index = handle.index {
                state.statistics.requests[index].bodyBytesSent += Int64(count)
            }
        }
    }

    func resetStatistics() {
        state.withLock { state in
            state.statistics = Statistics()
            state.statisticsEpoch += 1
        }
    }
}
