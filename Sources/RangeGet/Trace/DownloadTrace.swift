// DownloadTrace: a timeline of downloads in the Chrome Trace Event format
// (docs/TRACE.md), which Perfetto and chrome://tracing open and `rangeget
// report` draws. Each download given it (`DownloadOptions.trace`) records
// its events as they are emitted, stamped with the monotonic clock
// (TraceRecorder); `write()` puts them in the file. The events are the
// library's own: no second bookkeeping.
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A trace of the downloads it is given to (``DownloadOptions/trace``),
/// written to `path` by ``write()`` in the Chrome Trace Event format:
/// open it in Perfetto (ui.perfetto.dev) or `chrome://tracing`, or draw
/// it with `rangeget report`. Each download is a process of the trace, each
/// TCP connection a lane of it. Safe to share by the downloads of a list.
public final class DownloadTrace: Sendable {
    /// Where ``write()`` puts the trace.
    public let path: String
    /// The monotonic time the trace counts from.
    let origin: Double

    private struct State {
        /// The events so far, each a JSON object.
        var events: [String] = []
        /// Their bytes, against `limit`.
        var bytes = 0
        /// The next download's process number.
        var nextProcess = 1
        /// Events left out once the trace reached its limit.
        var dropped = 0
    }

    private let state = Mutex(State())

    /// The most bytes of events kept: past them, samples are left out, and
    /// past twice as many, everything (a list of 20,000 files stays bounded).
    static let limit = 64 << 20

    /// A trace to be written to `path` (nothing is written before ``write()``).
    public init(path: String) {
        self.path = path
        origin = MonotonicClock.now()
    }

    /// A recorder for one download, named `name` in the trace, of the
    /// mirrors `mirrors` (in the order they were given).
    func recorder(named name: String, mirrors: [String]) -> TraceRecorder {
        let process = state.withLock { state in
            defer { state.nextProcess += 1 }
            return state.nextProcess
        }
        let recorder = TraceRecorder(trace: self, process: process, mirrors: mirrors)
        recorder.begin(named: name)
        return recorder
    }

    /// Adds `events` (JSON objects); `sample`: they may be left out once
    /// the trace is large.
    func append(_ events: [String], sample: Bool = false) {
        state.withLock { state in
            let size = events.reduce(0) { $0 + $1.utf8.count + 2 }
            guard state.bytes + size <= (sample ? Self.limit : 2 * Self.limit) else {
                state.dropped += events.count
                return
            }
            state.events.append(contentsOf: events)
            state.bytes += size
        }
    }

    /// Microseconds since the trace's origin, at monotonic time `time`.
    func timestamp(_ time: Double) -> Int64 {
        Int64(((time - origin) * 1e6).rounded())
    }

    /// Writes the trace to ``path`` (replacing a file there): every event
    /// recorded so far. May be called again later to write a longer one.
    public func write() throws(DownloadError) {
        let (events, dropped) = state.withLock { ($0.events, $0.dropped) }
        var text = "{\"traceEvents\":[\n"
        text.reserveCapacity(events.reduce(64) { $0 + $1.utf8.count + 2 })
        for (index, event) in events.enumerated() {
            text += event
            text += index == events.count - 1 ? "\n" : ",\n"
        }
        let other: TraceJSON.Object = [
            "format": .string("rangeget-trace"), "version": .int(1),
            "rangeget": .string("\(RangeGetVersion.current) (commit \(RangeGetVersion.build))"),
            "eventsLeftOut": dropped > 0 ? .int(dropped) : nil
        ]
        text += "],\"displayTimeUnit\":\"ms\",\"otherData\":\(other.text)}\n"
        let written = text.withCString { pointer -> Bool in
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var offset = 0
            let count = strlen(pointer)
            while offset < count {
                let done = Glibc.write(fd, pointer + offset, count - offset)
                if done < 0 && errno == EINTR { continue }
                guard done > 0 else { return false }
                offset += done
            }
            return true
        }
        guard written else {
            throw .io(IOError("write the trace to", path))
        }
    }
}

/// The few JSON shapes a trace needs, written directly: an event is
/// encoded as it is recorded, on the engine's thread.
enum TraceJSON {
    /// A JSON string literal of `text`.
    static func string(_ text: String) -> String {
        var out = "\""
        out.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A JSON number for `value`: finite, or 0.
    static func number(_ value: Double) -> String {
        guard value.isFinite else { return "0" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// A value of an event's field.
    enum Value {
        case string(String)
        case int(Int64)
        case number(Double)
        case bool(Bool)
        case range(ByteRange)
        /// JSON text, as it is.
        case raw(String)

        static func int(_ value: Int) -> Value { .int(Int64(value)) }

        var text: String {
            switch self {
            case let .string(text): TraceJSON.string(text)
            case let .int(value): String(value)
            case let .number(value): TraceJSON.number(value)
            case let .bool(value): value ? "true" : "false"
            case let .range(range): "[\(range.start),\(range.end)]"
            case let .raw(text): text
            }
        }
    }

    /// A JSON object, its members in the order given; nil values are left out.
    struct Object: ExpressibleByDictionaryLiteral {
        private var members: [String] = []

        init(dictionaryLiteral members: (String, TraceJSON.Value?)...) {
            self.init(members: members)
        }

        /// An object of `members` whose keys are known only at run time.
        init(members: [(String, TraceJSON.Value?)]) {
            self.members = members.compactMap { key, value in value.map { TraceJSON.string(key) + ":" + $0.text } }
        }

        var text: String { "{" + members.joined(separator: ",") + "}" }
    }
}
