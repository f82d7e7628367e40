// TraceFile: a `--trace` file (docs/TRACE.md) as `rangeget report` reads
// it. The file is untrusted: every value the report uses is checked for its
// type and range as it is decoded, and one that is wrong makes the whole file
// "not a trace", named by its place (`traceEvents[17].args.written`).
// Values the report does not use, unknown `ph` values and unknown keys are
// never decoded, so they cost nothing and cannot fail it.
import FoundationEssentials
import RangeGet

/// Why a file is not a trace the report can draw: one line, exit 2.
struct TraceError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A transfer: one request on a TCP connection's lane (an `X` event of category `transfer`).
struct TraceTransfer {
    var lane: Int
    var name: String
    /// Microseconds from the trace's start.
    var start: Double
    var duration: Double
    var connection: Int?
    var mirror: String?
    var mirrorIndex: Int?
    var range: ByteRange?
    var written: ByteRange?
    var bytes: Int64?
    var outcome: String?
    var status: String?
    var http: String?
    var newConnection: Bool?
    /// Seconds from the request, as the transfer's args give them.
    var connect: Double?
    var tls: Double?
    var firstByte: Double?

    var end: Double { start + duration }
}

/// An instant event (`i`): a steal, a race, a retry, a first byte, a notice.
struct TraceInstant {
    var lane: Int
    var name: String
    var at: Double
    /// The rangeget connection it concerns: `args.connection`, or a steal's `args.from`.
    var connection: Int?
    /// The args the report shows, as text, in a fixed order.
    var details: [(key: String, value: String)]
    /// The file's size, from `probed`.
    var size: Int64?
}

/// One event of a trace, as far as the report uses it.
enum TraceEvent {
    case processName(process: Int, name: String)
    case threadName(process: Int, lane: Int, name: String)
    case transfer(process: Int, TraceTransfer)
    /// `connect` and `tls` on a TCP lane, `sync` on the download's.
    case phase(process: Int, lane: Int, name: String, start: Double, duration: Double)
    case instant(process: Int, TraceInstant)
    /// A `rate` sample: bytes per second, in all and by mirror index.
    case rate(process: Int, at: Double, total: Double?, mirrors: [Int: Double])
    /// A `done` sample: the file's bytes on disk.
    case done(process: Int, at: Double, bytes: Int64)
    /// An event the report does not draw.
    case ignored
}

/// A whole trace file: its events, and what `otherData` says of it.
struct TraceFile: Decodable {
    var events: [TraceEvent]
    /// The rangeget that wrote it (`otherData.rangeget`).
    var writer: String?
    /// Events the writer left out at its size limit (`otherData.eventsLeftOut`).
    var eventsLeftOut: Int64?

    /// The largest time or duration taken, in microseconds: 10^12 (11.6 days).
    static let latest = 1e12
    /// The largest byte offset or count taken: 2^53, exact in a Double.
    static let largestByte = 9_007_199_254_740_992.0
    /// The most keys a `rate` sample's args may have.
    static let mostRateKeys = 4096

    /// The trace in `data`, or why it is not one.
    static func decode(_ data: Data) throws(TraceError) -> TraceFile {
        // JSON is UTF-8 text: a byte that is not is named where it is, not
        // later as a value of the wrong type.
        if let offset = firstInvalidUTF8(data) {
            throw TraceError("it is not UTF-8 text (as JSON is): byte \(offset) is not UTF-8")
        }
        do {
            return try JSONDecoder().decode(TraceFile.self, from: data)
        } catch let error as TraceError {
            throw error
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            let reason = (context.underlyingError.map { "\($0)" } ?? context.debugDescription)
            throw TraceError("it is not JSON (or is cut short): " + TraceFields.short(reason, 160))
        } catch {
            throw TraceError("it cannot be read as a trace: " + TraceFields.short("\(error)", 160))
        }
    }

