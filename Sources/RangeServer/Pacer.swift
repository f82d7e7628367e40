// The rate limits: a token bucket per connection and one shared by the whole
// server (the uplink), both kept as virtual clocks.
import Synchronization

/// Paces one connection's body bytes to a rate, across all its responses.
///
/// `next` is when the bucket is empty again; a send waits until then and
/// pushes it forward by its duration at the rate. It may lag the real clock
/// by `credit` seconds, which absorbs oversleeping without letting an idle
/// connection save up a burst.
struct Pacer {
    private var next = -Double.infinity
    static let credit = 0.02

    /// The size of one paced send at `rate` bytes per second: about 1/64 s
    /// of data, between 1 byte and 64 KiB, so the flow stays smooth.
    static func sliceSize(rate: Int) -> Int {
        max(1, min(64 << 10, rate / 64))
    }

    /// Seconds to wait at `now` before the next send.
    func delay(now: Double) -> Double {
        max(0, next - now)
    }

    /// Books `count` bytes sent at `now` at `rate` bytes per second.
    mutating func book(_ count: Int, rate: Int, now: Double) {
        next = max(next, now - Self.credit) + Double(count) / Double(max(rate, 1))
    }
}

/// Paces the body bytes of every connection of a server together to one
/// rate, like a shared uplink: one token bucket for all of them.
///
/// Unlike ``Pacer``, a send books its slice before it goes: under the lock
/// it takes the next free slot on the shared clock, then sleeps until that
/// slot starts. Each connection holds at most one booking at a time, so the
/// connections that want the uplink take turns in booking order (round
/// robin) and get equal shares; none can starve. Slices are the rate's
/// share per sending connection for about 1/64 s, so with N senders each
/// still sends about every 1/64 s at 1/N of the rate, as flows through a
/// bottleneck link would, instead of N times as rarely.
final class Uplink: Sendable {
    private struct State {
        /// When the shared bucket is empty again: the end of the last slot booked.
        var next = -Double.infinity
        /// Connections in the middle of sending a body piece.
        var senders = 0
    }

    private let state = Mutex(State())

    /// Counts a connection as sending (competing for the uplink) until ``endSending()``.
    func beginSending() {
        state.withLock { $0.senders += 1 }
    }

    func endSending() {
        state.withLock { $0.senders -= 1 }
    }

    /// The size of one paced send at a shared `rate`: ``Pacer/sliceSize(rate:)``
    /// of each sending connection's equal share.
    func sliceSize(rate: Int) -> Int {
        let senders = state.withLock { max(1, $0.senders) }
        return Pacer.sliceSize(rate: rate / senders)
    }

    /// Books `count` bytes at `rate` bytes per second in the next free slot
    /// from `now` and returns when the slot starts, the time to send them.
    /// The clock may lag `now` by ``Pacer/credit``, as a connection's does.
    func book(_ count: Int, rate: Int, now: Double) -> Double {
        state.withLock { state in
            let start = max(state.next, now - Pacer.credit)
            state.next = start + Double(count) / Double(max(rate, 1))
            return start
        }
    }
}
