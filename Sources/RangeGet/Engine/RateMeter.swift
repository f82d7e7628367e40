// RateMeter: a throughput over a sliding window of samples.

/// Throughput over the last `window` seconds, from (time, bytes) samples.
struct RateMeter {
    private var samples: [(time: Double, bytes: Int64)] = []
    private let window: Double

    init(window: Double) {
        self.window = window
    }

    mutating func add(bytes: Int64, at time: Double) {
        samples.append((time, bytes))
        while samples.count > 2, let second = samples.dropFirst().first, time - second.time >= window {
            samples.removeFirst()
        }
    }

    /// The time of the latest sample.
    var newest: Double { samples.last?.time ?? -.infinity }

    /// Seconds the samples span.
    var span: Double { (samples.last?.time ?? 0) - (samples.first?.time ?? 0) }

    /// Bytes per second from the first sample at or after `start` to the
    /// latest; nil when they span no time.
    func rate(since start: Double) -> Double? {
        guard let first = samples.first(where: { $0.time >= start }), let last = samples.last,
            last.time > first.time
        else { return nil }
        return (Double(last.bytes) - Double(first.bytes)) / (last.time - first.time)
    }

    /// Bytes per second from the latest sample at least `seconds` before
    /// the newest to the newest; nil when there is none that old.
    func rate(over seconds: Double) -> Double? {
        guard let last = samples.last, let first = samples.last(where: { $0.time <= last.time - seconds }),
            last.time > first.time
        else { return nil }
        return (Double(last.bytes) - Double(first.bytes)) / (last.time - first.time)
    }

    /// Bytes per second across the window, 0 until two samples exist.
    var rate: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        return (Double(last.bytes) - Double(first.bytes)) / (last.time - first.time)
    }
}

/// The longest pause between deliveries seen lately (a bursty server's
/// sleep: nginx sends 2 MiB, then waits): a larger one replaces it at
/// once, a smaller one once `memory` seconds have passed.
struct RecentPause {
    private(set) var seconds = 0.0
    private var seenAt = 0.0
    let memory: Double

    init(memory: Double) {
        self.memory = memory
    }

    /// Notes the longest silence of `transfers` that have delivered.
    mutating func note(_ transfers: [Connection], now: Double) {
        let silence = transfers.filter(\.hasDelivered).map { $0.silence(now: now) }.max() ?? 0
        if silence >= seconds || now - seenAt > memory { (seconds, seenAt) = (silence, now) }
    }
}
