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

    /// Bytes per second across the window, 0 until two samples exist.
    var rate: Double {
        guard let first = samples.first, let last = samples.last, last.time > first.time else { return 0 }
        return (Double(last.bytes) - Double(first.bytes)) / (last.time - first.time)
    }
}
