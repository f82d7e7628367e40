// ConnectionTuner: how many connections a download runs (`-n auto`).
//
// A cap on each connection (nginx's limit_rate, a CDN's per-flow shaping)
// rewards more connections; a shared uplink, a full disk or a busy CPU does
// not, and a server's connection limit answers the extra ones with 503.
// Rates alone cannot tell them apart; a change of count can. So the tuner
// runs rounds: from the count it has, it doubles while each added connection
// adds at least `gainShare` of what the connections before averaged, then,
// if the first doubling did not pay, sheds a quarter (`firstShed`) and
// halves while the total stays within `lossShare` of the best total of the
// round. It starts at the ceiling: every connection added costs a request's
// round trip before it delivers, and from 8, on a server 300 ms away capping
// each connection, the round to 16 cost 12% of the download. A round measures each count
// over a window of all its connections delivering (`window(longestGap:)`):
// several of a bursty server's pauses, and short enough on a smooth one
// that a round from 8 to 16 costs a fraction of a second. Settled, it watches the
// total: one that moves by more than `driftShare` for two windows in a row
// (a server that throttles late, a limit lifted) starts a new round, and
// every `interval` seconds (doubling while the count holds) it tries one
// doubling. A loop with no idle moment (the CPU or the disk is the limit,
// as on loopback) only sheds, down to `saturatedFloor`, while it stays
// saturated, whatever the totals say: there they swing with writeback, the
// other core and the host, the count is not what limits them, and fewer
// connections cost less. A server that refuses a connection while others
// run (503, 429) sets a limit the count never goes above again. Pure: the engine measures,
// starts and sheds connections.

/// The number of connections a download should run, learned from changes of count.
struct ConnectionTuner: Sendable {
    /// The connections to run now.
    private(set) var target: Int
    /// The most connections it ever asked for.
    private(set) var peak: Int
    /// The count the last round ended at.
    private(set) var settled: Int
    /// Why the count is what it is, for the report.
    private(set) var reason: String
    /// The most connections it may ask for (`--max-per-host`).
    let ceiling: Int
    /// The most the server accepted: it refused one more.
    private(set) var serverLimit: Int?

    private enum Phase: Sendable, Equatable {
        /// Waiting for a total at `target`, then a round (`probe`) or a settle.
        case measuring(probe: Bool)
        /// A round: `base` connections measured `rate`; `best` is the round's
        /// best total; `up` while doubling.
        case round(base: Int, rate: Double, best: Double, up: Bool, grew: Bool)
        /// Holding `target`, measured at `rate`, since `since`.
        case settled(rate: Double, since: Double)
    }

    private var phase = Phase.measuring(probe: true)
    /// Windows in a row whose total moved from the settled one by more than `driftShare`.
    private var drift = 0
    /// Seconds before a settled count tries one doubling.
    private var interval = Self.firstInterval
    /// What the round found, for `reason`.
    private var findings: [String] = []
    /// Windows measured at `target` and not yet acted on: their sum, count,
    /// and when the last ended.
    private var pending = (sum: 0.0, count: 0, at: 0.0)

    /// Seconds of all connections delivering that measure one count: three
    /// times the longest pause of a connection (`longestGap`; nginx's default
    /// pacing sends 2 MiB at once, then sleeps), within limits. A round
    /// from 8 to 16 on a smooth server costs a few tenths of a second.
    static func window(longestGap: Double) -> Double {
        min(longestWindow, max(shortestWindow, 3 * longestGap))
    }
    static let shortestWindow = 0.15
    static let longestWindow = 1.0
    /// An added connection must add this share of the average connection's rate.
    static let gainShare = 0.25
    /// Fewer connections may lose this share of the round's best total.
    static let lossShare = 0.07
    /// The fewest connections a saturated loop sheds to: with one, the loop
    /// idles while its request is between pieces (on loopback, -n 1 took
    /// 1.16x -n 2's wall, and 2 to 8 were within 3%).
    static let saturatedFloor = 2
    /// A loss this large is judged on one window.
    static let clearLoss = 0.2
    /// A settled total that moves by more than this share starts a new round.
    static let driftShare = 0.3
    static let firstInterval = 2.0
    static let longestInterval = 16.0

    /// A tuner that starts at `start` connections and never asks for more than `ceiling`.
    init(start: Int, ceiling: Int) {
        self.ceiling = max(1, ceiling)
        target = min(max(1, start), self.ceiling)
        peak = target
        settled = target
        reason = "started at \(target)"
    }

    private var limit: Int { min(ceiling, serverLimit ?? ceiling) }

