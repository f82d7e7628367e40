// `rangeget bench URL...`: which mirrors of a file to use, and how many
// connections. Measurement lives in RangeGet's MirrorBenchmark and the
// recommendation in its MirrorChoice; this prints a ranked table and the
// command line to use, or JSON.
import FoundationEssentials
import RangeGet

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct BenchSettings {
    var benchmark = MirrorBenchmark(urls: [])
    var json = false
    var report: String?
    var csv: String?
    var help = false
}

enum BenchCommand {
    static var command: Command<BenchSettings> {
        Command(
            name: "bench",
            usage: [Usage("[OPTIONS] URL [URL...]", "which mirrors to use, and how many connections")],
            summary: """
                Benchmark mirrors of one file: probe time, time to first byte, HTTP version and server,
                throughput on one and on N connections (so whether its rate is per connection or shared),
                TCP connections opened, and whether every mirror serves the same bytes (digests of small
                ranges spread over the file). Ends with the mirrors and -n that are fastest together.
                """,
            options: [
                .value(
                    "n", "connections", "N",
                    "connections for the multi-connection measurement, and the most the recommendation uses (default 8)"
                ) { settings, text throws(UsageError) in
                    settings.benchmark.connections = try Parse.positiveInteger(text, "connections", max: 256)
                },
                .value(
                    nil, "seconds", "SECONDS", "length of each throughput measurement (default 1.25; 0.001 to 86400)"
                ) { settings, text throws(UsageError) in
                    settings.benchmark.seconds = try Parse.seconds(text, "seconds")
                },
                .value(
                    nil, "runs", "N",
                    "measure each throughput N times: the medians, and their spread (default 1, at most 100)"
                ) { settings, text throws(UsageError) in
                    settings.benchmark.runs = try Parse.positiveInteger(text, "runs", max: 100)
                },
                .value(nil, "samples", "N", "ranges compared across mirrors (default 4)") {
                    settings, text throws(UsageError) in
                    settings.benchmark.samples = try Parse.positiveInteger(text, "samples", max: 64)
                },
                .value("H", "header", "'NAME: VALUE'", "send this request header (not Range or If-Range)") {
                    settings, text throws(UsageError) in
                    settings.benchmark.transfer.headerLines.append(try Parse.header(text))
                },
                .flag(nil, "insecure", "do not verify TLS certificates") { $0.benchmark.transfer.insecure = true },
                .flag(nil, "json", "print a JSON object instead of a table") { $0.json = true },
                .value(
                    nil, "report", "FILE",
                    "also write an HTML page: per mirror, throughput against connections and first byte, with the recommendation"
                ) { $0.report = $1 },
                .value(nil, "csv", "FILE", "also write the raw samples (each run, probe, first byte) as CSV") {
                    $0.csv = $1
                },
                .flag("h", "help", "show this help") { $0.help = true }
            ],
            details: """
                Mirrors are measured one after another, so they do not compete for your link. A --report or --csv
                file that cannot be written is exit 4: before anything is measured when its directory refuses it,
                else after the results are printed.
                """
        )
    }

    static func run(_ arguments: [String]) -> Int32 {
        var settings = BenchSettings()
        do {
            let urls = try command.parse(arguments, into: &settings)
            if settings.help {
                print(command.help)
                return ExitCode.success.rawValue
            }
            guard !urls.isEmpty else { throw UsageError("bench needs at least one URL") }
            for url in urls { try CommandLineURL.check(url) }
            settings.benchmark.urls = urls
        } catch {
            return fail("\(error)", .usage)
        }
        if let failure = [settings.report, settings.csv].compactMap({ $0 }).lazy.compactMap(PageFile.unwritable).first {
            return fail(failure, .local)
        }
        let display = ProgressDisplay(quiet: settings.json)
        // URLs are shown without user:password (a table or a log must not carry them).
        let results = settings.benchmark.run { step in display.message(OutgoingText.clean(step)) }.map { measurement in
            var shown = measurement
            shown.url = OutgoingText.withoutUserinfo(measurement.url)
            return shown
        }
        let choice = MirrorChoice(results, connections: settings.benchmark.connections)
        if settings.json {
            print(JSONSummary.encode(BenchReport(mirrors: results, recommendation: choice)))
        } else {
            print(table(results))
            print(advice(choice, results))
        }
        let outcome = BenchOutcome(
            results: results, choice: choice, connections: settings.benchmark.connections,
            seconds: settings.benchmark.seconds, runs: settings.benchmark.runs, samples: settings.benchmark.samples)
        if let failure = writeFiles(settings, outcome) { return fail(failure, .local) }
        return results.contains { $0.error == nil } ? ExitCode.success.rawValue : ExitCode.network.rawValue
    }

