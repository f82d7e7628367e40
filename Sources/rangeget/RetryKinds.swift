// RetryKinds: why a run's transfers were retried, for the summary line
// (`3 retries (2 cuts, 1 stall)`). The engine counts retries and says why each
// happened in its `retry` events (a typed RetryCause); this sorts those
// causes into the kinds a person acts on: the network cut a transfer, a
// connection stalled, the server answered with an error status, a connection
// could not be made.
import RangeGet

/// Retries counted by kind.
struct RetryKinds: Sendable {
    /// What made a transfer fail, from the engine's cause.
    enum Kind: Hashable, Comparable, Sendable {
        case cut
        case stall
        case status(Int)
        case connect
        case other

        /// The kind of a `DownloadEvent.retry` cause.
        init(_ cause: RetryCause) {
            switch cause {
            case let .status(code): self = .status(code)
            case .cut: self = .cut
            case .stall: self = .stall
            case .transport(.dnsResolution), .transport(.proxy), .transport(.connectFailed), .transport(.timeout):
                self = .connect
            case .transport, .badAnswer: self = .other
            }
        }

        /// `2 cuts`, `1 HTTP 503 answer`.
        func counted(_ count: Int) -> String {
            let plural = count == 1 ? "" : "s"
            switch self {
            case .cut: return "\(count) cut\(plural)"
            case .stall: return "\(count) stall\(plural)"
            case let .status(code): return "\(count) HTTP \(code) answer\(plural)"
            case .connect: return "\(count) failed connection\(plural)"
            case .other: return "\(count) other failure\(plural)"
            }
        }
    }

    private(set) var counts: [Kind: Int] = [:]

    /// Counts one retry event's cause.
    mutating func add(_ cause: RetryCause) {
        counts[Kind(cause), default: 0] += 1
    }

    /// `3 retries (2 cuts, 1 stall)` for `total` retries, nil for none.
    /// Retries without an event of their own (a transfer of a mirror being
    /// dropped) are `other` failures.
    func phrase(total: Int) -> String? {
        guard total > 0 else { return nil }
        var kinds = counts
        let unnamed = total - kinds.values.reduce(0, +)
        if unnamed > 0 { kinds[.other, default: 0] += unnamed }
        let parts = kinds.sorted { $0.key < $1.key }.map { $0.key.counted($0.value) }
        return "\(total) retr\(total == 1 ? "y" : "ies") (" + parts.joined(separator: ", ") + ")"
    }
}
