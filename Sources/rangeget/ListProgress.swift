// ListProgress: the figures of a list's progress line (`-i`). Its bytes are
// those of this run, of the files that ended and of the running ones, so
// the count never drops when a file ends; its rate is the display's, over
// those bytes. The list's size is known only once every file has started
// and told its size: until then each file not yet started (or started but
// silent so far) counts as the mean size of those that told theirs, which
// gives an ETA for the whole list, and the line shows no percent and no
// total (they would be guesses).
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

    /// The line's figures: the bytes done, the list's size (nil while no
    /// file told its size, or a running one has not), and whether that size
    /// is exact. Files not yet started, and those started that have told
    /// nothing yet, count as the mean size told.
    func figures() -> (progress: DownloadProgress, exact: Bool) {
        let unstarted = max(0, files - ended - running.count)
        var done = endedBytes
        var left = 0.0
        var sized = endedSizes
        var unknown = false
        var connections = 0
        for progress in running.values {
            done = done.saturatingAdding(progress.bytesDone)
            connections += progress.activeConnections
            guard let size = progress.totalBytes else {
                unknown = true
                continue
            }
            // Sizes are the servers' word: summed in Double, clamped once.
            left += max(0, Double(size) - Double(progress.bytesDone))
            sized.files += 1
            sized.bytes += Double(size)
        }
        var total: Int64?
        if !unknown, unstarted == 0 || sized.files > 0 {
            let guessed = unstarted == 0 ? 0 : Double(unstarted) * sized.bytes / Double(sized.files)
            let sum = Double(done) + left + guessed
            total = sum >= Double(Int64.max) ? .max : Int64(sum)
        }
        let progress = DownloadProgress(bytesDone: done, totalBytes: total, bytesPerSecond: 0,
                                        activeConnections: connections)
        return (progress, !unknown && unstarted == 0)
    }
}
