// `rangeget report TRACE [-o FILE.html]`: draws a `--trace` file
// (docs/TRACE.md) as one self-contained HTML page. The trace is untrusted
// input: a file that is not a trace (not JSON, another shape, a value of the
// wrong type or out of range, over 256 MiB) is refused with one line naming
// what is wrong and exit 2; a file that cannot be read or written is exit 4.
import FoundationEssentials
import RangeGet
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct ReportSettings {
    var output: String?
    var help = false
}

enum ReportCommand {
    static var command: Command<ReportSettings> {
        Command(
            name: "report",
            usage: [Usage("[OPTIONS] TRACE", "draw a trace of downloads as one HTML page")],
            summary: """
                Draw TRACE, a file --trace wrote, as one self-contained HTML page (inline SVG and CSS, no script):
                for each download, one lane per TCP connection with its transfers colored by mirror and its steals,
                races, stalls and retries marked; the rate over time, in all and per mirror; and a map of the
                file's bytes by mirror.
                """,
            options: [
                .value("o", "output", "FILE", "the page to write (default: TRACE with .html for .json; - for stdout)") {
                    $0.output = $1
                },
                .flag("h", "help", "show this help") { $0.help = true }
            ],
            details: """
                A trace with no transfers makes a page that says there is nothing to draw (and a note on stderr).
                The page draws at most 20 downloads, 512 lanes and 5000 transfers and markers per download, and
                says what it left out. A file that is not a trace (not JSON, not an object with a traceEvents
                array, a value of the wrong type or out of range, over 256 MiB) is exit 2, with what is wrong;
                one that cannot be read, or a page that cannot be written, is exit 4.
                """
        )
    }

    /// The largest trace read: a trace rangeget writes stays far under it.
    static let largestTrace = 256 << 20

    static func run(_ arguments: [String]) -> Int32 {
        var settings = ReportSettings()
        let operands: [String]
        do {
            operands = try command.parse(arguments, into: &settings)
        } catch {
            return fail(error.description, .usage)
        }
        if settings.help {
            print(command.help)
            return ExitCode.success.rawValue
        }
        guard operands.count == 1, let source = operands.first else {
            return fail("report needs one TRACE file (see 'rangeget report --help')", .usage)
        }
        let output = settings.output ?? defaultOutput(for: source)
        if output != "-", sameFile(output, source) {
            return fail("\(output) is the trace itself: give the page another name with -o", .usage)
        }
        let data: Data
        switch read(source) {
        case let .failure(failure): return fail(failure.message, failure.code)
        case let .success(bytes): data = bytes
        }
        let trace: TraceFile
        do {
            trace = try TraceFile.decode(data)
        } catch {
            return fail("\(source) is not a trace: \(error.description)", .usage)
        }
        let report = TraceReport(trace.events)
        let page = ReportPage.html(
            report, source: source, writer: trace.writer, eventsLeftOut: trace.eventsLeftOut)
        if let failure = PageFile.write(page, to: output) { return fail(failure, .local) }
        if report.transferCount == 0 {
            warn("\(source) has no transfers: \(output) says there is nothing to draw")
        }
        return ExitCode.success.rawValue
    }

    /// `trace.html` for `trace.json`; `trace.html` for `trace` too.
    static func defaultOutput(for source: String) -> String {
        (source.hasSuffix(".json") ? String(source.dropLast(".json".count)) : source) + ".html"
    }

    /// Why a file could not be had, and the exit code that says so.
    struct Failure: Error {
        var message: String
        var code: ExitCode
    }

    /// The bytes of the file at `path`, refused past `largestTrace` before
    /// more is read (a regular file by its size, anything else as it comes).
    static func read(_ path: String) -> Result<Data, Failure> {
        let descriptor = retryingOnInterrupt { open(path, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else {
            return .failure(Failure(message: "cannot read \(path): \(systemReason(errno))", code: .local))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            return .failure(Failure(message: "cannot read \(path): \(systemReason(errno))", code: .local))
        }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            return .failure(Failure(message: "cannot read \(path): \(systemReason(EISDIR))", code: .local))
        }
        let tooLarge = Failure(
            message: "\(path) is larger than 256 MiB: not a trace (rangeget's traces stay far under it)",
            code: .usage)
        if (info.st_mode & S_IFMT) == S_IFREG, info.st_size > largestTrace { return .failure(tooLarge) }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                retryingOnInterrupt { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }
            }
            if count < 0 {
                return .failure(Failure(message: "cannot read \(path): \(systemReason(errno))", code: .local))
            }
            if count == 0 { return .success(data) }
            guard data.count + count <= largestTrace else { return .failure(tooLarge) }
            chunk.withUnsafeBytes { data.append($0.bindMemory(to: UInt8.self).baseAddress!, count: count) }
        }
    }

    /// True when `output` names the file `source` does.
    private static func sameFile(_ output: String, _ source: String) -> Bool {
        var first = stat()
        var second = stat()
        guard stat(output, &first) == 0, stat(source, &second) == 0 else { return false }
        return first.st_dev == second.st_dev && first.st_ino == second.st_ino
    }
}