    /// The offset of the first byte of `data` that is not valid UTF-8, or nil.
    static func firstInvalidUTF8(_ data: Data) -> Int? {
        var parser = Unicode.UTF8.ForwardParser()
        var bytes = data.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &bytes) {
            case .valid(let scalar): offset += scalar.count
            case .emptyInput: return nil
            case .error: return offset
            }
        }
    }

    private struct OtherData: Decodable {
        var rangeget: String?
        var eventsLeftOut: Int64?

        init(from decoder: Decoder) throws {
            let fields = try TraceFields(decoder, what: "otherData")
            rangeget = try? fields.string("rangeget")
            eventsLeftOut = try? fields.integer("eventsLeftOut", in: 0...TraceFile.largestByte)
        }
    }

    init(from decoder: Decoder) throws {
        let container: KeyedDecodingContainer<TraceKey>
        do {
            container = try decoder.container(keyedBy: TraceKey.self)
        } catch {
            throw TraceError("it is JSON, but not an object with a \"traceEvents\" array")
        }
        guard container.contains(TraceKey("traceEvents")) else {
            throw TraceError("it is a JSON object without a \"traceEvents\" array")
        }
        var list: UnkeyedDecodingContainer
        do {
            list = try container.nestedUnkeyedContainer(forKey: TraceKey("traceEvents"))
        } catch {
            throw TraceError("its \"traceEvents\" is not an array")
        }
        events = []
        events.reserveCapacity(min(list.count ?? 0, 1 << 20))
        while !list.isAtEnd {
            events.append(try list.decode(TraceEvent.self))
        }
        let other = try? container.decodeIfPresent(OtherData.self, forKey: TraceKey("otherData"))
        writer = other?.rangeget
        eventsLeftOut = other?.eventsLeftOut
    }
}

extension TraceEvent: Decodable {
    init(from decoder: Decoder) throws {
        let fields = try TraceFields(decoder, what: "an event")
        guard let kind = try fields.string("ph") else { throw fields.error("has no \"ph\"") }
        guard ["X", "i", "I", "C", "M"].contains(kind) else {
            self = .ignored
            return
        }
        guard let process = try fields.identifier("pid") else { throw fields.error("has no \"pid\"") }
        let name = try fields.string("name") ?? ""
        switch kind {
        case "M":
            self = try Self.metadata(fields, process: process, name: name)
        case "X":
            self = try Self.slice(fields, process: process, name: name)
        case "C":
            self = try Self.counter(fields, process: process, name: name)
        default:
            self = try Self.instant(fields, process: process, name: name)
        }
    }

    private static func metadata(_ fields: TraceFields, process: Int, name: String) throws -> TraceEvent {
        guard name == "process_name" || name == "thread_name" else { return .ignored }
        let args = try fields.args()
        guard let label = try args?.string("name") else { return .ignored }
        if name == "process_name" { return .processName(process: process, name: label) }
        guard let lane = try fields.identifier("tid") else { throw fields.error("names a thread but has no \"tid\"") }
        return .threadName(process: process, lane: lane, name: label)
    }

    private static func slice(_ fields: TraceFields, process: Int, name: String) throws -> TraceEvent {
        guard let lane = try fields.identifier("tid") else { throw fields.error("has no \"tid\"") }
        guard let start = try fields.time("ts") else { throw fields.error("has no \"ts\"") }
        guard let duration = try fields.time("dur") else { throw fields.error("has no \"dur\"") }
        let category = try fields.string("cat")
        guard category == "transfer" else {
            guard ["connect", "tls", "sync"].contains(name) else { return .ignored }
            return .phase(process: process, lane: lane, name: name, start: start, duration: duration)
        }
        var transfer = TraceTransfer(lane: lane, name: name, start: start, duration: duration)
        if let args = try fields.args() {
            transfer.connection = try args.identifier("connection")
            transfer.mirror = try args.string("mirror")
            transfer.mirrorIndex = try args.identifier("mirrorIndex")
            transfer.range = try args.byteRange("range")
            transfer.written = try args.byteRange("written")
            transfer.bytes = try args.integer("bytes", in: 0...TraceFile.largestByte)
            transfer.outcome = try args.text("outcome")
            transfer.status = try args.text("status")
            transfer.http = try args.text("http")
            transfer.newConnection = try args.bool("newConnection")
            transfer.connect = try args.seconds("connect")
            transfer.tls = try args.seconds("tls")
            transfer.firstByte = try args.seconds("firstByte")
        }
        return .transfer(process: process, transfer)
    }

    private static func counter(_ fields: TraceFields, process: Int, name: String) throws -> TraceEvent {
        guard name == "rate" || name == "done" else { return .ignored }
        guard let at = try fields.time("ts") else { throw fields.error("has no \"ts\"") }
        guard let args = try fields.args() else { return .ignored }
        if name == "done" {
            guard let bytes = try args.integer("bytes", in: 0...TraceFile.largestByte) else { return .ignored }
            return .done(process: process, at: at, bytes: bytes)
        }
        let keys = args.keys
        guard keys.count <= TraceFile.mostRateKeys else {
            throw args.error("has \(keys.count) keys, more than the \(TraceFile.mostRateKeys) a rate sample may have")
        }
        var mirrors: [Int: Double] = [:]
        for key in keys where key.hasPrefix("mirror ") {
            guard let index = Int(key.dropFirst("mirror ".count)), index >= 0, index < 1_000_000 else { continue }
            mirrors[index] = try args.rate(key)
        }
        return .rate(process: process, at: at, total: try args.rate("total"), mirrors: mirrors)
    }

