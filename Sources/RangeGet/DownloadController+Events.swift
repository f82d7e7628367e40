// DownloadController's events: the observer and the subscribers of one
// download, told in one order; the stream of a subscriber ends with the
// download.

extension DownloadController {
    /// Events a subscriber may fall behind by before the oldest are dropped.
    static let eventBuffer = 4096

    /// Tells the observer and every subscriber, the event's URLs and messages
    /// cleaned (`OutgoingText`); `finished` is the last event subscribers see.
    func emit(_ event: DownloadEvent) {
        let event = event.cleaned
        trace?.record(event)
        state.withLock { $0.observer }(event)
        // Yielding under the lock keeps one order for all subscribers and
        // keeps a late event (a background checkpoint) from following `finished`.
        let closing: [AsyncStream<DownloadEvent>.Continuation] = state.withLock { state in
            for subscriber in state.subscribers.values { subscriber.yield(event) }
            guard case .finished = event else { return [] }
            let closing = Array(state.subscribers.values)
            state.subscribers = [:]
            state.eventsClosed = true
            return closing
        }
        for subscriber in closing { subscriber.finish() }
    }

    /// A new stream of the events from now on; already finished when the download has ended.
    func subscribe() -> AsyncStream<DownloadEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(Self.eventBuffer))
        let id = state.withLock { state in
            defer { state.nextSubscriber += 1 }
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        let closed = state.withLock { state in
            if !state.eventsClosed { state.subscribers[id] = continuation }
            return state.eventsClosed
        }
        if closed { continuation.finish() }
        return stream
    }
}
