// MirrorBenchmark: `rangeget bench URL...`. For each mirror of one file: the
// probe time, time to first byte, HTTP version and server, throughput on one
// connection and on N (each for a few seconds, through the real engine) and
// so whether its rate is per connection or shared, the TCP connections the
// N-connection download opened, and digests of a few small ranges at the
// same places on every mirror (SpotCheck.samples: one at a random place in
// each equal stripe of the file), so a mirror serving other bytes is
// caught before anyone splices from it. What to use is MirrorChoice's call.
internal import Digests
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Figures for one mirror.
package struct MirrorMeasurement: Sendable, Codable, Equatable {
    /// The URL measured.
    package var url: String
    /// Why it could not be measured, nil when it could.
    package var error: String?
    /// Seconds the probe took (HEAD, or the GET fallback).
    package var probeSeconds: Double?
    /// Seconds from a one-byte ranged GET to its first byte.
    package var timeToFirstByte: Double?
    /// "1.1", "2", ...
    package var httpVersion: String?
    /// The `Server` header.
    package var server: String?
    /// The file's size as this mirror reports it.
    package var size: Int64?
    /// Bytes per second on one connection (the median of the runs).
    package var oneConnection: Double?
    /// Bytes per second on `connections` connections (the median of the runs).
    package var manyConnections: Double?
    /// Each run's bytes per second on one connection, in run order
    /// (`MirrorBenchmark.runs`): the spread behind `oneConnection`.
    package var oneConnectionRuns: [Double] = []
    /// Each run's bytes per second on `connections` connections, in run
    /// order: the spread behind `manyConnections`.
    package var manyConnectionsRuns: [Double] = []
    /// How the rate grew from one connection to `connections`; nil when
    /// either was not measured or both were on one connection.
    package var limit: RateLimit?
    /// TCP connections the `connections`-connection download opened, its probe included.
    package var tcpConnections: Int?
    /// SHA-256 of each sampled range, in offset order.
    package var sampleDigests: [String] = []
    /// False when a sampled range differs from what most mirrors serve.
    package var sameBytes: Bool?

    /// What limits a mirror's rate, told from its total on 1 and on N connections.
    package enum RateLimit: String, Sendable, Codable, Equatable {
        /// Each connection is capped (nginx's limit_rate, per-flow shaping):
        /// N connections gave at least 3/4 of N times one connection's rate.
        case perConnection = "per-connection"
        /// One uplink for all connections: N gave at most 1.25 times one's rate.
        case shared = "shared"
        /// In between: more connections help up to a ceiling.
        case partlyShared = "partly shared"

        /// The kind `one` (bytes per second on 1 connection) and `many` (on
        /// `connections`) show; nil without two rates to compare.
        package init?(one: Double?, many: Double?, connections: Int) {
            guard connections > 1, let one, let many, one > 0, many > 0 else { return nil }
            let speedup = many / one
            if speedup >= 0.75 * Double(connections) {
                self = .perConnection
            } else if speedup <= 1.25 {
                self = .shared
            } else {
                self = .partlyShared
            }
        }
    }
}

