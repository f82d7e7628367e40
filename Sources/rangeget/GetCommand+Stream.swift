// `rangeget -o - URL`: the file on stdout, in order, while several
// connections fetch ahead inside a window (`--window`, DownloadStream). The
// download runs on this thread; a second one writes each run of bytes to
// stdout as soon as it is contiguous, straight from the window. stdout
// carries the file's bytes and nothing else: progress, messages and the
// summary go to stderr. A reader that closes the pipe (`| head -c 1000`)
// ends the run quietly with exit 0: the transfers stop at once. A stream
// keeps nothing on disk, so an interrupted one is not resumable.
import Dispatch
import RangeGet
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension GetCommand {
    static func stream(_ urls: [String], settings: GetSettings) -> Int32 {
        if isatty(STDOUT_FILENO) == 1 {
            return fail(
                "-o - writes the file to stdout, which is a terminal: pipe it into a program or redirect it", .usage)
        }
        // A closed pipe is an EPIPE from write, not a signal that kills the process.
        signal(SIGPIPE, SIG_IGN)
        var options = settings.options
        if let total = settings.maxSpeed { options.transfer.rateLimit = RateLimit(bytesPerSecond: total) }
        let stream = Download.bytes(from: urls[0], mirrors: Array(urls.dropFirst()), options: options)
        let display = ProgressDisplay(quiet: settings.quiet)
        let interrupts = InterruptHandler { stream.cancel() }
        defer { interrupts.cancel() }

        // The errno of the write to stdout that failed, if one did.
        let writeFailure = Mutex<Int32?>(nil)
        let writer = DispatchGroup()
        DispatchQueue.global().async(group: writer) {
            do {
                var failure: Int32?
                while failure == nil, try stream.read({ bytes in failure = writeAll(bytes, to: STDOUT_FILENO) }) {}
                if let failure {
                    writeFailure.withLock { $0 = failure }
                    stream.cancel()
                }
            } catch {
                // The download's own outcome says what happened.
            }
        }
        let quiet = settings.quiet
        let retries = Mutex(RetryKinds())
        let outcome = Result { () throws(DownloadError) in
            try stream.download.run { event in
                if case let .retry(_, cause, _, _, _, _) = event { retries.withLock { $0.add(cause) } }
                report(event, display: display, quiet: quiet, streaming: true)
            }
        }
        writer.wait()
        display.clear()
        switch (outcome, writeFailure.withLock { $0 }) {
        case (_, EPIPE?):
            // The reader has what it wanted (`| head`): not an error.
            return ExitCode.success.rawValue
        case let (_, code?):
            return fail("cannot write to stdout: \(systemReason(code))", .local)
        case let (.success(result), nil):
            if !settings.quiet {
                display.message(
                    summary(result, retries: retries.withLock { $0 }, connections: settings.options.connections))
            }
            return ExitCode.success.rawValue
        case (.failure(.interrupted), nil):
            if !settings.quiet {
                display.message(
                    "interrupted after \(ByteCount.format(stream.bytesRead)) written to stdout (a stream is not resumable)"
                )
            }
            return ExitCode.interrupted.rawValue
        case let (.failure(error), nil):
            return fail(error.commandLineText, ExitCode(error))
        }
    }
}
