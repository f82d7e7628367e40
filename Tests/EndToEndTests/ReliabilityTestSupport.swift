// Helpers for the Reliability*Tests (RELIABILITY.md cases 1-24): seeded
// randomness, manifest inspection, a disk seam that checks and records every
// write, a child-process runner (for `ulimit -f` and signals), and a scripted
// loopback server for the few malformed responses RangeServer cannot produce.
import Foundation
import Glibc
import RangeGet
import RangeServer
import Synchronization
import XCTest

// MARK: - Seeded randomness

/// A small deterministic generator, so every random test replays.
typealias SeededRandom = SplitMix64

// MARK: - Child processes

/// A child process whose output goes to files (never a pipe a killed child could block).
final class Child {
    let process = Process()
    let stdoutURL: URL
    let stderrURL: URL

    init(executable: String, arguments: [String], in directory: String) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        stdoutURL = URL(fileURLWithPath: directory).appendingPathComponent(".stdout-\(UUID().uuidString)")
        stderrURL = URL(fileURLWithPath: directory).appendingPathComponent(".stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: stdoutURL)
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// SIGKILL and reap; safe to call on an exited child.
    func kill9() {
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }

    /// Waits up to `timeout` seconds; kills the child (and fails) if it is still running.
    func finish(timeout: Double, file: StaticString = #filePath, line: UInt = #line) -> Run {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill9()
            XCTFail("child \(process.arguments ?? []) did not finish within \(timeout) s", file: file, line: line)
        }
        process.waitUntilExit()
        defer {
            try? FileManager.default.removeItem(at: stdoutURL)
            try? FileManager.default.removeItem(at: stderrURL)
        }
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return Run(status: status,
                   stdout: (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "",
                   stderr: (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "")
    }
}

// MARK: - Disk seam that verifies every byte

/// A `SystemCalls` seam that checks every pwrite to the data file against
/// the expected resource (no unvalidated byte may reach the disk), records
/// what was written and what each fdatasync made durable, and injects failures.
final class DiskProbe: Sendable {
    struct State {
        /// Bytes pwrite'd to the data file so far.
        var written = RangeSet()
        /// Bytes written before the last successful fdatasync and after no failed one.
        var durable = RangeSet()
        /// Bytes that were written (not yet durable) when an fdatasync failed.
        var pendingAtFailedSync = RangeSet()
        /// pwrites whose bytes differ from the resource at their offset.
        var wrongWrites: [String] = []
        var pwriteCalls = 0
        var fdatasyncCalls = 0
        var fsyncCalls = 0
        var failedSyncs = 0
        /// The contents of every regular file at each successful fsync, by the path it had then.
        var synced: [String: Set<Data>] = [:]
    }

    let resource: Resource?
    let state = Mutex(State())
    /// errno for the n-th pwrite to the data file (0-based) given the bytes written before it; nil to pass.
    private let pwriteFault: @Sendable (_ call: Int, _ offset: Int64, _ writtenBefore: Int64) -> Int32?
    /// errno for the n-th fdatasync (0-based); nil to pass.
    private let fdatasyncFault: @Sendable (_ call: Int) -> Int32?
    /// errno for the n-th fsync (0-based, manifest temp files and directories); nil to pass.
    private let fsyncFault: @Sendable (_ call: Int) -> Int32?

    init(resource: Resource?,
         pwriteFault: @escaping @Sendable (Int, Int64, Int64) -> Int32? = { _, _, _ in nil },
         fdatasyncFault: @escaping @Sendable (Int) -> Int32? = { _ in nil },
         fsyncFault: @escaping @Sendable (Int) -> Int32? = { _ in nil }) {
        self.resource = resource
        self.pwriteFault = pwriteFault
        self.fdatasyncFault = fdatasyncFault
        self.fsyncFault = fsyncFault
    }

    var snapshot: State { state.withLock { $0 } }

    var calls: SystemCalls {
        var calls = SystemCalls.live
        calls.pwrite = { [self] descriptor, bytes, count, offset in
            // The manifest and the mark are written with pwrite too.
            guard openPath(descriptor)?.hasSuffix(".part") == true else {
                return Glibc.pwrite(descriptor, bytes, count, off_t(offset))
            }
            let (call, before) = state.withLock { state -> (Int, Int64) in
                defer { state.pwriteCalls += 1 }
                return (state.pwriteCalls, state.written.byteCount)
            }
            if let code = pwriteFault(call, offset, before) {
                errno = code
                return -1
            }
            if let resource, count > 0 {
                let end = offset + Int64(count)
                let expected = end <= resource.size ? resource.bytes(in: offset..<end) : nil
                let actual = [UInt8](UnsafeRawBufferPointer(start: bytes, count: count))
                if expected != actual {
                    state.withLock { $0.wrongWrites.append("\(count) bytes at \(offset)") }
                }
            }
            let result = Glibc.pwrite(descriptor, bytes, count, off_t(offset))
            if result > 0 {
                state.withLock { $0.written.insert(ByteRange(offset, offset + Int64(result))) }
            }
            return result
        }
        calls.fdatasync = { [self] descriptor in
            let (call, writtenNow) = state.withLock { state -> (Int, RangeSet) in
                defer { state.fdatasyncCalls += 1 }
                return (state.fdatasyncCalls, state.written)
            }
            if let code = fdatasyncFault(call) {
                state.withLock { state in
                    state.failedSyncs += 1
                    for range in writtenNow.ranges { state.pendingAtFailedSync.insert(range) }
                    for range in state.durable.ranges { state.pendingAtFailedSync.remove(range) }
                }
                errno = code
                return -1
            }
            let result = Glibc.fdatasync(descriptor)
            if result == 0 {
                state.withLock { state in
                    // Bytes pending at a failed sync may be lost (fsyncgate): never durable.
                    var durable = writtenNow
                    for range in state.pendingAtFailedSync.ranges { durable.remove(range) }
                    state.durable = durable
                }
            }
            return result
        }
        calls.fsync = { [self] descriptor in
            let call = state.withLock { state -> Int in
                defer { state.fsyncCalls += 1 }
                return state.fsyncCalls
            }
            if let code = fsyncFault(call) {
                errno = code
                return -1
            }
            let result = Glibc.fsync(descriptor)
            if result == 0, let (path, contents) = Self.regularFile(descriptor) {
                state.withLock { _ = $0.synced[path, default: []].insert(contents) }
            }
            return result
        }
        return calls
    }

    /// The contents the file at `path` had at each of its successful fsyncs.
    func synced(_ path: String) -> Set<Data> {
        state.withLock { $0.synced[path] ?? [] }
    }

    /// The path and contents of the regular file open as `descriptor`; nil for a directory.
    private static func regularFile(_ descriptor: Int32) -> (String, Data)? {
        let link = "/proc/self/fd/\(descriptor)"
        guard let path = openPath(descriptor) else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
              let contents = FileManager.default.contents(atPath: link) else { return nil }
        return (path, contents)
    }
}

/// The path of the file open as `descriptor` now (after any rename), nil if unknown.
func openPath(_ descriptor: Int32) -> String? {
    try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)")
}

// MARK: - Manifest files

enum ManifestFile {
    /// The manifest at `path` as a JSON object, nil if absent or unreadable.
    static func object(_ path: String) -> [String: Any]? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    }

