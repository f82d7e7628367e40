// One run of the soak (SoakTests), drawn from its seed alone: 1-3
// RangeServers with their faults and pacing, one file or a list of 2-6,
// the command line, and the time the run may take. A plan is a pure value:
// the same seed gives the same plan, so a failure replays from its seed.
import RangeServer

struct SoakPlan {
    /// One server: its fault rules and pacing.
    struct Server {
        var faults: [FaultRule]
        var ratePerConnection: Int?
        var burst: Int?
        var latencyMilliseconds: Int

        var configuration: RangeServer.Configuration {
            .init(
                ratePerConnection: ratePerConnection, burst: burst, latency: Double(latencyMilliseconds) / 1000,
                faults: faults)
        }

        /// The options of `rangeget serve DIR` that set this server up.
        var serveOptions: [String] {
            (ratePerConnection.map { ["--rate-per-connection", "\($0)"] } ?? [])
                + (burst.map { ["--burst", "\($0)"] } ?? [])
                + (latencyMilliseconds > 0 ? ["--latency", "\(latencyMilliseconds)"] : [])
                + faults.flatMap { ["--fault", $0.description] }
        }
    }

    /// One file to fetch: its generated content and the servers that serve it
    /// (the first is the URL, the others its mirrors, in this order).
    struct File {
        var name: String
        var size: Int64
        var contentSeed: UInt64
        var servers: [Int]

        var resource: Resource { .generated(size: size, seed: contentSeed) }
    }

    /// The command line's options besides the output and the URLs.
    struct Limits {
        var connections: Int
        var jobs: Int?
        var retries: Int
        var retryWait: Double
        var stallTimeout: Double
        var connectTimeout: Double
        var maxWait: Double
        var minimumSplit: String
        var useHead: Bool

        var options: [String] {
            [
                "-q", "-n", "\(connections)", "-k", minimumSplit, "--retries", "\(retries)", "--retry-wait",
                "\(retryWait)",
                "--stall-timeout", "\(stallTimeout)", "--connect-timeout", "\(connectTimeout)", "--max-wait",
                "\(maxWait)"
            ]
                + (useHead ? ["--use-head"] : []) + (jobs.map { ["-j", "\($0)"] } ?? [])
        }
    }

    let seed: UInt64
    var servers: [Server] = []
    var files: [File] = []
    /// Whether the files go in a list (`-i`), even a list of one.
    var isList = false
    var limits: Limits
    /// After a failed run: whether the same command runs again with the
    /// faults gone, and must then complete.
    var healsAfterFailure: Bool

    init(seed: UInt64) {
        self.seed = seed
        var draw = Draws(seed: seed)
        let retries = draw.pick([0, 1, 2, 3, 5])
        let connections = draw.pick([1, 2, 3, 4, 8])
        limits = Limits(
            connections: connections, jobs: nil, retries: retries, retryWait: draw.pick([0.01, 0.05, 0.2]),
            stallTimeout: draw.pick([1, 2]), connectTimeout: draw.pick([1, 2]), maxWait: draw.pick([0.5, 1, 2]),
            minimumSplit: draw.pick(["64K", "256K", "1M"]), useHead: draw.chance(0.25))
        healsAfterFailure = draw.chance(0.5)
        let serverCount = draw.pick([1, 1, 2, 2, 3])
        for _ in 0..<serverCount { servers.append(Self.server(limits: limits, &draw)) }

        isList = draw.chance(0.4)
        let fileCount = isList ? Int(draw.below(5)) + 2 : 1
        if isList { limits.jobs = draw.pick([nil, 1, 2, 3]) }
        for index in 0..<fileCount {
            // A list entry has 1 to all of the servers, in a drawn order.
            let mirrors = isList ? Int(draw.below(UInt64(serverCount))) + 1 : serverCount
            let order = Array(0..<serverCount).shuffled(using: &draw).prefix(mirrors)
            files.append(
                File(
                    name: "f\(index).bin", size: Self.size(&draw), contentSeed: seed &+ UInt64(index) &* 7919,
                    servers: Array(order)))
        }
        // Faults are drawn once the sizes are known, so cut and range offsets fit.
        let largest = files.map(\.size).max() ?? 0
        for index in servers.indices {
            let count = draw.pick([0, 1, 1, 2, 3])
            servers[index].faults = (0..<count).map { _ in Self.fault(size: largest, limits: limits, &draw) }
        }
    }