    /// The args an instant's tooltip shows, in this order.
    private static let detailKeys = [
        "connection", "from", "to", "range", "cause", "reason", "delay", "attempt", "attempts", "mirror", "count",
        "index", "matches", "url", "size", "bytes", "durable"
    ]

    private static func instant(_ fields: TraceFields, process: Int, name: String) throws -> TraceEvent {
        guard let at = try fields.time("ts") else { throw fields.error("has no \"ts\"") }
        let lane = try fields.identifier("tid") ?? 0
        var instant = TraceInstant(lane: lane, name: name, at: at, details: [])
        if let args = try fields.args() {
            instant.connection = try args.identifier(name == "stolen" ? "from" : "connection")
            if name == "probed" { instant.size = try args.integer("size", in: 0...TraceFile.largestByte) }
            instant.details = detailKeys.compactMap { key in args.summary(key).map { (key: key, value: $0) } }
        }
        return .instant(process: process, instant)
    }
}

/// A JSON object's keys, whatever they are.
struct TraceKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(_ name: String) {
        stringValue = name
        intValue = nil
    }

    init?(stringValue: String) { self.init(stringValue) }

    init?(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}

/// One JSON object of the trace, read key by key with each value's type and
/// range checked; an error names the value's place in the file.
struct TraceFields {
    private let container: KeyedDecodingContainer<TraceKey>
    private let path: String

    /// The object `decoder` is at; `what` it should be, for the error when it is not one.
    init(_ decoder: Decoder, what: String) throws {
        path = Self.place(decoder.codingPath)
        do {
            container = try decoder.container(keyedBy: TraceKey.self)
        } catch {
            throw TraceError("\(path) is not \(what == "an event" ? "an object" : "an object (\(what))")")
        }
    }

    private init(_ container: KeyedDecodingContainer<TraceKey>, path: String) {
        self.container = container
        self.path = path
    }

