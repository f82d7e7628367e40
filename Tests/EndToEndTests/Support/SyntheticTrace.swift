// SyntheticTrace: a trace as docs/TRACE.md describes it, made up for the
// tests of `rangeget report`: a 30 MiB file from three mirrors over five
// TCP connections and one transfer refused before it had one, with steals,
// a race, a stall, retries, connect and TLS phases, first bytes, rate and
// done samples, and an event and keys of kinds no reader knows. Its file
// name and one mirror's URL carry `<b>&"'`, which the page must escape.
import Foundation

struct SyntheticTrace {
    /// Text that is markup unless escaped.
    static let hostile = "<b>&\"'"
    static let fileName = "big\(hostile).iso"
    static let mirrors = [
        "http://a.example/big.iso", "https://b.example/\(hostile)/big.iso", "http://c.example/big.iso"
    ]
    static let piece: Int64 = 1 << 20
    static let fileSize = 30 * piece
    /// The lane (`tid`) of each rangeget connection: a TCP connection's
    /// local port, or 100000 + the connection for one that never had one.
    static let lanes = [1: 50_001, 2: 50_002, 3: 50_003, 4: 50_004, 5: 50_005, 6: 100_006]
    /// When the steal from connection 2 happens, in microseconds.
    static let stealTime = 1_000_000

    typealias Object = [String: Any]

    var events: [Object] = []

    /// The trace the report's tests draw.
    static var standard: SyntheticTrace {
        var trace = SyntheticTrace()
        trace.add("M", "process_name", args: ["name": fileName])
        trace.add("M", "thread_name", lane: 0, args: ["name": "download"])
        for (connection, lane) in lanes.sorted(by: { $0.key < $1.key }) {
            let name = connection == 6 ? "connection 6 (no TCP connection)" : "TCP :\(lane) 127.0.0.1:808\(connection)"
            trace.add("M", "thread_name", lane: lane, args: ["name": name])
        }
        trace.add("i", "probed", lane: 0, at: 2000, args: ["url": mirrors[0], "size": fileSize])
        // Connections 1 to 5: six pieces each, one after another, each connection on one mirror.
        for connection in 1...5 {
            let lane = lanes[connection]!
            let mirror = (connection - 1) % 3
            for round in 0..<6 {
                let index = Int64(connection - 1 + round * 5)
                let start = 50_000 + round * 400_000
                let range = [index * piece, (index + 1) * piece]
                let args: Object = [
                    "connection": connection, "mirror": mirrors[mirror], "mirrorIndex": mirror, "range": range,
                    "written": range, "bytes": piece, "outcome": "complete", "status": 206, "http": "1.1",
                    "newConnection": round == 0, "connect": round == 0 ? 0.002 : 0, "tls": round == 0 ? 0.006 : 0,
                    "firstByte": 0.01, "someFutureKey": ["nested": [1, 2, 3]]
                ]
                trace.add(
                    "X", "GET \(range[0])-\(range[1] - 1)", lane: lane, at: start, duration: 380_000,
                    category: "transfer", args: args)
                trace.add("i", "first byte", lane: lane, at: start + 10_000, args: ["connection": connection])
                if round == 0 {
                    trace.add("X", "connect", lane: lane, at: start, duration: 2000, category: "tcp")
                    trace.add("X", "tls", lane: lane, at: start + 2000, duration: 4000, category: "tcp")
                }
            }
        }
        // Connection 6 was refused at connect: no TCP connection, nothing written.
        let refused: Object = [
            "connection": 6, "mirror": mirrors[2], "mirrorIndex": 2, "range": [0, piece], "written": [0, 0],
            "bytes": 0, "outcome": "connection refused", "status": 0, "newConnection": true
        ]
        trace.add(
            "X", "GET 0-1048575", lane: lanes[6]!, at: 60_000, duration: 3000, category: "transfer", args: refused)
        let stall: Object = [
            "connection": 4, "cause": "stall", "reason": "no byte for 5 s", "delay": 0, "attempt": 1, "attempts": 5
        ]
        let instants: [(String, Int, Object)] = [
            ("stolen", stealTime, ["from": 2, "range": [13 * piece, 14 * piece]]),
            ("raced", 1_500_000, ["connection": 3, "range": [27 * piece, 28 * piece]]),
            (
                "retry", 900_000,
                ["connection": 5, "cause": "http", "reason": "HTTP 503", "delay": 0.25, "attempt": 1, "attempts": 5]
            ),
            ("retry", 2_000_000, stall),
            ("stall", 2_000_000, stall),
            ("mirror dropped", 2_100_000, ["mirror": mirrors[1], "reason": "three failures \(hostile)"]),
            ("connection count", 1_200_000, ["count": 5, "reason": "learned"]),
            ("checkpoint", 1_300_000, ["durable": 12 * piece])
        ]
        for (name, time, args) in instants {
            trace.add("i", name, lane: 0, at: time, args: args)
        }
        for sample in 1...25 {
            let rates = [0: 2.5e6, 1: 4.0e6 + Double(sample) * 1e5, 2: 1.5e6]
            var args: Object = ["total": rates.values.reduce(0, +)]
            for (mirror, rate) in rates { args["mirror \(mirror)"] = rate }
            trace.add("C", "rate", at: sample * 100_000, args: args)
            trace.add("C", "done", at: sample * 100_000, args: ["bytes": Int64(sample) * piece])
        }
        trace.add("X", "sync", lane: 0, at: 2_450_000, duration: 20_000, category: "download")
        // What a later writer may add: readers ignore it.
        trace.events.append(["ph": "Z", "name": "from the future", "pid": "not a number", "args": [[["deep"]]]])
        return trace
    }

    /// Adds an event of process 1: `ph`, `name`, and what is given of the rest.
    mutating func add(
        _ kind: String, _ name: String, lane: Int? = nil, at time: Int? = nil, duration: Int? = nil,
        category: String? = nil, args: Object = [:]
    ) {
        var event: Object = ["ph": kind, "name": name, "pid": 1, "args": args]
        if kind == "i" { event["s"] = "t" }
        if let lane { event["tid"] = lane }
        if let time { event["ts"] = time }
        if let duration { event["dur"] = duration }
        if let category { event["cat"] = category }
        events.append(event)
    }

    /// The whole file: the object docs/TRACE.md shows, its keys sorted so
    /// that the same trace is the same bytes.
    var data: Data {
        let object: [String: Any] = [
            "traceEvents": events, "displayTimeUnit": "ms",
            "otherData": ["format": "rangeget-trace", "version": 1, "rangeget": "0.1.0 (commit test)"]
        ]
        return try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// The lanes that carry a transfer: the lane elements the page must have.
    var transferLanes: Set<Int> {
        Set(events.filter { $0["cat"] as? String == "transfer" }.compactMap { $0["tid"] as? Int })
    }

    var transferCount: Int { events.filter { $0["cat"] as? String == "transfer" }.count }
}