    // MARK: Drawing

    private static func server(limits: Limits, _ draw: inout Draws) -> Server {
        let rate: Int? = draw.pick([nil, nil, 2 << 20, 8 << 20])
        return Server(
            faults: [], ratePerConnection: rate, burst: rate == nil ? nil : draw.pick([nil, 64 << 10]),
            latencyMilliseconds: draw.pick([0, 0, 5, 30]))
    }

    /// 0, 1, tiny, around 64 KiB and 1 MiB, odd sizes, a few MiB.
    private static func size(_ draw: inout Draws) -> Int64 {
        switch draw.below(8) {
        case 0: 0
        case 1: 1
        case 2: draw.pick([2, 7, 999, 4097])
        case 3: draw.pick([65_535, 65_537, 131_071])
        case 4: (1 << 20) + draw.pick([-1, 0, 1])
        case 5, 6: Int64(draw.below(1_400_000) + 100_000) | 1
        default: Int64(draw.below(2_000_000) + 1_500_000) | 1
        }
    }

    /// A fault drawn from those the issue names, with a trigger. Faults that
    /// cost a stall timeout or hand over only a few bytes each time get
    /// sparse triggers, so every run stays short: a fault on every request
    /// that moved 1 byte each would take a million requests.
    private static func fault(size: Int64, limits: Limits, _ draw: inout Draws) -> FaultRule {
        let offset = { (draw: inout Draws) -> Int64 in size < 2 ? 0 : Int64(draw.below(UInt64(size))) }
        switch draw.below(16) {
        case 0:
            return FaultRule(.cutAfter(0), when: trigger(sparse: false, &draw))
        case 1:
            return FaultRule(.cutAfter(draw.chance(0.3) ? 1 : offset(&draw)), when: trigger(sparse: true, &draw))
        case 2:
            return FaultRule(.cutAtRandom(seed: draw.below(1000)), when: trigger(sparse: false, &draw))
        case 3:
            return FaultRule(.stallAfter(draw.chance(0.3) ? 0 : offset(&draw)), when: trigger(sparse: true, &draw))
        case 4:
            return FaultRule(
                .status(draw.pick([500, 502, 503, 504]), retryAfter: nil), when: trigger(sparse: false, &draw))
        case 5:
            // Retry-After within --max-wait, just past it, or far past it.
            let retryAfter = draw.pick([0, 1, Int(limits.maxWait.rounded(.up)) + 1, 3600])
            return FaultRule(
                .status(draw.pick([503, 429, 500]), retryAfter: retryAfter), when: trigger(sparse: false, &draw))
        case 6:
            return FaultRule(
                .wrongContentRangeShift(draw.pick([-4096, -1, 1, 7, 4096])), when: trigger(sparse: false, &draw))
        case 7:
            let total = max(0, size + draw.pick([-1, 1, 1000, size]))
            return FaultRule(.wrongContentRangeTotal(total), when: trigger(sparse: false, &draw))
        case 8:
            return FaultRule(.invertedContentRange, when: trigger(sparse: false, &draw))
        case 9:
            return FaultRule(.overlong(draw.pick([1, 100, 65_536])), when: trigger(sparse: false, &draw))
        case 10:
            return FaultRule(.hang, when: trigger(sparse: true, &draw))
        case 11:
            return draw.chance(0.5)
                ? FaultRule(.headHang, when: trigger(sparse: false, &draw))
                : FaultRule(.headStatus(draw.pick([403, 405, 501])), when: trigger(sparse: false, &draw))
        case 12:
            let claim = draw.chance(0.5) ? "\(size * 2 + 1)" : "99999999999999999999"
            return FaultRule(.claimLength(claim), when: trigger(sparse: false, &draw))
        case 13:
            return FaultRule(draw.chance(0.5) ? .ignoreRange : .multipart, when: trigger(sparse: false, &draw))
        default:
            return FaultRule(.delay(milliseconds: draw.pick([50, 200, 600])), when: trigger(sparse: false, &draw))
        }
    }

