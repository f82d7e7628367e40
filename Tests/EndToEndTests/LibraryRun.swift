// Running a `Download` in the test process, with every event it sent kept
// for the assertions, and its disk I/O optionally through a DiskProbe.
import Foundation
import RangeGet
import Synchronization

/// What an in-process `Download.run` did.
struct LibraryRun {
    var result: Result<DownloadResult, DownloadError>
    var events: [DownloadEvent]

    var error: DownloadError? {
        if case let .failure(error) = result { return error }
        return nil
    }

    var retries: [(reason: String, delay: Double)] {
        events.compactMap { event in
            if case let .retry(_, reason, delay) = event { return (reason, delay) }
            return nil
        }
    }

    var restartReasons: [String] {
        events.compactMap { event in
            if case let .restarting(reason) = event { return reason }
            return nil
        }
    }
}

extension EndToEndTestCase {
    /// Runs a `Download` of `urls` to `output` on this thread; `stopWhen` may stop it from an event.
    func runLibrary(_ urls: [String], to output: String, probe: DiskProbe? = nil,
                    stopWhen: (@Sendable (DownloadEvent) -> Bool)? = nil,
                    configure: (inout DownloadOptions) -> Void) -> LibraryRun {
        var options = DownloadOptions()
        options.retryWait = 0.02
        options.checkpointInterval = 1
        if let probe { options.systemCalls = probe.calls }
        configure(&options)
        let download = urls.count == 1
            ? Download(url: urls[0], destination: .file(output), options: options)
            : Download(mirrors: urls, destination: .file(output), options: options)
        let events = Mutex<[DownloadEvent]>([])
        let result: Result<DownloadResult, DownloadError>
        do {
            result = .success(try download.run { event in
                events.withLock { $0.append(event) }
                if let stopWhen, stopWhen(event) { download.stop() }
            })
        } catch {
            result = .failure(error)
        }
        return LibraryRun(result: result, events: events.withLock { $0 })
    }
}
