import Dispatch
import FoundationEssentials
import RangeServer

// `rangeget serve DIR`: the project's own range-capable HTTP/1.1 server on
// loopback, with per-connection and total rate limits, latency and injected
// faults, for demos and benchmarks. The server itself is the RangeServer library.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct ServeSettings {
    var configuration = RangeServer.Configuration()
    /// `--change-after`: seconds from the first request to the rate change.
    var changeAfter: Double?
    /// The limits after the change (`--then-*`; nil: none of that kind).
    var thenRatePerConnection: Int?
    var thenTotalRate: Int?
    /// Whether a `--then-*` option was given (they need `--change-after`).
    var thenGiven = false
    /// `--report-every`: seconds between progress lines on stdout.
    var reportEvery: Double?
    var help = false
}

enum ServeCommand {
    static var command: Command<ServeSettings> {
        Command(
            name: "serve",
            usage: [Usage("DIR [OPTIONS]", "a range-capable test server on 127.0.0.1")],
            summary: "Serve the files below DIR on 127.0.0.1 with correct Range, HEAD and keep-alive handling.",
            options: [
                .value("p", "port", "PORT", "listen on PORT (default: any free port)") {
                    settings, text throws(UsageError) in
                    settings.configuration.port = UInt16(try Parse.positiveInteger(text, "port", max: 65535))
                },
                .value(nil, "rate-per-connection", "RATE", "cap each connection at RATE bytes/s, e.g. 20M (at most 1T)")
                { settings, text throws(UsageError) in
                    settings.configuration.ratePerConnection = Int(try Parse.bytes(text, "rate-per-connection"))
                },
                .value(
                    nil, "rate-total", "RATE",
                    "cap the whole server at RATE bytes/s, shared fairly by all connections, e.g. 40M (at most 1T)"
                ) { settings, text throws(UsageError) in
                    settings.configuration.totalRate = Int(try Parse.bytes(text, "rate-total"))
                },
                .value(
                    nil, "burst", "SIZE",
                    "send a rate-limited body SIZE bytes at once, then pause as long as the rate asks, as nginx's limit_rate does (default: smooth pacing; at most 1T)"
                ) { settings, text throws(UsageError) in
                    settings.configuration.burst = Int(try Parse.bytes(text, "burst"))
                },
                .value(nil, "latency", "MS", "wait MS milliseconds before every response (at most 86400000, a day)") {
                    settings, text throws(UsageError) in
                    guard let milliseconds = Double(text),
                        (0...Parse.secondsRange.upperBound * 1000).contains(milliseconds)
                    else {
                        throw UsageError("--latency needs milliseconds from 0 to 86400000, not '\(text)'")
                    }
                    settings.configuration.latency = milliseconds / 1000
                },
                .value(
                    nil, "connection-limit", "K",
                    "answer 503 (Retry-After: 1, connection closed) to a request that arrives while K others are being processed, as nginx's limit_conn does"
                ) { settings, text throws(UsageError) in
                    settings.configuration.connectionLimit = try Parse.positiveInteger(text, "connection-limit")
                },
                .value(
                    nil, "expiring-urls", "SECONDS",
                    "serve each file only at a signed URL valid for SECONDS, issued by GET /sign/NAME; other requests for it get 403"
                ) { settings, text throws(UsageError) in
                    settings.configuration.urlLifetime = try Parse.seconds(text, "expiring-urls")
                },
                .value(
                    nil, "change-after", "SECONDS",
                    "SECONDS after the first request, replace both rate limits by the --then-* ones (absent: no limit)"
                ) { settings, text throws(UsageError) in
                    settings.changeAfter = try Parse.seconds(text, "change-after")
                },
                .value(
                    nil, "then-rate-per-connection", "RATE",
                    "with --change-after: each connection's cap from then on (0: none; at most 1T)"
                ) { settings, text throws(UsageError) in
                    settings.thenRatePerConnection = try rateOrNone(text, "then-rate-per-connection")
                    settings.thenGiven = true
                },
                .value(
                    nil, "then-rate-total", "RATE",
                    "with --change-after: the whole server's cap from then on (0: none; at most 1T)"
                ) { settings, text throws(UsageError) in
                    settings.thenTotalRate = try rateOrNone(text, "then-rate-total")
                    settings.thenGiven = true
                },
                .value(
                    nil, "report-every", "SECONDS",
                    "print a line 'report t=SECONDS bytes=N signed=N forbidden=N over-limit=N' on stdout every SECONDS once a request came, and at exit: seconds since the first request, body bytes sent, signed URLs issued, 403s and 503s"
                ) { settings, text throws(UsageError) in
                    settings.reportEvery = try Parse.seconds(text, "report-every")
                },
                .value(nil, "fault", "SPEC", "inject a fault, e.g. stall:1048576@request=3 (repeatable)") {
                    settings, text throws(UsageError) in
                    do {
                        settings.configuration.faults.append(try FaultRule(parsing: text))
                    } catch {
                        throw UsageError("\(error)")
                    }
                },
                .flag("h", "help", "show this help") { $0.help = true }
            ],
            details: """
                Fault specs: FAULT[:ARG[:ARG]][@TRIGGER]. Rules are tried in the order given; the first whose
                trigger matches and whose fault applies to the request's method wins.
                Faults:
                  ignore-range              200 with the whole body to a ranged GET
                  range-shift:N             206 whose Content-Range and body are shifted by N bytes (may be negative)
                  range-total:N             206 naming N as the total
                  range-inverted            206 with its Content-Range first and last swapped
                  cut:N                     headers and N body bytes, then close
                  cut-random:SEED           close at a point drawn from SEED and the request number
                  stall:N                   N body bytes, then silence until the client closes
                  status:CODE[:SECONDS]     that status, with Retry-After: SECONDS if given
                  retry-after:CODE:VALUE    that status with Retry-After: VALUE as given
                  head-status:CODE          HEAD gets that status (405 adds Allow: GET)
                  head-hang                 HEAD is never answered
                  hang                      the request (any method) is never answered
                  delay:MS                  the head (any method) comes MS ms late, on top of --latency
                  head-no-length            HEAD without Content-Length
                  no-accept-ranges          no Accept-Ranges header; ranges still honoured
                  accept-ranges-none        Accept-Ranges: none, and ranges ignored
                  gzip                      Content-Encoding: gzip, body unchanged
                  multipart                 multipart/byteranges answer to a range
                  chunked                   chunked, no Content-Length, Range ignored
                  change-content            the file is replaced first: same size, other bytes, new ETag
                  change-size:N             the file is replaced by one of N bytes
                  weak-etag                 ETag sent as W/"..." (so If-Range never matches)
                  redirect:LOCATION[:3XX]   redirect to LOCATION (302 by default; LOCATION may hold ':')
                  claim-length:DIGITS       200 with the whole body under Content-Length: DIGITS, then close
                  overlong:N                206 with N bytes past the range
                  header:NAME:VALUE         the response's NAME field set to VALUE (%XX escapes), then close
                Triggers (default always): request=N the N-th GET or HEAD to the path; from=N the N-th and
                later; range-start=OFFSET a single range starting there; p=P[,seed=S] a draw from S and the
                request number; method=METHOD one method.
                Examples: stall:1048576@request=3  cut-random:7@p=0.3,seed=1  status:503:2@from=2
                """
        )
    }

