// The per-connection rate limit: a token bucket kept as a virtual clock.

/// Paces one connection's body bytes to a rate, across all its responses.
///
/// `next` is when the bucket is empty again; a send waits until then and
/// pushes it forward by its duration at the rate. It may lag the real clock
/// by `credit` seconds, which absorbs oversleeping without letting an idle
/// connection save up a burst.
struct Pacer {
    private var next = -Double.infinity
    private static let credit = 0.02

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
