// LoopRequest: one request outside any engine (a probe's HEAD or ranged
// GET) run to its end in a session's multi handle, so that a probe holds no
// thread while it waits: the task that asked waits for it instead. It takes
// a slot of the loop's connection limit as a file's first transfer does
// (probes are connections too), and its handle joins the loop's connection
// cache, so the engine that follows often reuses the probe's connection.
// A download that runs alone has no loop of its own thread: its probes run
// on threads of their own (`EasyHandle.perform(on:)`).
import CCurl
import SystemSupport

final class LoopRequest: LoopClient {
    private let loop: TransferLoop
    private let easy: EasyHandle
    /// Ends the request before it is sent (a pause or cancel while it waits
    /// for a slot); once sent, the handle's own progress callback ends it.
    private let stop: StopSignal?
    private var holdsSlot = false
    private var sent = false
    /// How the transfer ended; nil while it runs or waits.
    private(set) var result: Result<Void, CurlError>?

    init(_ easy: EasyHandle, on loop: TransferLoop, stop: StopSignal?) {
        self.easy = easy
        self.loop = loop
        self.stop = stop
    }

    /// The transfer ended with `code`: its handle leaves the multi handle.
    func ended(_ code: CURLcode) {
        loop.remove(request: easy)
        sent = false
        result = code == CURLE_OK ? .success(()) : .failure(easy.error(code))
    }

    func waitsForFirstConnection(now: Double) -> Bool { result == nil && !holdsSlot }

    func begin(now: Double) {
        _ = beforeTransfers(now: now)
    }

    func beforeTransfers(now: Double) -> Bool {
        loop.assertOnLoopThread()
        if result == nil, !sent {
            if stop?.isRequested == true {
                result = .failure(CurlError(CURLE_ABORTED_BY_CALLBACK))
            } else if loop.takeSlot(first: true) {
                holdsSlot = true
                do {
                    easy.clearError()
                    try loop.add(request: self, easy)
                    sent = true
                } catch {
                    result = .failure(error)
                }
            }
        }
        return result != nil
    }

    func transferFinished(_ connection: Connection, result: CURLcode, now: Double) -> Bool {
        preconditionFailure("a request has no connection")
    }

    func afterTransfers(now: Double) -> Bool { result != nil }

    func pollTimeout(now: Double) -> Double { 0.1 }

    func loopFailed(_ error: CurlError) {
        if result == nil { result = .failure(error) }
    }

    func end() {
        if sent { loop.remove(request: easy) }
        sent = false
        if holdsSlot { loop.giveSlots(1) }
        holdsSlot = false
    }
}

extension TransferLoop {
    /// Runs `easy`'s transfer to its end (a probe's), on a slot of this
    /// loop's, and returns how it ended. `stop` ends it while it waits.
    func perform(_ easy: EasyHandle, stop: StopSignal?) async throws(CurlError) {
        let request = LoopRequest(easy, on: self, stop: stop)
        await serve(request)
        try (request.result ?? .failure(CurlError(CURLE_ABORTED_BY_CALLBACK))).get()
    }
}

extension EasyHandle {
    /// Runs the configured transfer to its end without holding the calling
    /// task's thread: in `loop`'s multi handle when it runs on a thread of
    /// its own (a session's), else on a thread of the request's own.
    func perform(on loop: TransferLoop?, stop: StopSignal?) async throws(CurlError) {
        if let loop, loop.hasOwnThread { return try await loop.perform(self, stop: stop) }
        let handle = UncheckedBox(self)
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<Void, CurlError>, Never>) in
            startThread("rangeget probe") {
                done.resume(returning: Result { () throws(CurlError) in try handle.value.perform() })
            }
        }
        try result.get()
    }
}