    /// Takes the total bytes per second over the last `window` with
    /// `target` connections all delivering (nil when there is no such
    /// window) and moves `target`. `saturated`: the transfer loop had no
    /// idle moment in that window (the bottleneck is here: the CPU or the
    /// disk, not the server). `worthProbing` is false near the end, where a
    /// round would not pay back its new requests; `worthShedding` is false
    /// while fewer connections would cost more than they could save: a shed
    /// connection that turns out to have counted comes back a window and a
    /// request's round trip behind, and the download ends that much later.
    /// A saturated loop sheds all the same: there the shed ones did not count.
    mutating func update(
        rate measured: Double?, saturated: Bool = false, window: Double = 0, now: Double, worthProbing: Bool,
        worthShedding: Bool = true
    ) {
        guard let measured, measured > 0 else { return }
        // Fewer connections are judged on two windows, a `window` apart: the
        // loss they are allowed is within one window's noise.
        if pending.count > 0, now - pending.at < window { return }
        pending = (pending.sum + measured, pending.count + 1, now)
        var needed = 1
        switch phase {
        case .measuring: needed = 2
        // A clear loss needs no second window: each one costs the shed
        // connections' share (on a server 300 ms away, a tenth of the run).
        case let .round(_, _, best, false, _) where measured >= (1 - Self.clearLoss) * best: needed = 2
        default: break
        }
        guard pending.count >= needed else { return }
        let rate = pending.sum / Double(pending.count)
        pending = (0, 0, now)
        switch phase {
        case let .measuring(probe):
            if probe && worthProbing {
                startRound(rate: rate, saturated: saturated, worthShedding: worthShedding, now: now)
            } else {
                settle(rate: rate, now: now)
            }
        case let .round(base, baseRate, best, up, grew):
            if up {
                let added = Double(target - base)
                if rate - baseRate >= Self.gainShare * added * baseRate / Double(base) {
                    findings.append("\(target) added \(percent(rate / baseRate - 1))")
                    if target < limit && worthProbing {
                        phase = .round(base: target, rate: rate, best: max(best, rate), up: true, grew: true)
                        set(min(limit, 2 * target))
                    } else {
                        settle(rate: rate, now: now)
                    }
                    return
                }
                findings.append("\(target) added \(percent(rate / baseRate - 1))")
                // Back to the count that paid; below it only when no doubling
                // paid this round (then fewer may do as well).
                if !grew && base > 1 && worthShedding {
                    phase = .round(base: base, rate: baseRate, best: max(best, baseRate), up: false, grew: false)
                    set(Self.firstShed(from: base))
                } else {
                    set(base)
                    settle(rate: baseRate, now: now)
                }
            } else {
                // Still saturated, fewer connections lose nothing the
                // server gave: the loop was the limit at both counts, and
                // what its total lost went to the machine (writeback, the
                // other core, a host's page faults: on a VM, loopback totals
                // swung by half from one window to the next at every count).
                let stillSaturated = saturated && target >= Self.saturatedFloor
                let kept = stillSaturated || rate >= (1 - Self.lossShare) * best
                let lost = percent(1 - rate / best)
                findings.append("\(target) \(kept ? "kept" : "lost") \(lost)\(stillSaturated ? " (saturated)" : "")")
                let floor = saturated ? Self.saturatedFloor : 1
                // Saturated, a shed costs nothing the server gave: the
                // payback rule is for connections that counted.
                if kept && target > floor && (worthShedding || stillSaturated) {
                    phase = .round(base: target, rate: rate, best: best, up: false, grew: false)
                    set(max(floor, target / 2))
                } else if kept {
                    settle(rate: rate, now: now)
                } else {
                    set(base)
                    settle(rate: baseRate, now: now)
                }
            }
        case let .settled(settledRate, since):
            if abs(rate - settledRate) > Self.driftShare * settledRate {
                drift += 1
                guard drift >= 2 else { return }
                let moved = "the total moved \(percent(rate / settledRate - 1)) at \(target)"
                interval = Self.firstInterval
                startRound(rate: rate, saturated: saturated, worthShedding: worthShedding, now: now)
                findings.insert(moved, at: 0)
                return
            }
            drift = 0
            if now - since >= interval, target < limit, worthProbing, !saturated {
                interval = min(Self.longestInterval, 2 * interval)
                findings = []
                phase = .round(base: target, rate: rate, best: rate, up: true, grew: true)
                set(min(limit, 2 * target))
            }
        }
    }

    /// The server refused a connection while `running` others of it ran
    /// (503 or 429): it takes no more than those, for the rest of the run.
    mutating func refused(running: Int) {
        let accepted = max(1, running)
        serverLimit = min(serverLimit ?? accepted, accepted)
        guard target > limit else { return }
        set(limit)
        settled = target
        reason = "the server refused more than \(limit) connections"
        findings = []
        phase = .measuring(probe: false)
    }

    private mutating func startRound(rate: Double, saturated: Bool, worthShedding: Bool, now: Double) {
        // At the count a server accepted, a shed's connection, once back,
        // is refused while the server still counts the one stopped (and
        // waits out its Retry-After): a server's limit is not probed.
        // Saturated, a round sheds no lower than `saturatedFloor`.
        let floor = saturated ? Self.saturatedFloor : 1
        guard (target < limit && !saturated || target > floor) && target != serverLimit else {
            phase = .settled(rate: rate, since: 0)
            return
        }
        findings = []
        // Saturated, more connections cannot help: the round only sheds.
        if target < limit && !saturated {
            phase = .round(base: target, rate: rate, best: rate, up: true, grew: false)
            set(min(limit, 2 * target))
        } else if !worthShedding && !saturated {
            findings = ["fewer would cost more than they could save"]
            settle(rate: rate, now: now)
        } else {
            phase = .round(base: target, rate: rate, best: rate, up: false, grew: false)
            set(max(floor, Self.firstShed(from: target)))
        }
    }

    /// The first count a round tries below `count`: a quarter fewer. Where
    /// every connection counts (a cap on each), the shed ones cost a request
    /// each to start again, so the first try sheds few; where the total
    /// holds, the next tries halve.
    static func firstShed(from count: Int) -> Int {
        max(1, count - max(1, count / 4))
    }

    private mutating func settle(rate: Double, now: Double) {
        if target != settled || findings.isEmpty == false {
            settled = target
            let limitNote =
                serverLimit == target
                ? "the server refused more than \(target)" : target == ceiling ? "\(target) is the most allowed" : nil
            reason = (["settled at \(target)"] + findings + (limitNote.map { [$0] } ?? [])).joined(separator: "; ")
        }
        drift = 0
        phase = .settled(rate: rate, since: now)
    }

    private mutating func set(_ count: Int) {
        pending = (0, 0, 0)
        target = count
        peak = max(peak, count)
    }

    private func percent(_ share: Double) -> String {
        "\(Int((share * 100).rounded()))%"
    }
}
