// A change of the rate limits at a set time after a run's first request:
// conditions that change in the middle of a download (a shared uplink that
// frees up, a CDN that starts limiting each flow).

/// New rate limits that replace the configured ones `after` seconds past the
/// first request a server answers after ``RangeServer/start()``.
///
/// Both limits are replaced: nil lifts that kind of limit.
public struct RateChange: Sendable, Equatable {
    /// Seconds from the first request to the change.
    public var after: Double
    /// The per-connection rate from then on, in bytes per second; nil for none.
    public var ratePerConnection: Int?
    /// The server's total rate from then on, in bytes per second; nil for none.
    public var totalRate: Int?

    /// A change `after` seconds past the first request to the given limits.
    public init(after: Double, ratePerConnection: Int? = nil, totalRate: Int? = nil) {
        self.after = after
        self.ratePerConnection = ratePerConnection
        self.totalRate = totalRate
    }
}
