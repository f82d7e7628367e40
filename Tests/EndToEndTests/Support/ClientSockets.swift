// ClientSockets: how many TCP connections to a test server the clients hold
// open, read off the kernel's table (/proc/net/tcp) every 2 ms. The server's
// own count lags: it sees a connection closed only when it next reads or
// writes it (a paced response may sleep), while a client that closed one
// and opened another is within its limit. A socket is the client's open one
// while it is connecting, established, or closed by the server but not yet
// by the client (CLOSE_WAIT: idle in the client's cache); after the
// client's close (FIN_WAIT, TIME_WAIT, LAST_ACK) it is not.
import Foundation
import Synchronization

final class ClientSockets: Sendable {
    private let port: UInt16
    private let peakOpen = Atomic<Int>(0)
    private let running = Atomic<Bool>(true)
    private let done = DispatchSemaphore(value: 0)

    /// Starts watching the client ends of connections to `port` on
    /// 127.0.0.1; returns once the first look was taken, so a busy machine
    /// that starts the watcher late misses nothing opened after this.
    /// `othersOnly`: only sockets of other processes (a command-line run
    /// as a child), not this test process's: sessions of earlier tests keep
    /// idle sockets, which a later server given the same port would count.
    init(toPort port: UInt16, othersOnly: Bool = false) {
        self.port = port
        let watching = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [self] in
            var first = true
            while running.load(ordering: .relaxed) {
                let open = Self.count(toPort: port, excluding: othersOnly ? Self.ownSockets() : [])
                if open > peakOpen.load(ordering: .relaxed) { peakOpen.store(open, ordering: .relaxed) }
                if first { watching.signal() }
                first = false
                usleep(2000)
            }
            done.signal()
        }
        watching.wait()
    }

    /// Stops watching; the most client sockets seen open at once.
    func stop() -> Int {
        running.store(false, ordering: .relaxed)
        done.wait()
        return peakOpen.load(ordering: .relaxed)
    }

    /// Client sockets open now to `port`: lines of /proc/net/tcp whose
    /// remote end is that port, in state SYN_SENT (02), ESTABLISHED (01)
    /// or CLOSE_WAIT (08).
    static func count(toPort port: UInt16, excluding excluded: Set<Substring> = []) -> Int {
        // Read to the end with FileHandle: the kernel writes the table a
        // page at a time and stat calls the file empty, and
        // `String(contentsOfFile:)` came back without the sockets in half the
        // runs on a loaded machine (2 of 4 with two busy loops beside it);
        // this read, 0 of 4.
        guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp"),
            let data = try? file.readToEnd()
        else { return 0 }
        try? file.close()
        let table = String(decoding: data, as: UTF8.self)
        let remote = String(format: ":%04X", port)
        // Counted once each by their local address: the kernel writes the
        // table a page at a time, and a socket opened or closed between two
        // pages shifts the lines, so one read can list a socket twice (a
        // peak of 14 where 8 were open).
        var open = Set<Substring>()
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[2].hasSuffix(remote), ["01", "02", "08"].contains(fields[3]),
                !excluded.contains(fields[9])
            else { continue }
            open.insert(fields[1])
        }
        return open.count
    }

    /// The inodes of this process's sockets (/proc/self/fd links `socket:[inode]`).
    static func ownSockets() -> Set<Substring> {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(
            descriptors.compactMap { descriptor -> Substring? in
                guard
                    let target = try? FileManager.default.destinationOfSymbolicLink(
                        atPath: "/proc/self/fd/\(descriptor)"),
                    target.hasPrefix("socket:[")
                else { return nil }
                return Substring(target.dropFirst(8).dropLast())
            })
    }
}