/// How to benchmark the mirrors of one file.
package struct MirrorBenchmark: Sendable {
    /// The mirrors.
    package var urls: [String]
    /// Connections for the multi-connection measurement.
    package var connections = 8
    /// Seconds per throughput measurement. 1.25 s keeps a bench of three
    /// mirrors (two measurements each, one after another) within 10 s.
    package var seconds = 1.25
    /// Times each throughput is measured; the figures are the medians, and
    /// the runs show the spread.
    package var runs = 1
    /// Ranges sampled per mirror, and their length.
    package var samples = 4
    package var sampleLength: Int64 = 64 << 10
    /// Request settings (headers, TLS, timeouts).
    package var transfer = TransferOptions()
    /// Directory for the throwaway throughput downloads.
    package var scratchDirectory = "/tmp"

    /// A benchmark of `urls` with default settings.
    package init(urls: [String]) {
        self.urls = urls
    }

    /// Measures every mirror, one after another so they don't share the link.
    package func run(onStep: @Sendable (String) -> Void = { _ in }) -> [MirrorMeasurement] {
        var results = urls.map { MirrorMeasurement(url: $0) }
        var ranges: [ByteRange]?
        for index in urls.indices {
            let url = urls[index]
            onStep("probing \(url)")
            let started = MonotonicClock.now()
            let remote: RemoteFile
            do {
                let transfer = transfer
                remote = try ThreadExecutor.run { () async throws(DownloadError) in
                    try await Prober(options: transfer).probe(url)
                }
            } catch {
                results[index].error = error.description
                continue
            }
            results[index].probeSeconds = MonotonicClock.now() - started
            results[index].size = remote.size
            if let first = try? firstByte(of: remote.effectiveURL) {
                results[index].timeToFirstByte = first.seconds
                results[index].httpVersion = first.httpVersion
                results[index].server = first.server
            }
            guard let size = remote.size, remote.acceptsRanges else {
                results[index].error = "no byte ranges: cannot be used as a mirror"
                continue
            }
            if ranges == nil {
                var random = SystemRandomNumberGenerator()
                ranges = SpotCheck.samples(size: size, count: samples, length: sampleLength, using: &random)
            }
            results[index].sampleDigests = (ranges ?? []).map { range in
                (try? digest(of: remote, range: range)) ?? "error"
            }
            for run in 0..<runs {
                let suffix = runs > 1 ? " (run \(run + 1) of \(runs))" : ""
                onStep("measuring \(url) on 1 connection" + suffix)
                if let rate = throughput(url, connections: 1).rate { results[index].oneConnectionRuns.append(rate) }
                onStep("measuring \(url) on \(connections) connections" + suffix)
                let many = throughput(url, connections: connections)
                if let rate = many.rate { results[index].manyConnectionsRuns.append(rate) }
                results[index].tcpConnections = many.tcpConnections
            }
            results[index].oneConnection = Self.median(results[index].oneConnectionRuns)
            results[index].manyConnections = Self.median(results[index].manyConnectionsRuns)
            results[index].limit = MirrorMeasurement.RateLimit(
                one: results[index].oneConnection, many: results[index].manyConnections, connections: connections)
        }
        markDifferences(&results)
        return results
    }

    /// The middle value of `values` (the mean of the middle two), nil for none.
    static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// Flags the mirrors outside the largest group whose sampled digests
    /// all agree (the vote a download takes, `MirrorVote.largestGroup`),
    /// and every mirror when that group is no more than half of those
    /// sampled: a download must go on with the first mirror's bytes, a
    /// recommendation need not guess.
    private func markDifferences(_ results: inout [MirrorMeasurement]) {
        let measured = results.indices.filter { !results[$0].sampleDigests.isEmpty }
        let answers = measured.map { results[$0].sampleDigests.contains("error") ? nil : results[$0].sampleDigests }
        let agreeing = MirrorVote.largestGroup(answers)
        let majority = agreeing.count * 2 > measured.count
        for (position, index) in measured.enumerated() {
            results[index].sameBytes = majority && agreeing.contains(position)
        }
    }

    /// Bytes per second of a real download on `connections` connections,
    /// stopped after `seconds`, and the TCP connections it opened.
    private func throughput(_ url: String, connections: Int) -> (rate: Double?, tcpConnections: Int) {
        let path = scratchDirectory + "/rangeget-bench-\(getpid())-\(connections).tmp"
        var options = DownloadOptions()
        options.connections = connections
        options.transfer = transfer
        options.overwrite = true
        options.restart = true
        let download = Download(url: url, destination: .file(path), options: options)
        let samples = Mutex<[(time: Double, bytes: Int64)]>([])
        let limit = seconds
        // Progress arrives about ten times a second: stop once data flowed for `seconds`.
        let result = try? download.run { event in
            guard case let .progress(progress) = event, progress.bytesDone > 0 else { return }
            let now = MonotonicClock.now()
            let first = samples.withLock { points in
                points.append((now, progress.bytesDone))
                return points[0].time
            }
            if now - first >= limit { download.stop() }
        }
        unlink(path)
        try? PartialFile.discard(at: PartialFiles(output: path).data, calls: options.systemCalls)
        // A stopped download returns no result; its tally has the figure, probe included.
        let opened = download.controller.tcpConnectionsOpened
        let points = samples.withLock { $0 }.filter { $0.bytes > 0 }
        // Finished within the measurement: the whole file over the whole run.
        if let result { return (result.seconds > 0 ? Double(result.size) / result.seconds : nil, opened) }
        guard let first = points.first, let last = points.last, last.time > first.time else { return (nil, opened) }
        return (Double(last.bytes - first.bytes) / (last.time - first.time), opened)
    }

    /// A one-byte ranged GET: time to first byte, HTTP version, Server header.
    private func firstByte(of url: String) throws -> (seconds: Double, httpVersion: String?, server: String?) {
        let fetched = try RangeFetch(url: url, range: ByteRange(0, 1), options: transfer, headersGivenFor: url)
        return (fetched.timeToFirstByte, fetched.httpVersion, fetched.head["server"])
    }

    /// SHA-256 of `range` as `remote` serves it: only a usable 206 for
    /// exactly that range of the file its probe found counts.
    private func digest(of remote: RemoteFile, range: ByteRange) throws -> String {
        let fetched = try RangeFetch(
            url: remote.effectiveURL, range: range, options: transfer, headersGivenFor: remote.url)
        guard case let .success(bytes) = fetched.bytes(of: range, expected: Expectation(remote)) else {
            throw DownloadError.server(url: remote.effectiveURL, message: "sample \(range) not served as asked")
        }
        return bytes.withUnsafeBytes { DigestAlgorithm.sha256.hex(of: $0) }
    }
}
