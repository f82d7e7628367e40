import Synchronization
import SystemSupport

// Thin wrappers over the POSIX calls the server makes: EINTR retries, errno
// to typed errors, whole-buffer writes and interruptible waits live here so
// no call site repeats them.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Calls `call` until it does not fail with EINTR; a result of -1 becomes a
/// ``RangeServerError`` naming `operation`.
@discardableResult
func retryingInterrupts<T: FixedWidthInteger>(
    _ operation: @autoclosure () -> String, _ call: () -> T
) throws(RangeServerError) -> T {
    let result = retryingOnInterrupt(call)
    if result == -1 { throw RangeServerError.errno(operation()) }
    return result
}

/// Marks `fd` close-on-exec (`fcntl(F_SETFD, FD_CLOEXEC)`), for calls that
/// have no flag for it here (`pipe`, `accept`).
func setCloseOnExec(_ fd: Int32) {
    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
}

/// A stop request every blocking wait of the server also listens to: the
/// read end of a pipe becomes readable for good once ``fire()`` is called.
final class StopSignal: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32
    private let fired = Atomic<Bool>(false)

    init() throws(RangeServerError) {
        var ends: [Int32] = [-1, -1]
        try retryingInterrupts("pipe") { pipe(&ends) }
        readEnd = ends[0]
        writeEnd = ends[1]
        setCloseOnExec(readEnd)
        setCloseOnExec(writeEnd)
    }

    /// Whether ``fire()`` was called.
    var isFired: Bool { fired.load(ordering: .acquiring) }

    /// Wakes every current and future wait; idempotent.
    func fire() {
        guard !fired.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Closes the pipe; call only once no thread can wait on it any more.
    func close() {
        _ = Glibc.close(readEnd)
        _ = Glibc.close(writeEnd)
    }

    /// The outcome of ``wait(forReadable:timeout:)``.
    enum WaitOutcome: Equatable { case ready, timedOut, stopped }

    /// Waits until `fd` is readable (or hung up), the signal fires, or
    /// `timeout` seconds pass (`nil`: no limit). With `fd` nil it only sleeps.
    func wait(forReadable fd: Int32?, timeout: Double?) -> WaitOutcome {
        let deadline = timeout.map { MonotonicClock.now() + $0 }
        var fds = [pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)]
        if let fd { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
        while true {
            if isFired { return .stopped }
            var milliseconds: Int32 = -1
            if let deadline {
                let left = deadline - MonotonicClock.now()
                if left <= 0 { return .timedOut }
                // poll() counts whole milliseconds: sleep the last fraction
                // with nanosleep so rate pacing stays accurate.
                if left < 0.002 {
                    var pause = timespec(tv_sec: 0, tv_nsec: Int(left * 1e9))
                    nanosleep(&pause, nil)
                    continue
                }
                milliseconds = Int32(min(left * 1000, 60_000))
            }
            let count = poll(&fds, nfds_t(fds.count), milliseconds)
            if count < 0 && errno != EINTR { return .stopped }
            if fds[0].revents != 0 { return .stopped }
            if fds.count > 1 && fds[1].revents != 0 { return .ready }
        }
    }

    /// Sleeps `seconds`; false when the signal fired first.
    func sleep(_ seconds: Double) -> Bool {
        seconds <= 0 ? !isFired : wait(forReadable: nil, timeout: seconds) == .timedOut
    }
}

/// A connected client socket, by descriptor; it does not own the descriptor.
struct ClientSocket {
    let fd: Int32

    /// `recv` into `buffer`; 0 means the peer closed its side.
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(RangeServerError) -> Int {
        try retryingInterrupts("recv") { recv(fd, buffer.baseAddress, buffer.count, 0) }
    }

    /// Writes all of `bytes` with `send` (never raising SIGPIPE), reporting
    /// each successful partial write to `progress`.
    func sendAll(_ bytes: UnsafeRawBufferPointer, progress: (Int) -> Void = { _ in }) throws(RangeServerError) {
        var offset = 0
        while offset < bytes.count {
            let written = try retryingInterrupts("send") {
                send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            offset += written
            progress(written)
        }
    }

    /// Copies `count` bytes of `file` from `offset` with `sendfile`, reporting
    /// each partial copy; a file that ends early is an error.
    func sendFile(_ file: Int32, offset: Int64, count: Int, progress: (Int) -> Void) throws(RangeServerError) {
        var position = off_t(offset)
        var left = count
        while left > 0 {
            let copied = try retryingInterrupts("sendfile") { sendfile(fd, file, &position, left) }
            if copied == 0 {
                throw RangeServerError(operation: "sendfile: the file is shorter than announced", code: 0)
            }
            left -= copied
            progress(copied)
        }
    }

    /// `shutdown(SHUT_WR)`, then reads and drops what the client still sends
    /// (up to two seconds) before the caller closes: closing with unread
    /// input would reset the connection and could destroy our last response.
    func lingeringShutdown(stop: StopSignal) {
        _ = shutdown(fd, Int32(SHUT_WR))
        let deadline = MonotonicClock.now() + 2
        var scratch = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline - MonotonicClock.now()
            guard left > 0, stop.wait(forReadable: fd, timeout: left) == .ready else { return }
            let received = scratch.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if received <= 0 && !(received < 0 && errno == EINTR) { return }
        }
    }
}
