// rangeget-example: a small program that uses only RangeGet's public API.
//
//   rangeget-example [-n CONNECTIONS] URL PATH   download URL to PATH, resuming
//                                                a partial download left there
//   rangeget-example --data URL                  fetch a small file into memory
//
// It prints the download's events as they come. SIGUSR1 pauses the download
// (every connection closes, the manifest is saved) and the next SIGUSR1
// resumes it: `kill -USR1 PID`. Ctrl-C cancels and keeps the resume state: run
// the same command again to continue. Exit codes: 0 done, 1 failed, 2 usage,
// 130 cancelled.
import Dispatch
import Foundation
import RangeGet

/// Prints a line at once, also into a pipe or a file, so that each event shows when it happens.
func say(_ line: String) {
    print(line)
    fflush(nil)
}

func fail(_ message: String, _ code: Int32) -> Never {
    FileHandle.standardError.write(Data("rangeget-example: \(message)\n".utf8))
    exit(code)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var options = DownloadOptions()
if arguments.first == "-n", arguments.count > 1, let connections = Int(arguments[1]), connections > 0 {
    options.connections = connections
    arguments.removeFirst(2)
}

if arguments.count == 2, arguments[0] == "--data" {
    do {
        let data = try await Download.data(from: arguments[1], limit: 1 << 20, options: options)
        say("received \(data.count) bytes")
        exit(0)
    } catch {
        fail(error.description, 1)
    }
}

guard arguments.count == 2 else {
    fail("usage: rangeget-example [-n CONNECTIONS] URL PATH | rangeget-example --data URL", 2)
}

let download = Download(url: arguments[0], destination: .file(arguments[1]), options: options)

// Ctrl-C: stop, keeping the `.part` file and its manifest for the next run.
signal(SIGINT, SIG_IGN)
let interrupts = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupts.setEventHandler { download.cancel(keepingResumeState: true) }
interrupts.resume()

// SIGUSR1: pause a running download, resume a paused one. Both are safe from
// any thread; `state` says which applies.
signal(SIGUSR1, SIG_IGN)
let toggles = DispatchSource.makeSignalSource(signal: SIGUSR1, queue: .main)
toggles.setEventHandler {
    switch download.state {
    case .running: download.pause()
    case .paused, .pausing: download.resume()
    default: break
    }
}
toggles.resume()

// Take the event sequence before starting, so that no event is missed.
let events = download.events
let display = Task {
    var lastPercent = -1
    for await event in events {
        switch event {
        case let .probed(remote):
            say("size: \(remote.size.map { "\($0) bytes" } ?? "unknown")")
        case let .reusing(bytesDone):
            say("resuming: \(bytesDone) bytes already done")
        case let .restarting(reason):
            say("restarting: \(reason)")
        case let .progress(progress):
            guard let total = progress.totalBytes, total > 0 else { continue }
            let percent = Int(progress.bytesDone * 100 / total)
            if percent / 10 != lastPercent / 10 {
                say("\(percent)% at \(Int(progress.bytesPerSecond / 1024)) KiB/s")
                lastPercent = percent
            }
        case let .retry(connection, _, reason, delay, attempt, attempts):
            say("retry on connection \(connection), attempt \(attempt) of \(attempts) in \(delay) s: \(reason)")
        case let .mirrorDropped(url, reason):
            say("dropped mirror \(url): \(reason)")
        case let .notice(message):
            say("note: \(message)")
        case .paused:
            say("paused: no connection open, resume state saved")
        case .resumed:
            say("resumed")
        case .fetched:
            say("fetched: verifying and saving")
        case let .finished(result):
            say("finished: \(result.size) bytes in \(result.path)")
        case .transfer:
            break // the engine's own bookkeeping: a map of the file would draw these
        }
    }
}

do {
    let result = try await download.run()
    await display.value
    say(
        "fetched \(result.bytesFetched) bytes, reused \(result.bytesReused), in \(String(format: "%.2f", result.seconds)) s"
    )
} catch .interrupted {
    await display.value
    fail("cancelled; run the same command again to resume", 130)
} catch {
    await display.value
    fail(error.description, 1)
}