    /// The ranges listed under `key` in the JSON file at `path`, [] when none.
    static func ranges(_ path: String, _ key: String = "done") -> [Range<Int64>] {
        guard let list = object(path)?[key] as? [[Int64]] else { return [] }
        return list.compactMap { $0.count == 2 && $0[0] <= $0[1] ? $0[0]..<$0[1] : nil }
    }

    /// The durable ranges it lists, [] when there is none.
    static func done(_ path: String) -> [Range<Int64>] { ranges(path, "done") }

    /// The write journal beside the manifest at `path` (`X.part.journal` for `X.part.json`).
    static func journalPath(_ path: String) -> String { String(path.dropLast(".json".count)) + ".journal" }

    /// The ranges a run in this boot would trust beyond the durable ones
    /// (the write journal's, through `Manifest.load`), [] when there are none.
    static func journalWritten(_ path: String) -> [Range<Int64>] {
        guard let trusted = try? Manifest.load(from: path) else { return [] }
        var extra = trusted.done
        for range in done(path) { extra.remove(ByteRange(range.lowerBound, range.upperBound)) }
        return extra.ranges.map { $0.start..<$0.end }
    }

    /// What a resumed run would trust: `Manifest.load`'s done bytes (durable
    /// ones, plus those written in this boot). Nil when there is no manifest;
    /// throws when it is damaged.
    static func trusted(_ path: String) throws -> [Range<Int64>]? {
        guard let manifest = try Manifest.load(from: path) else { return nil }
        return manifest.done.ranges.map { $0.start..<$0.end }
    }

