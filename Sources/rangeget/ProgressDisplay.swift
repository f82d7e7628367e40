// ProgressDisplay: what a running download looks like. On a terminal, one
// line redrawn in place at most ten times a second: a map of the file (done,
// in flight, missing), percent, bytes, rate, ETA, connections; trimmed to the
// terminal's width on every draw, so a resize never wraps it. When stderr is
// not a terminal: a plain line every few seconds, the first once the run has
// taken a second (a short run in a script says only how it ended). Nothing
// with -q. The rate
// and ETA are the display's own (RateWindow), shown once there is one.
import FoundationEssentials
import RangeGet
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class ProgressDisplay: Sendable {
    private enum Mode { case off, terminal, lines }
    private let mode: Mode
    private let unicode: Bool
    private let state = Mutex(State())
    /// When the display was made: off a terminal, the first line waits `firstLineAfter` seconds.
    private let started = MonotonicClock.now()
    static let firstLineAfter = 1.0

    private struct State {
        var drawn = false
        var lastDraw = -Double.infinity
        var rate = RateWindow()
    }

    /// Draws on stderr unless `quiet`: in place on a terminal, else as plain lines.
    init(quiet: Bool) {
        if quiet {
            mode = .off
        } else {
            mode = isatty(STDERR_FILENO) == 1 ? .terminal : .lines
        }
        let names: [String] = ["LC_ALL", "LC_CTYPE", "LANG"]
        let locale = names.compactMap { name in getenv(name).map { String(cString: $0) } }.first { !$0.isEmpty } ?? ""
        unicode = locale.uppercased().contains("UTF-8") || locale.uppercased().contains("UTF8")
    }

    /// False with -q: nothing is ever drawn.
    var draws: Bool { mode != .off }

    /// Draws `progress` when a draw is due (`prefix`, read only then, goes
    /// before it): with a map of the file when `mapped`. While
    /// `unknownSizes` files (of a list) have not told their sizes, the
    /// total is a lower bound: the total, percent and ETA show as bounds,
    /// followed by that count.
    func show(
        _ progress: DownloadProgress, prefix: @autoclosure () -> String = "", mapped: Bool = true,
        unknownSizes: Int = 0
    ) {
        let now = MonotonicClock.now()
        let interval = mode == .terminal ? 0.1 : 5.0
        let draw: (due: Bool, rate: Double?) = state.withLock { state in
            state.rate.add(bytesDone: progress.bytesDone, at: now)
            guard mode != .off, now - state.lastDraw >= interval,
                mode == .terminal || now - started >= Self.firstLineAfter
            else { return (false, nil) }
            state.lastDraw = now
            state.drawn = mode == .terminal
            return (true, state.rate.bytesPerSecond)
        }
        guard draw.due else { return }
        var progress = progress
        progress.bytesPerSecond = draw.rate ?? 0
        let prefix = prefix()
        var figures = prefix.isEmpty ? "" : prefix + " "
        let bound = unknownSizes > 0
        if let total = progress.totalBytes, total > 0 {
            figures += (bound ? "<= " : "") + String(format1: Double(progress.bytesDone) * 100 / Double(total)) + "%  "
            figures += ByteCount.format(progress.bytesDone) + " / " + (bound ? ">= " : "") + ByteCount.format(total)
        } else {
            figures += ByteCount.format(progress.bytesDone)
        }
        if draw.rate != nil { figures += "  " + ByteCount.format(Int64(saturating: progress.bytesPerSecond)) + "/s" }
        if let left = progress.secondsLeft { figures += "  ETA " + (bound ? ">= " : "") + DurationText.format(left) }
        if bound { figures += "  \(unknownSizes) size\(unknownSizes == 1 ? "" : "s") unknown" }
        figures += "  \(progress.activeConnections) conn"
        switch mode {
        case .off:
            break
        case .lines:
            write("rangeget: " + figures + "\n")
        case .terminal:
            let width = Self.terminalWidth()
            let cells = min(60, width - figures.count - 4)
            var line = figures
            if mapped, cells >= 10, let total = progress.totalBytes, total > 0 {
                line = "[" + map(progress, total: total, cells: cells) + "] " + figures
            }
            if line.count >= width { line = String(line.prefix(max(0, width - 1))) }
            write("\r" + line + "\u{1B}[K")
        }
    }

    /// Says that `bytes` about to show up as done were read from disk (a
    /// resume), so that the rate does not count them as fetched.
    func discount(_ bytes: Int64) {
        state.withLock { $0.rate.discount(bytes) }
    }

    /// Prints a message on its own line, escaped (it may quote a server); the
    /// progress line is redrawn below it later.
    func message(_ text: String) {
        let wasDrawn = state.withLock { state in
            defer {
                state.drawn = false
                state.lastDraw = -Double.infinity
            }
            return state.drawn
        }
        write((wasDrawn ? "\r\u{1B}[K" : "") + "rangeget: " + TerminalText.escaped(text) + "\n")
    }

    /// Removes the progress line.
    func clear() {
        let wasDrawn = state.withLock { state in
            defer { state.drawn = false }
            return state.drawn
        }
        if wasDrawn { write("\r\u{1B}[K") }
    }

    /// One cell per slice of the file: done, being fetched, or missing.
    private func map(_ progress: DownloadProgress, total: Int64, cells: Int) -> String {
        let (done, active, missing): (Character, Character, Character) = unicode ? ("█", "▒", "·") : ("#", "=", ".")
        var text = ""
        for cell in 0..<cells {
            let slice = Self.slice(cell, of: cells, total: total)
            if progress.completed.contains(slice) {
                text.append(done)
            } else if progress.inFlight.contains(where: { $0.start < slice.end && slice.start < $0.end }) {
                text.append(active)
            } else {
                text.append(missing)
            }
        }
        return text
    }

    /// The bytes cell `cell` of `cells` stands for in a file of `total` bytes
    /// (`total * cell / cells` without the product, which overflows near
    /// Int64.max); at least one byte, never past the end.
    static func slice(_ cell: Int, of cells: Int, total: Int64) -> ByteRange {
        func boundary(_ cell: Int) -> Int64 {
            let (quotient, remainder) = total.quotientAndRemainder(dividingBy: Int64(cells))
            return quotient * Int64(cell) + remainder * Int64(cell) / Int64(cells)
        }
        let start = boundary(cell)
        return ByteRange(start, min(total, max(start + 1, boundary(cell + 1))))
    }

    private static func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    private func write(_ text: String) {
        writeToStandardError(text)
    }
}
