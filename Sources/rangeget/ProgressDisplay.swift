// ProgressDisplay: one line on a terminal, redrawn in place from the
// download's progress events: bytes, percent, rate, ETA, connections.
import Glibc
import FoundationEssentials
import RangeGet
import Synchronization

final class ProgressDisplay: Sendable {
    private let enabled: Bool
    private let drawn = Mutex<Bool>(false)

    /// Draws on stderr only when it is a terminal and output is not quiet.
    init(quiet: Bool) {
        enabled = !quiet && isatty(STDERR_FILENO) == 1
    }

    func show(_ progress: DownloadProgress, prefix: String = "") {
        guard enabled else { return }
        var line = (prefix.isEmpty ? "" : prefix + " ") + "  " + ByteCount.format(progress.bytesDone)
        if let total = progress.totalBytes {
            line += " / " + ByteCount.format(total)
            let percent = total > 0 ? Int(Double(progress.bytesDone) * 100 / Double(total)) : 100
            line += "  \(percent)%"
        }
        line += "  " + ByteCount.format(Int64(progress.bytesPerSecond)) + "/s"
        if let left = progress.secondsLeft { line += "  ETA " + Duration.format(left) }
        line += "  [\(progress.activeConnections) conn]"
        write("\r" + line + "\u{1B}[K")
        drawn.withLock { $0 = true }
    }

    /// Prints a message on its own line, keeping the progress line intact below it.
    func message(_ text: String) {
        let wasDrawn = drawn.withLock { value in defer { value = false }; return value }
        write((wasDrawn ? "\r\u{1B}[K" : "") + "rangeget: " + text + "\n")
    }

    /// Removes the progress line.
    func clear() {
        let wasDrawn = drawn.withLock { value in defer { value = false }; return value }
        if wasDrawn { write("\r\u{1B}[K") }
    }

    private func write(_ text: String) {
        writeToStandardError(text)
    }
}
