// Running a `Download` in the test process, with every event it sent kept
// for the assertions, and its disk I/O optionally through a DiskProbe.
import Dispatch
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
            if case let .retry(_, _, reason, delay, _, _) = event { return (reason, delay) }
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
    /// Runs a `Download` of `urls` to `output` on this thread; `stopWhen` may
    /// stop it from an event. `handingOffTo`: its commit is handed to that
    /// group (`runHandingOffCommit`, as the files of a list), and the outcome
    /// waited for.
    func runLibrary(
        _ urls: [String], to output: String, probe: DiskProbe? = nil, handingOffTo group: SyncGroup? = nil,
        stopWhen: (@Sendable (DownloadEvent) -> Bool)? = nil,
        configure: (inout DownloadOptions) -> Void
    ) -> LibraryRun {
        var options = DownloadOptions()
        options.retryWait = 0.02
        options.checkpointInterval = 1
        if let probe { options.systemCalls = probe.calls }
        configure(&options)
        if let group { options.syncGroup = group }
        let download =
            urls.count == 1
            ? Download(url: urls[0], destination: .file(output), options: options)
            : Download(mirrors: urls, destination: .file(output), options: options)
        let events = Mutex<[DownloadEvent]>([])
        let onEvent: @Sendable (DownloadEvent) -> Void = { event in
            events.withLock { $0.append(event) }
            if let stopWhen, stopWhen(event) { download.stop() }
        }
        let result: Result<DownloadResult, DownloadError>
        if group != nil {
            let ended = Mutex<Result<DownloadResult, DownloadError>?>(nil)
            let done = DispatchSemaphore(value: 0)
            download.runHandingOffCommit(onEvent: onEvent) { outcome in
                ended.withLock { $0 = outcome }
                done.signal()
            }
            done.wait()
            result = ended.withLock { $0! }
        } else {
            result = Result { () throws(DownloadError) in try download.run(onEvent: onEvent) }
        }
        return LibraryRun(result: result, events: events.withLock { $0 })
    }
}