    /// `traceEvents[17].args`: where a value is.
    static func place(_ codingPath: [CodingKey]) -> String {
        codingPath.reduce(into: "") { text, key in
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += (text.isEmpty ? "" : ".") + short(key.stringValue, 40)
            }
        }
    }

    /// `text` cut to `limit` characters, on one line.
    static func short(_ text: String, _ limit: Int) -> String {
        let line = String(text.map { $0.isNewline ? " " : $0 })
        return line.count > limit ? String(line.prefix(limit)) + "..." : line
    }

    /// The error for this object: `traceEvents[3] has no "ts"`.
    func error(_ problem: String) -> TraceError { TraceError("\(path) \(problem)") }

    /// The keys this object has.
    var keys: [String] { container.allKeys.map(\.stringValue) }

    private func present(_ key: String) -> Bool {
        container.contains(TraceKey(key)) && (try? container.decodeNil(forKey: TraceKey(key))) != true
    }

    /// What the value at `key` is, for an error: `a string`, `an array`.
    private func kind(_ key: String) -> String {
        let key = TraceKey(key)
        if (try? container.decode(String.self, forKey: key)) != nil { return "a string" }
        if (try? container.decode(Bool.self, forKey: key)) != nil { return "true or false" }
        if (try? container.nestedUnkeyedContainer(forKey: key)) != nil { return "an array" }
        if (try? container.nestedContainer(keyedBy: TraceKey.self, forKey: key)) != nil { return "an object" }
        if (try? container.decode(Double.self, forKey: key)) != nil { return "a number" }
        return "a number out of range"
    }

    private func mismatch(_ key: String, _ wanted: String) -> TraceError {
        TraceError("\(path).\(Self.short(key, 40)) is \(kind(key)), not \(wanted)")
    }

    func string(_ key: String) throws(TraceError) -> String? {
        guard present(key) else { return nil }
        guard let value = try? container.decode(String.self, forKey: TraceKey(key)) else {
            throw mismatch(key, "a string")
        }
        return value
    }

    func bool(_ key: String) throws(TraceError) -> Bool? {
        guard present(key) else { return nil }
        guard let value = try? container.decode(Bool.self, forKey: TraceKey(key)) else {
            throw mismatch(key, "true or false")
        }
        return value
    }

    /// A number within `bounds`.
    func number(_ key: String, in bounds: ClosedRange<Double>, as what: String) throws(TraceError) -> Double? {
        guard present(key) else { return nil }
        guard let value = try? container.decode(Double.self, forKey: TraceKey(key)) else {
            throw mismatch(key, what)
        }
        guard value.isFinite, bounds.contains(value) else {
            throw TraceError("\(path).\(Self.short(key, 40)) is \(value), not \(what)")
        }
        return value
    }

    /// A whole number within `bounds`.
    func integer(_ key: String, in bounds: ClosedRange<Double>) throws(TraceError) -> Int64? {
        let what = "a whole number from \(Int64(bounds.lowerBound)) to \(Int64(bounds.upperBound))"
        guard let value = try number(key, in: bounds, as: what) else { return nil }
        guard value == value.rounded() else {
            throw TraceError("\(path).\(Self.short(key, 40)) is \(value), not \(what)")
        }
        return Int64(value)
    }

    /// A process, lane, connection or mirror number: a whole number of at most 2^53.
    func identifier(_ key: String) throws(TraceError) -> Int? {
        try integer(key, in: -TraceFile.largestByte...TraceFile.largestByte).map { Int($0) }
    }

    /// A time or duration in microseconds, from 0 to `TraceFile.latest`.
    func time(_ key: String) throws(TraceError) -> Double? {
        try number(key, in: 0...TraceFile.latest, as: "a time from 0 to 10^12 microseconds")
    }

    /// A phase's length in seconds, from 0 to 10^6.
    func seconds(_ key: String) throws(TraceError) -> Double? {
        try number(key, in: 0...1e6, as: "a number of seconds from 0 to 10^6")
    }

    /// Bytes per second, from 0 to 2^53.
    func rate(_ key: String) throws(TraceError) -> Double? {
        try number(key, in: 0...TraceFile.largestByte, as: "a rate from 0 to 2^53 bytes per second")
    }

    /// A `[start, end)` range of a file: two whole numbers, `0 <= start <= end <= 2^53`.
    func byteRange(_ key: String) throws(TraceError) -> ByteRange? {
        guard present(key) else { return nil }
        let wanted = "a [start, end] pair of byte offsets"
        guard var pair = try? container.nestedUnkeyedContainer(forKey: TraceKey(key)) else {
            throw mismatch(key, wanted)
        }
        guard pair.count == 2, let start = try? pair.decode(Double.self), let end = try? pair.decode(Double.self),
            start == start.rounded(), end == end.rounded(), start >= 0, end <= TraceFile.largestByte
        else {
            throw TraceError("\(path).\(Self.short(key, 40)) is not \(wanted) from 0 to 2^53")
        }
        guard start <= end else {
            throw TraceError("\(path).\(Self.short(key, 40)) starts at \(Int64(start)), past its end \(Int64(end))")
        }
        return ByteRange(Int64(start), Int64(end))
    }

    /// Text for what may be a string or a number (`status`, `http`, `outcome`).
    func text(_ key: String) throws(TraceError) -> String? {
        guard present(key) else { return nil }
        guard let value = summary(key) else { throw mismatch(key, "text or a number") }
        return value
    }

    /// The value at `key` as a tooltip shows it, whatever its type: a string,
    /// a number, true or false, or a short array of them; nil for none.
    func summary(_ key: String) -> String? {
        guard present(key) else { return nil }
        let key = TraceKey(key)
        if let text = try? container.decode(String.self, forKey: key) { return text }
        if let value = try? container.decode(Double.self, forKey: key) { return Self.number(value) }
        if let value = try? container.decode(Bool.self, forKey: key) { return value ? "true" : "false" }
        guard var items = try? container.nestedUnkeyedContainer(forKey: key), let count = items.count, count <= 8
        else { return nil }
        var parts: [String] = []
        while !items.isAtEnd {
            if let number = try? items.decode(Double.self) {
                parts.append(Self.number(number))
            } else if let text = try? items.decode(String.self) {
                parts.append(text)
            } else {
                return nil
            }
        }
        return "[" + parts.joined(separator: ", ") + "]"
    }

    /// `12`, `0.25`: a whole number without its `.0`.
    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// The event's `args` object, if it has one.
    func args() throws(TraceError) -> TraceFields? {
        guard present("args") else { return nil }
        guard let nested = try? container.nestedContainer(keyedBy: TraceKey.self, forKey: TraceKey("args")) else {
            throw mismatch("args", "an object")
        }
        return TraceFields(nested, path: path + ".args")
    }
}
