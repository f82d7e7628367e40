// ListProgress: the figures of a list's progress line (`-i`). Its bytes are
// those of this run, of the files that ended and of the running ones, so
// the count never drops when a file ends; its rate is the display's, over
// those bytes. The list's size is known only once every file has told its
// size. Until then the line counts each file of unknown size (not started,
// or started and silent so far) as empty: its total, percent and ETA are
// bounds (`>= 1.1 GiB`, `<= 45%`, `ETA >= 0:05`) with the number of sizes
// still unknown, never a guess. (A guess, each unknown file at the mean
// size told, read `ETA 0:05` for 17 s while six large files came after
// twenty small ones.)
import RangeGet

struct ListProgress {
    /// The files of the list, and those that ended.
    private let files: Int
    private var ended = 0
    /// The progress of each running file that told any, by its place in the list.
    private var running: [Int: DownloadProgress] = [:]
    /// Bytes done by the files that ended (each one's last figure), and the
    /// sizes those files told.
    private var endedBytes: Int64 = 0
    private var endedSizes = (files: 0, bytes: 0.0)

    /// The progress of a list of `files` files.
    init(files: Int) {
        self.files = files
    }

    /// The latest progress of file `index`.
    mutating func update(_ index: Int, _ progress: DownloadProgress) {
        running[index] = progress
    }

    /// File `index` ended: its bytes and its size stay in the figures.
    mutating func end(_ index: Int) {
        ended += 1
        guard let last = running.removeValue(forKey: index) else { return }
        endedBytes = endedBytes.saturatingAdding(last.bytesDone)
        if let size = last.totalBytes {
            endedSizes.files += 1
            endedSizes.bytes += Double(size)
        }
    }

    /// The line's figures: the bytes done, and the list's size, or a lower
    /// bound of it while `unknownSizes` files have not told theirs (nil
    /// while none has told any and some file has yet to).
    func figures() -> (progress: DownloadProgress, unknownSizes: Int) {
        var unknown = max(0, files - ended - running.count)
        var done = endedBytes
        var left = 0.0
        var connections = 0
        var anyKnown = endedSizes.files > 0
        for progress in running.values {
            done = done.saturatingAdding(progress.bytesDone)
            connections += progress.activeConnections
            guard let size = progress.totalBytes else {
                unknown += 1
                continue
            }
            anyKnown = true
            // Sizes are the servers' word: summed in Double, clamped once.
            left += max(0, Double(size) - Double(progress.bytesDone))
        }
        var total: Int64?
        if unknown == 0 || anyKnown {
            let sum = Double(done) + left
            total = sum >= Double(Int64.max) ? .max : Int64(sum)
        }
        let progress = DownloadProgress(
            bytesDone: done, totalBytes: total, bytesPerSecond: 0,
            activeConnections: connections)
        return (progress, unknown)
    }
}
