// `--refresh-cmd CMD`: the command that renews a signed link that expired
// (DownloadOptions.refreshURL). CMD runs through `/bin/sh -c` with the
// expired URL as one more argument, passed as the positional parameter $1,
// never pasted into the command's text, so no character of a URL a server
// chose is read by the shell. The first line the command prints is the new
// URL. It has `timeLimit` seconds, in a process group of its own, which a
// command over its time loses whole (a `curl` it started included).
import Dispatch
import FoundationEssentials
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct RefreshCommand: Sendable {
    /// The command as given, run by `/bin/sh -c`.
    let command: String

    /// The longest a command may take before it is killed.
    static let timeLimit = 60.0
    /// The most output read from the command (the new URL is its first line).
    static let outputLimit = 64 << 10

    /// Why a command did not give a new URL: one line, naming the command.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The new URL for `expired`, from the command, off the caller's thread.
    func refresh(_ expired: String) async throws -> String {
        let result = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result { () throws(Failure) in try run(expired) })
            }
        }
        return try result.get()
    }

    /// Runs the command to its end (or its time limit) and reads its answer.
    private func run(_ expired: String) throws(Failure) -> String {
        let name = "--refresh-cmd '\(command)'"
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        defer { for descriptor in output + errors where descriptor >= 0 { close(descriptor) } }
        guard pipe(&output) == 0, pipe(&errors) == 0 else {
            throw Failure(description: "\(name) could not be started: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO)
        posix_spawn_file_actions_adddup2(&actions, errors[1], STDERR_FILENO)
        for descriptor in output + errors { posix_spawn_file_actions_addclose(&actions, descriptor) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        // The expired URL is $1 of the command's shell: quoted by the shell, never parsed by it.
        let arguments = ["/bin/sh", "-c", command + " \"$1\"", "sh", expired]
        var cArguments = arguments.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, &cArguments, environ)
        guard spawned == 0 else {
            throw Failure(description: "\(name) could not be started: \(String(cString: strerror(spawned)))")
        }
        close(output[1])
        close(errors[1])
        (output[1], errors[1]) = (-1, -1)
        let (stdout, stderr, timedOut) = Self.drain(output[0], errors[0], until: MonotonicClock.now() + Self.timeLimit)
        if timedOut { kill(-pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        if timedOut { throw Failure(description: "\(name) did not finish within \(Int(Self.timeLimit)) s") }
        // The command's own last word on stderr says why it failed.
        let said = Self.lines(stderr).last.map { ": \($0)" } ?? ""
        if status & 0x7f != 0 {
            throw Failure(description: "\(name) was killed by signal \(status & 0x7f)\(said)")
        }
        let exit = (status >> 8) & 0xff
        guard exit == 0 else { throw Failure(description: "\(name) failed with exit status \(exit)\(said)") }
        guard let url = Self.lines(stdout).first else {
            throw Failure(description: "\(name) printed no URL\(said)")
        }
        guard url.lowercased().hasPrefix("http://") || url.lowercased().hasPrefix("https://") else {
            throw Failure(description: "\(name) printed '\(url)', not an http or https URL")
        }
        return url
    }

    /// The non-empty lines of `bytes`, trimmed.
    private static func lines(_ bytes: [UInt8]) -> [String] {
        String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// Reads both descriptors to their ends, at most `outputLimit` bytes of
    /// each; true when `deadline` (monotonic seconds) came first.
    private static func drain(_ output: Int32, _ errors: Int32, until deadline: Double) -> (
        [UInt8], [UInt8], Bool
    ) {
        var collected: [[UInt8]] = [[], []]
        var open = [output, errors]
        var buffer = [UInt8](repeating: 0, count: 4096)
        while open.contains(where: { $0 >= 0 }) {
            let left = deadline - MonotonicClock.now()
            guard left > 0 else { return (collected[0], collected[1], true) }
            var polled = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&polled, nfds_t(polled.count), Int32(min(left, 1) * 1000) + 1)
            if ready < 0 && errno != EINTR { break }
            for index in polled.indices where open[index] >= 0 && polled[index].revents != 0 {
                let count = read(open[index], &buffer, buffer.count)
                if count > 0 {
                    if collected[index].count < outputLimit { collected[index] += buffer[0..<count] }
                } else if count == 0 || errno != EINTR {
                    open[index] = -1
                }
            }
        }
        return (collected[0], collected[1], false)
    }
}
