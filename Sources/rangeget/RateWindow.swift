// RateWindow: the rate a progress line shows, measured from the progress the
// display itself has seen. The engine's meter may span a few microseconds when
// a transfer starts (bytes already in the sockets are taken in at once), and
// the first plain line then read 13.9 GiB/s (issue 18). This window says
// nothing until it has watched bytes arrive for a quarter of a second, and then
// never more than the bytes it watched explain.

/// Bytes per second over the last few seconds of progress snapshots.
struct RateWindow {
    /// The shortest stretch of time a rate is computed over.
    static let minimumSpan = 0.25
    /// Samples older than this no longer count.
    static let span = 3.0

    /// Bytes seen to arrive since the first snapshot, at each snapshot's time.
    private var samples: [(time: Double, arrived: Int64)] = []
    private var arrived: Int64 = 0
    private var lastDone: Int64?
    /// Bytes taken from disk (a resumed file of a list) not to count as arrived.
    private var reused: Int64 = 0

    /// Takes a snapshot of `bytesDone` at `time`. The first is the baseline:
    /// what was done before it is not the rate. A drop (a restart, or a
    /// finished file leaving a list's sum) counts as nothing arriving.
    mutating func add(bytesDone: Int64, at time: Double) {
        if let lastDone {
            let grown = max(0, bytesDone - lastDone)
            let fromDisk = min(grown, reused)
            reused -= fromDisk
            arrived = arrived.saturatingAdding(grown - fromDisk)
        } else {
            reused = 0
        }
        lastDone = bytesDone
        samples.append((time, arrived))
        while samples.count > 2, time - samples[1].time >= Self.span { samples.removeFirst() }
    }

    /// Says that `bytes` of the growth to come were read from an earlier run's
    /// data, not fetched (a file of a list that resumes while others run).
    mutating func discount(_ bytes: Int64) {
        if lastDone != nil { reused = reused.saturatingAdding(max(0, bytes)) }
    }

    /// Bytes per second across the window; nil until it spans `minimumSpan`.
    var bytesPerSecond: Double? {
        guard let first = samples.first, let last = samples.last, last.time - first.time >= Self.minimumSpan else {
            return nil
        }
        return Double(last.arrived - first.arrived) / (last.time - first.time)
    }
}