    /// Writes the --report page and the --csv samples asked for; why one could not be written, or nil.
    private static func writeFiles(_ settings: BenchSettings, _ outcome: BenchOutcome) -> String? {
        if let page = settings.report, let failure = PageFile.write(BenchPage.html(outcome), to: page) {
            return failure
        }
        if let csv = settings.csv {
            let text = BenchSamples.csv(outcome.results, connections: outcome.connections)
            if let failure = PageFile.write(text, to: csv) { return failure }
        }
        return nil
    }

    struct BenchReport: Encodable {
        var mirrors: [MirrorMeasurement]
        var recommendation: MirrorChoice
    }

    /// The command line to use, why, and a warning naming mirrors that serve other bytes; each line escaped.
    static func advice(_ choice: MirrorChoice, _ results: [MirrorMeasurement]) -> String {
        guard !choice.mirrors.isEmpty else { return TerminalText.escaped("recommendation: none: " + choice.reason) }
        var lines = [
            "recommendation: rangeget -n \(choice.connections) " + choice.mirrors.joined(separator: " "),
            "  (\(choice.reason))"
        ]
        let differing = results.filter { $0.sameBytes == false }.map(\.url)
        if !differing.isEmpty {
            lines.append("  WARNING: serves different bytes, do not use: " + differing.joined(separator: ", "))
        }
        return lines.map(TerminalText.escaped).joined(separator: "\n")
    }

    private static func table(_ results: [MirrorMeasurement]) -> String {
        let ranked = results.sorted { ($0.manyConnections ?? -1) > ($1.manyConnections ?? -1) }
        var rows = [
            ["#", "MIRROR", "PROBE", "TTFB", "HTTP", "SERVER", "1 CONN", "N CONN", "LIMIT", "TCP", "SAME BYTES"]
        ]
        func rate(_ value: Double?, runs: [Double] = []) -> String {
            guard let value else { return "-" }
            let text = ByteCount.format(Int64(saturating: value)) + "/s"
            // With --runs: half the range of the runs, against their median.
            guard runs.count > 1, let low = runs.min(), let high = runs.max(), value > 0 else { return text }
            return text + " ±\(Int(((high - low) / 2 / value * 100).rounded()))%"
        }
        func millis(_ value: Double?) -> String {
            value.map { "\(Int64(saturating: ($0 * 1000).rounded())) ms" } ?? "-"
        }
        for (rank, result) in ranked.enumerated() {
            if let error = result.error {
                rows.append(["\(rank + 1)", result.url, "-", "-", "-", "-", "-", "-", "-", "-", "error: \(error)"])
                continue
            }
            rows.append([
                "\(rank + 1)", result.url, millis(result.probeSeconds), millis(result.timeToFirstByte),
                result.httpVersion ?? "-", result.server ?? "-",
                rate(result.oneConnection, runs: result.oneConnectionRuns),
                rate(result.manyConnections, runs: result.manyConnectionsRuns),
                result.limit?.rawValue ?? "-", result.tcpConnections.map(String.init) ?? "-",
                result.sameBytes.map { $0 ? "yes" : "NO" } ?? "-"
            ])
        }
        return TerminalText.table(rows)
    }
}