    /// Writes a version-1 manifest by hand (for damaged and large-offset cases).
    static func write(_ path: String, url: String, size: Int64, etag: String?, lastModified: String?,
                      done: [Range<Int64>], version: Int = 1) throws {
        var object: [String: Any] = [
            "version": version, "url": url, "size": size,
            "done": done.map { [$0.lowerBound, $0.upperBound] },
        ]
        if let etag { object["etag"] = etag }
        if let lastModified { object["lastModified"] = lastModified }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// The Last-Modified RangeServer sends for generated resources.
let defaultLastModifiedHeader = "Mon, 01 Jan 2024 00:00:00 GMT"

extension EndToEndTestCase {
    /// Every range the manifest makes a resumed run trust (durable, and written in
    /// this boot) holds the resource's bytes in the data file ("the manifest
    /// never runs ahead of the disk"). Fails when the manifest is missing, or
    /// lists nothing unless `mayBeEmpty` (a run whose every sync failed).
    /// Returns the bytes listed.
    @discardableResult
    func assertManifestMatchesDisk(_ manifestPath: String, data dataPath: String, _ resource: Resource,
                                   mayBeEmpty: Bool = false,
                                   file: StaticString = #filePath, line: UInt = #line) -> Int64 {
        let ranges: [Range<Int64>]
        do {
            guard let trusted = try ManifestFile.trusted(manifestPath) else {
                XCTFail("no manifest at \(manifestPath)", file: file, line: line)
                return 0
            }
            ranges = trusted
        } catch {
            XCTFail("the manifest cannot be loaded: \(error)", file: file, line: line)
            return 0
        }
        guard !ranges.isEmpty else {
            if !mayBeEmpty { XCTFail("the manifest lists no byte: nothing would be reused", file: file, line: line) }
            return 0
        }
        guard let handle = FileHandle(forReadingAtPath: dataPath) else {
            XCTFail("\(dataPath) is missing but its manifest lists \(ranges)", file: file, line: line)
            return 0
        }
        defer { try? handle.close() }
        var listed: Int64 = 0
        for range in ranges {
            XCTAssertLessThanOrEqual(range.upperBound, resource.size, "manifest range \(range) past the end", file: file, line: line)
            listed += Int64(range.count)
            var offset = range.lowerBound
            while offset < min(range.upperBound, resource.size) {
                let count = min(Int64(4 << 20), range.upperBound - offset)
                try? handle.seek(toOffset: UInt64(offset))
                let actual = [UInt8](handle.readData(ofLength: Int(count)))
                if actual != resource.bytes(in: offset..<(offset + count)) {
                    XCTFail("manifest lists \(range) but the data file differs in \(offset)..<\(offset + count)",
                            file: file, line: line)
                    return listed
                }
                offset += count
            }
        }
        return listed
    }

    /// Bytes the manifest at `path` claims: durable ("done") and those a run in
    /// this boot would also trust (in the write journal beside it); 0 if unreadable.
    func claimedBytes(_ manifestPath: String) -> Int64 {
        RangeSet((ManifestFile.done(manifestPath) + ManifestFile.journalWritten(manifestPath))
            .map { ByteRange($0.lowerBound, $0.upperBound) }).byteCount
    }

    /// Every entry of the test directory except the harness's stdout/stderr files.
    func directoryEntries() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { !$0.hasPrefix(".std") }.sorted()
    }

    /// The size of the file at `path`, -1 when absent.
    func fileSize(_ path: String) -> Int64 {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : -1
    }

    /// Starts rangeget with `arguments` in the test directory; a child still
    /// running when the test ends is killed.
    func launch(_ arguments: [String]) throws -> Child {
        let child = try Child(executable: CLI.binary, arguments: arguments, in: directory)
        addTeardownBlock { child.kill9() }
        return child
    }

    /// Runs rangeget under `/bin/sh -c 'ulimit -f BLOCKS; exec rangeget ...'` (512-byte blocks).
    func runWithFileSizeLimit(blocks: Int, _ arguments: [String], timeout: Double = 60) throws -> Run {
        let quoted = ([CLI.binary] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let child = try Child(executable: "/bin/sh", arguments: ["-c", "ulimit -f \(blocks) && exec " + quoted.joined(separator: " ")],
                              in: directory)
        return child.finish(timeout: timeout)
    }

    /// `bytes=a-b` as a half-open range.
    func requestedRange(_ header: String?) -> Range<Int64>? {
        guard let header, header.hasPrefix("bytes=") else { return nil }
        let bounds = header.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]), let last = Int64(bounds[1]) else { return nil }
        return first..<(last + 1)
    }
}

// MARK: - A scripted server for responses RangeServer cannot produce

/// One request as the scripted server read it.
struct ScriptedRequest: Sendable {
    var method: String
    var target: String
    /// Names lowercased.
    var headers: [String: String]

