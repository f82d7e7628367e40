// One client connection, on its own thread: read requests (pipelined ones
// too), plan each response, and carry the plan out with latency, pacing,
// cuts and stalls, counting every body byte written.
import FoundationEssentials
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

final class ServerConnection {
    private let core: ServerCore
    private let socket: ClientSocket
    private let number: Int
    private let stop: StopSignal
    /// Received bytes not consumed yet: `buffer[start..<end]`.
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * maxHeadLength, alignment: 16)
    private var start = 0
    private var end = 0
    private var pacer = Pacer()
    /// What the current burst may still send without a pause (with a burst
    /// size); a response's body starts a new burst.
    private var burstLeft = 0

    /// The largest request head accepted; longer ones get 431.
    static let maxHeadLength = 16 << 10
    /// The most bytes one unpaced write hands to the kernel.
    private static let unpacedChunk = 1 << 20

    /// The server stopped while a response was under way.
    private struct Stopped: Error {}

    init(core: ServerCore, socket: ClientSocket, number: Int, stop: StopSignal) {
        self.core = core
        self.socket = socket
        self.number = number
        self.stop = stop
    }

    deinit { buffer.deallocate() }

    /// Serves requests until either side closes, the idle timeout passes or
    /// the server stops.
    func run() {
        while serveOneRequest() {}
    }

    /// Reads and answers one request; false when the connection must close.
    private func serveOneRequest() -> Bool {
        while true {
            let received = UnsafeRawBufferPointer(rebasing: buffer[start..<end])
            switch HTTPRequest.parse(received, maxHeadLength: Self.maxHeadLength) {
            case .incomplete:
                guard receiveMore() else { return false }
            case .invalid(let status):
                let context = ResponsePlan.Context(method: "", keepAlive: false, date: HTTPDate.format(Date()))
                let plan = ResponsePlan.page(status, context)
                let record = RequestRecord(
                    method: "", path: "", target: "", rangeHeader: nil, ifRangeHeader: nil, headers: [:],
                    status: status, bodyBytesSent: 0, fault: nil, connection: number)
                _ = try? send(plan, content: nil, record: core.record(record))
                socket.lingeringShutdown(stop: stop)
                return false
            case .request(let request, let length):
                start += length
                guard skipBody(request.contentLength) else { return false }
                return answer(request)
            }
        }
    }

    /// Waits (up to the idle timeout) for more bytes and appends them.
    private func receiveMore() -> Bool {
        if start > 0 {
            if end > start {
                UnsafeMutableRawBufferPointer(rebasing: buffer[0..<end - start])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[start..<end]))
            }
            end -= start
            start = 0
        }
        guard end < buffer.count, stop.wait(forReadable: socket.fd, timeout: core.idleTimeout) == .ready,
            let count = try? socket.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[end...])), count > 0
        else { return false }
        end += count
        return true
    }

    /// Drops a request body of `length` bytes.
    private func skipBody(_ length: Int64) -> Bool {
        var left = length
        while left > 0 {
            if start == end { guard receiveMore() else { return false } }
            let taken = Int(min(left, Int64(end - start)))
            start += taken
            left -= Int64(taken)
        }
        return true
    }

    /// Plans, records and sends the response to `request`, holding one of
    /// the connection limit's places meanwhile; false when the connection
    /// must close afterwards.
    private func answer(_ request: HTTPRequest) -> Bool {
        core.noteRequest()
        var context = ResponsePlan.Context(
            method: request.method, rangeHeader: request.header("range"), ifRangeHeader: request.header("if-range"),
            isHTTP10: request.minorVersion == 0, keepAlive: request.keepAlive, date: HTTPDate.format(Date()))
        guard core.admit() else {
            return carryOut(ResponsePlan.overLimit(context), for: request, context: context, fault: nil, resource: nil)
        }
        defer { core.release() }
        var plan: ResponsePlan
        var fault: Fault?
        var resource: Resource?
        if request.method != "GET" && request.method != "HEAD" {
            plan = ResponsePlan.page(405, context)
            plan.fields.insert(ResponsePlan.Field(name: "Allow", value: "GET, HEAD"), at: 1)
        } else if let path = request.path {
            switch core.access(path: path, target: request.target) {
            case .signed(let url):
                plan = ResponsePlan.text(url + "\n", context)
            case .notFound:
                plan = ResponsePlan.page(404, context)
            case .forbidden:
                plan = ResponsePlan.empty(403, context)
            case .granted:
                let specs = context.rangeHeader.flatMap(RangeSpec.parseHeader)
                let preparation = core.prepare(
                    method: request.method, path: path, rangeStart: specs?.count == 1 ? specs?[0].first : nil)
                context.requestNumber = preparation.requestNumber
                fault = preparation.fault
                resource = preparation.resource
                plan = ResponsePlan.plan(context, resource: resource, fault: fault)
            }
        } else {
            context.keepAlive = false
            plan = ResponsePlan.page(400, context)
        }
        return carryOut(plan, for: request, context: context, fault: fault, resource: resource)
    }

    /// Records and sends `plan` after the latency (and a `delay` fault's
    /// wait); false when the connection must close afterwards.
    private func carryOut(
        _ plan: ResponsePlan, for request: HTTPRequest, context: ResponsePlan.Context, fault: Fault?,
        resource: Resource?
    ) -> Bool {
        var plan = plan

        // File content is read through a descriptor opened now, so a file
        // removed since the lookup gives 404 rather than a broken body.
        var file: Int32 = -1
        if case .file(let path, _)? = resource?.content, plan.sendsContent {
            file = open(path, O_RDONLY | O_CLOEXEC)
            if file < 0 { plan = ResponsePlan.page(404, context) }
        }
        defer { if file >= 0 { close(file) } }

        let record = core.record(
            RequestRecord(
                method: request.method, path: request.path ?? request.target, target: request.target,
                rangeHeader: context.rangeHeader, ifRangeHeader: context.ifRangeHeader,
                headers: request.headerDictionary, status: plan.status, bodyBytesSent: 0,
                fault: fault?.description, connection: number))

        var wait = core.latency
        if case .delay(let milliseconds)? = fault { wait += Double(milliseconds) / 1000 }
        guard stop.sleep(wait) else { return false }
        do {
            try send(plan, content: resource.map { ($0, file) }, record: record)
        } catch {
            return false
        }
        switch plan.ending {
        case .complete:
            return true
        case .close, .cut:
            socket.lingeringShutdown(stop: stop)
            return false
        case .stall, .hang:
            waitForClientToClose()
            return false
        }
    }

    /// Sends the head and as much body as the plan's ending allows.
    private func send(_ plan: ResponsePlan, content: (Resource, file: Int32)?, record: ServerCore.RecordHandle) throws {
        if plan.ending == .hang { return }
        try plan.serializedHead.withUnsafeBytes { try socket.sendAll($0) }
        var allowance: Int64
        switch plan.ending {
        case .cut(let after), .stall(let after): allowance = after
        default: allowance = .max
        }
        let account = { (count: Int) in self.core.addBodyBytes(count, to: record) }
        burstLeft = 0
        for piece in plan.body where allowance > 0 {
            let count = min(piece.count, allowance)
            allowance -= count
            switch piece {
            case .bytes(let bytes):
                try bytes.withUnsafeBytes { all in
                    try sendPaced(count) { offset, maxCount in
                        let slice = UnsafeRawBufferPointer(rebasing: all[Int(offset)..<Int(offset) + maxCount])
                        try socket.sendAll(slice, progress: account)
                        return maxCount
                    }
                }
            case .content(let range):
                guard let (resource, file) = content else { continue }
                try sendPaced(count) { offset, maxCount in
                    if file >= 0 {
                        try socket.sendFile(file, offset: range.lowerBound + offset, count: maxCount, progress: account)
                        return maxCount
                    }
                    return try resource.withContiguousBytes(at: range.lowerBound + offset, maxCount: maxCount) {
                        chunk in
                        try socket.sendAll(chunk, progress: account)
                        return chunk.count
                    }
                }
            }
        }
    }

    /// Sends `count` bytes through `write(offset, maxCount)`, which sends
    /// at most `maxCount` bytes from `offset` and returns how many it sent,
    /// pacing the writes to the connection's current rate and the server's
    /// current total rate: a slice waits for the connection's bucket, then
    /// books its slot on the shared uplink and waits for that. With a burst
    /// size, a burst (one or more writes) takes the place of a slice: only
    /// its first write waits, and the uplink books it whole.
    private func sendPaced(_ count: Int64, _ write: (_ offset: Int64, _ maxCount: Int) throws -> Int) throws {
        core.uplink.beginSending()
        defer { core.uplink.endSending() }
        var done: Int64 = 0
        // Booked on the uplink but not sent yet, after a write shorter than
        // its slice (generated content ends a chunk where its pattern wraps),
        // or the rest of a burst.
        var prepaid = 0
        while done < count {
            var maxCount = Int(min(count - done, Int64(Self.unpacedChunk)))
            let rates = core.rates
            if let rate = rates.perConnection {
                if let burst = rates.burst {
                    if burstLeft == 0 {
                        guard stop.sleep(pacer.delay(now: MonotonicClock.now())) else { throw Stopped() }
                        burstLeft = burst
                    }
                    maxCount = min(maxCount, burstLeft)
                } else {
                    burstLeft = 0
                    maxCount = min(maxCount, Pacer.sliceSize(rate: rate))
                    guard stop.sleep(pacer.delay(now: MonotonicClock.now())) else { throw Stopped() }
                }
            }
            if prepaid > 0 {
                maxCount = min(maxCount, prepaid)
            } else if let total = rates.total {
                let booking =
                    rates.burst.map { Int(min(Int64($0), count - done)) }
                    ?? min(maxCount, core.uplink.sliceSize(rate: total))
                maxCount = min(maxCount, booking)
                let start = core.uplink.book(booking, rate: total, now: MonotonicClock.now())
                prepaid = booking
                guard stop.sleep(start - MonotonicClock.now()) else { throw Stopped() }
            }
            let now = MonotonicClock.now()
            let sent = try write(done, maxCount)
            if let rate = rates.perConnection { pacer.book(sent, rate: rate, now: now) }
            prepaid = max(0, prepaid - sent)
            burstLeft = max(0, burstLeft - sent)
            done += Int64(sent)
        }
    }

    /// Sends nothing more; returns once the client closes or the server stops.
    private func waitForClientToClose() {
        var scratch = [UInt8](repeating: 0, count: 4096)
        while stop.wait(forReadable: socket.fd, timeout: nil) == .ready {
            let received = scratch.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, 0) }
            if received == 0 || (received < 0 && errno != EINTR) { return }
        }
    }
}