    static func run(_ arguments: [String]) -> Int32 {
        var settings = ServeSettings()
        let positional: [String]
        do {
            positional = try command.parse(arguments, into: &settings)
            if settings.help {
                print(command.help)
                return ExitCode.success.rawValue
            }
            guard positional.count == 1 else { throw UsageError("serve needs exactly one directory") }
            if settings.thenGiven && settings.changeAfter == nil {
                throw UsageError("--then-rate-per-connection and --then-rate-total need --change-after")
            }
        } catch {
            return fail("\(error)", .usage)
        }
        let directory = positional[0]
        guard isDirectory(directory) else {
            return fail("\(directory) is not a directory", .usage)
        }
        var configuration = settings.configuration
        configuration.rateChange = settings.changeAfter.map {
            RateChange(after: $0, ratePerConnection: settings.thenRatePerConnection, totalRate: settings.thenTotalRate)
        }
        let server = RangeServer(configuration: configuration)
        server.serveDirectory(directory)
        do {
            try server.start()
        } catch {
            return fail("cannot start the server: \(error)", .local)
        }
        TerminalText.printLine("serving \(directory) on http://127.0.0.1:\(server.port)/")
        fflush(nil)
        let reports = settings.reportEvery.map { report(server, every: $0) }
        let reporting = reports != nil
        let interrupts = InterruptHandler {
            server.stop()
            if reporting { printReport(server.statistics) }
            exit(ExitCode.success.rawValue)
        }
        withExtendedLifetime((interrupts, reports)) { dispatchMain() }
    }

    /// A rate given as 0 means no limit.
    private static func rateOrNone(_ text: String, _ option: String) throws(UsageError) -> Int? {
        let rate = try Parse.bytes(text, option, range: 0...Parse.largestSize)
        return rate == 0 ? nil : Int(rate)
    }

    /// Prints a report line (see ``printReport(_:)``) every `interval`
    /// seconds once the server had a request: what a benchmark reads to see
    /// the rate over time and what the server refused.
    private static func report(_ server: RangeServer, every interval: Double) -> DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "serve report"))
        timer.schedule(deadline: .now() + interval, repeating: interval)
        timer.setEventHandler { printReport(server.statistics) }
        timer.resume()
        return timer
    }

    /// `report t=SECONDS bytes=N signed=N forbidden=N over-limit=N`: seconds
    /// since the first request, body bytes sent, signed URLs issued, 403s for
    /// tokens and 503s over the connection limit; nothing before a request.
    private static func printReport(_ statistics: Statistics) {
        guard let first = statistics.firstRequestAt else { return }
        let seconds = (Date().timeIntervalSince(first) * 1000).rounded() / 1000
        print(
            "report t=\(seconds) bytes=\(statistics.bodyBytesSent) signed=\(statistics.urlsSigned) "
                + "forbidden=\(statistics.refusedForToken) over-limit=\(statistics.refusedOverLimit)")
        fflush(nil)
    }
}