    /// Always, one request, every request from one on, or a seeded chance;
    /// `sparse` keeps to one request or a chance of at most 1 in 4.
    private static func trigger(sparse: Bool, _ draw: inout Draws) -> Trigger {
        let request = Int(draw.below(6)) + 1
        switch draw.below(sparse ? 2 : 8) {
        case 0: return .nthRequest(request)
        case 1: return .probability(draw.pick([0.1, 0.25]), seed: draw.below(1000))
        case 2, 3: return .nthRequest(request)
        case 4: return .probability(draw.pick([0.3, 0.5]), seed: draw.below(1000))
        case 5: return .fromRequest(request + 1)
        default: return .always
        }
    }

    // MARK: What a run may expect

    /// Why `file` must be fetched whole, or nil where a clean failure is
    /// fine. Either every fault of its servers is one another try mends (a
    /// cut, a stall, a 5xx without a Retry-After beyond --max-wait, each on
    /// one request and no more of them on a server than --retries allows
    /// one piece; a late head; anything on HEAD alone, which a ranged GET
    /// replaces), or one of its mirrors has no fault at all while none lies
    /// about the size, and a piece may be tried 3 times: the bad mirrors'
    /// failures can then be worked around.
    func mustComplete(_ file: File) -> String? {
        let mirrors = file.servers.map { servers[$0] }
        if mirrors.allSatisfy(mended) { return "every fault of its servers is one another try mends" }
        let liars = mirrors.filter { $0.faults.contains { rule in rule.fault.liesAboutTheSize } }
        guard limits.retries >= 2, liars.isEmpty,
            let healthy = file.servers.first(where: { servers[$0].faults.isEmpty })
        else {
            return nil
        }
        return
            "server \(healthy + 1) of the \(servers.count) below has no fault, none of its mirrors lies about the size, "
            + "and --retries is \(limits.retries)"
    }

    private func mended(_ server: Server) -> Bool {
        var oneOffs = 0
        for rule in server.faults {
            switch (rule.fault, rule.trigger) {
            case (.headHang, _), (.headStatus, _):
                continue
            case (.delay(let milliseconds), _) where Double(milliseconds) < 1000 * limits.stallTimeout:
                continue
            case (.cutAfter, .nthRequest), (.cutAtRandom, .nthRequest), (.stallAfter, .nthRequest),
                (.status(_, nil), .nthRequest):
                oneOffs += 1
            case (.status(_, let retryAfter?), .nthRequest) where Double(retryAfter) <= limits.maxWait:
                oneOffs += 1
            default:
                return false
            }
        }
        return oneOffs <= limits.retries
    }

    /// The totals below `file`'s size that a server of it names in a
    /// Content-Range (range-total): a file of such a size is what that
    /// server serves, as far as any client can tell.
    func smallerTotals(of file: File) -> Set<Int64> {
        Set(
            file.servers.flatMap { servers[$0].faults }.compactMap { rule in
                guard case let .wrongContentRangeTotal(total) = rule.fault, total < file.size else { return nil }
                return total
            })
    }

    /// Seconds the run may take before it counts as hung: the files that
    /// run one after the other, each allowed every retry with a stall and
    /// a connect timeout, the longest Retry-After and the backoff, plus the
    /// bytes at the slowest rate and a margin for a loaded machine.
    var timeout: Double {
        let parallel = min(limits.jobs ?? limits.connections, limits.connections)
        let rounds = Double((files.count + parallel - 1) / parallel)
        let attempt = limits.stallTimeout + limits.connectTimeout + limits.maxWait + 1
        let backoff = limits.retryWait * Double(1 << (limits.retries + 1))
        let slowest = Double(servers.compactMap(\.ratePerConnection).min() ?? (64 << 20))
        let transfer = Double(files.map(\.size).reduce(0, +)) / slowest
        return 20 + rounds * (Double(limits.retries + 3) * attempt + backoff) + transfer
    }
}

extension Fault {
    /// Whether the fault gives another size than the file's: a Content-Range
    /// total or a Content-Length.
    fileprivate var liesAboutTheSize: Bool {
        switch self {
        case .wrongContentRangeTotal, .claimLength: true
        default: false
        }
    }
}