    /// The single `bytes=a-b` range asked for, as a half-open range (`a-` runs to `size`).
    func range(size: Int64) -> Range<Int64>? {
        guard let value = headers["range"], value.hasPrefix("bytes=") else { return nil }
        let bounds = value.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Int64(bounds[0]) else { return nil }
        let last = bounds[1].isEmpty ? size - 1 : (Int64(bounds[1]) ?? size - 1)
        return first..<min(last + 1, size)
    }
}

/// What the scripted server sends: a head (status line and fields, without the
/// blank line) and a body; then it closes, or resets the connection.
struct ScriptedResponse: Sendable {
    var head: String
    var body: [UInt8] = []
    /// Send only this many body bytes, then reset the connection (RST).
    var resetAfter: Int?
    /// Seconds to keep the connection open after sending (a body that stops short and stalls).
    var holdOpen: Double = 0

    /// A correct answer for `resource` to `request`: 206 for a range, else 200.
    static func serving(_ resource: Resource, _ request: ScriptedRequest, etag: String = "\"scripted-1\"",
                        extraFields: [String] = [], contentRange: ((Range<Int64>) -> String)? = nil) -> ScriptedResponse {
        var fields = ["Accept-Ranges: bytes", "ETag: \(etag)", "Connection: close"] + extraFields
        if let range = request.range(size: resource.size), !range.isEmpty {
            let value = contentRange?(range) ?? "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(resource.size)"
            fields += ["Content-Range: \(value)", "Content-Length: \(range.count)"]
            let body = request.method == "HEAD" ? [] : resource.bytes(in: range)
            return ScriptedResponse(head: (["HTTP/1.1 206 Partial Content"] + fields).joined(separator: "\r\n"), body: body)
        }
        fields.append("Content-Length: \(resource.size)")
        let body = request.method == "HEAD" ? [] : resource.bytes(in: 0..<resource.size)
        return ScriptedResponse(head: (["HTTP/1.1 200 OK"] + fields).joined(separator: "\r\n"), body: body)
    }
}

/// A loopback HTTP/1.1 server answering each request with whatever `handler`
/// returns, one request per connection (it always closes).
final class ScriptedServer: Sendable {
    private let listener: Int32
    let port: UInt16
    private let handler: @Sendable (ScriptedRequest) -> ScriptedResponse
    private let state = Mutex<(requests: [ScriptedRequest], clients: Set<Int32>, stopped: Bool)>(([], [], false))
    private let threads = DispatchGroup()

    init(handler: @escaping @Sendable (ScriptedRequest) -> ScriptedResponse) throws {
        self.handler = handler
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: address.sin_port)
        threads.enter()
        Thread { [self] in
            acceptLoop()
            threads.leave()
        }.start()
    }

    deinit { stop() }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/" + path }

    var requests: [ScriptedRequest] { state.withLock { $0.requests } }

    func stop() {
        let clients = state.withLock { state -> Set<Int32>? in
            guard !state.stopped else { return nil }
            state.stopped = true
            return state.clients
        }
        guard let clients else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in clients { shutdown(fd, Int32(SHUT_RDWR)) }
        _ = threads.wait(timeout: .now() + 5)
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.clients.insert(client)
                return true
            }
            guard accepted else {
                close(client)
                return
            }
            threads.enter()
            Thread { [self] in
                serve(client)
                state.withLock { state in
                    state.clients.remove(client)
                    close(client)
                }
                threads.leave()
            }.start()
        }
    }

    private func serve(_ fd: Int32) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        let terminator: [UInt8] = [13, 10, 13, 10]
        while received.count < 64 << 10 {
            if let end = received.firstRange(of: terminator) {
                let text = String(decoding: received[..<end.lowerBound], as: UTF8.self)
                var lines = text.components(separatedBy: "\r\n")
                let requestLine = lines.removeFirst().split(separator: " ")
                guard requestLine.count >= 2 else { return }
                var headers: [String: String] = [:]
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let request = ScriptedRequest(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers)
                state.withLock { $0.requests.append(request) }
                let response = handler(request)
                respond(response, on: fd)
                if response.holdOpen > 0 { usleep(UInt32(response.holdOpen * 1_000_000)) }
                return
            }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            received += buffer[0..<count]
        }
    }

    private func respond(_ response: ScriptedResponse, on fd: Int32) {
        var bytes = Array((response.head + "\r\n\r\n").utf8)
        let bodyCount = min(response.body.count, response.resetAfter ?? response.body.count)
        bytes += response.body[0..<bodyCount]
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            sent += count
        }
        if response.resetAfter != nil {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
    }
}

// MARK: - The library in-process

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
