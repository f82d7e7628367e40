// Seeded random draws for the tests that generate their inputs (the list
// reader's property test, the soak): the same seed gives the same draws, so
// a failure replays.
import RangeServer

/// SplitMix64 from one seed, with the few ways the tests draw from it.
struct Draws: RandomNumberGenerator {
    private var generator: SplitMix64

    init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    mutating func next() -> UInt64 { generator.next() }

    /// A value in 0..<bound.
    mutating func below(_ bound: UInt64) -> UInt64 { UInt64.random(in: 0..<bound, using: &self) }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// One of `items`, each as likely.
    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }
}
