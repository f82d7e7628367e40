// `rangeget serve DIR`: the project's own range-capable HTTP/1.1 server on
// loopback, with per-connection and total rate limits, latency and injected
// faults, for demos and benchmarks. The server itself is the RangeServer library.
import Glibc
import Dispatch
import FoundationEssentials
import RangeServer

struct ServeSettings {
    var configuration = RangeServer.Configuration()
    var help = false
}

enum ServeCommand {
    static var command: Command<ServeSettings> { Command(
        name: "serve",
        usage: "rangeget serve DIR [OPTIONS]",
        summary: "Serve the files below DIR on 127.0.0.1 with correct Range, HEAD and keep-alive handling.",
        options: [
            .value("p", "port", "PORT", "listen on PORT (default: any free port)") { settings, text throws(UsageError) in
                settings.configuration.port = UInt16(try Parse.positiveInteger(text, "port", max: 65535))
            },
            .value(nil, "rate-per-connection", "RATE", "cap each connection at RATE bytes/s, e.g. 20M (at most 1T)") { settings, text throws(UsageError) in
                settings.configuration.ratePerConnection = Int(try Parse.bytes(text, "rate-per-connection"))
            },
            .value(nil, "rate-total", "RATE", "cap the whole server at RATE bytes/s, shared fairly by all connections, e.g. 40M (at most 1T)") { settings, text throws(UsageError) in
                settings.configuration.totalRate = Int(try Parse.bytes(text, "rate-total"))
            },
            .value(nil, "burst", "SIZE", "send a rate-limited body SIZE bytes at once, then pause as long as the rate asks, as nginx's limit_rate does (default: smooth pacing; at most 1T)") { settings, text throws(UsageError) in
                settings.configuration.burst = Int(try Parse.bytes(text, "burst"))
            },
            .value(nil, "latency", "MS", "wait MS milliseconds before every response (at most 86400000, a day)") { settings, text throws(UsageError) in
                guard let milliseconds = Double(text), (0...Parse.secondsRange.upperBound * 1000).contains(milliseconds) else {
                    throw UsageError("--latency needs milliseconds from 0 to 86400000, not '\(text)'")
                }
                settings.configuration.latency = milliseconds / 1000
            },
            .value(nil, "fault", "SPEC", "inject a fault, e.g. stall:1048576@request=3 (repeatable)") { settings, text throws(UsageError) in
                do {
                    settings.configuration.faults.append(try FaultRule(parsing: text))
                } catch {
                    throw UsageError("\(error)")
                }
            },
            .flag("h", "help", "show this help") { $0.help = true },
        ],
        details: "Fault specs: FAULT[:ARG...][@TRIGGER]; see Sources/RangeServer/README.md."
    ) }

    static func run(_ arguments: [String]) -> Int32 {
        var settings = ServeSettings()
        let positional: [String]
        do {
            positional = try command.parse(arguments, into: &settings)
            if settings.help { print(command.help); return ExitCode.success.rawValue }
            guard positional.count == 1 else { throw UsageError("serve needs exactly one directory") }
        } catch {
            return fail("\(error)", .usage)
        }
        let directory = positional[0]
        guard isDirectory(directory) else {
            return fail("\(directory) is not a directory", .usage)
        }
        let server = RangeServer(configuration: settings.configuration)
        server.serveDirectory(directory)
        do {
            try server.start()
        } catch {
            return fail("cannot start the server: \(error)", .local)
        }
        TerminalText.printLine("serving \(directory) on http://127.0.0.1:\(server.port)/")
        fflush(nil)
        let interrupts = InterruptHandler {
            server.stop()
            exit(ExitCode.success.rawValue)
        }
        withExtendedLifetime(interrupts) { dispatchMain() }
    }
}
