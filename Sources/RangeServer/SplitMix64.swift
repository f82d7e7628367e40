// The deterministic generator behind generated content, random cut points
// and probability triggers: the same seed always gives the same run.

/// SplitMix64 (Steele, Lea and Flood), a small, fast, well-mixed generator;
/// public so tests replay the same random inputs from a seed.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next value of the sequence.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// One value for the pair (`seed`, `index`), independent of other draws,
    /// so the n-th request gets the same draw however threads interleave.
    static func value(seed: UInt64, index: UInt64) -> UInt64 {
        var generator = SplitMix64(seed: seed ^ (index &* 0xD6E8_FEB8_6659_FD93))
        return generator.next()
    }

    /// A value in [0, 1) from the top 53 bits of `value`.
    static func unitInterval(_ value: UInt64) -> Double {
        Double(value >> 11) * 0x1p-53
    }
}
