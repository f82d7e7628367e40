// Small files in memory: the data-task case. The resource is probed first and
// refused when it is over the limit; otherwise the engine downloads it into a
// private temporary directory, and the bytes are read back from there. Memory
// holds at most `limit` bytes, whatever the server sends.
import FoundationEssentials
import Synchronization
import SystemSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Download {
    /// The default limit of `data(from:limit:options:)`: 16 MiB.
    public static let defaultDataLimit: Int64 = 16 << 20

    /// Downloads a small resource into memory and returns its bytes.
    ///
    /// The first request is also the probe (the zero-round-trip start, so a
    /// small resource costs one round trip): when the resource announces
    /// more than `limit` bytes, the download stops before a byte is kept,
    /// having moved at most `limit` bytes over the wire, and this throws
    /// `DownloadError.tooLarge`; a stream of unknown length is stopped as soon as it
    /// passes the limit. The bytes
    /// travel through a temporary file that is deleted before this returns,
    /// so memory never holds more than `limit` bytes. Cancelling the task
    /// stops the download.
    public static func data(
        from url: String, limit: Int64 = defaultDataLimit, options: DownloadOptions = DownloadOptions()
    ) async throws(DownloadError) -> Data {
        try await data(from: url, limit: limit, options: options, session: nil)
    }

    /// `data(from:limit:options:)` for a `URL`.
    public static func data(
        from url: URL, limit: Int64 = defaultDataLimit, options: DownloadOptions = DownloadOptions()
    ) async throws(DownloadError) -> Data {
        try await data(from: url.absoluteString, limit: limit, options: options, session: nil)
    }

    /// `data(from:limit:options:)`, on `session`'s connections when given.
    static func data(
        from url: String, limit: Int64, options: DownloadOptions, session: DownloadSession?
    ) async throws(DownloadError) -> Data {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var options = options
        options.restart = true
        options.overwrite = true
        // The opening request (the probe) asks for no more than the limit.
        options.openingLimit = max(1, limit)
        let download = Download(
            mirrors: [url], destination: .file(directory + "/data"), window: nil, options: options,
            session: session)
        // Set when the limit is passed: the announced size, or nil for a stream that ran past it.
        let refused = Mutex<Int64??>(nil)
        download.start { event in
            let over: Int64??
            switch event {
            case let .probed(remote):
                over = remote.size.flatMap { $0 > limit ? .some($0) : nil }
            case let .progress(progress) where progress.bytesDone > limit:
                over = .some(nil)
            default:
                over = nil
            }
            guard let over else { return }
            refused.withLock { if $0 == nil { $0 = over } }
            download.cancel()
        }
        let result: DownloadResult
        do {
            result = try await download.run()
        } catch {
            if let size = refused.withLock({ $0 }) { throw .tooLarge(size: size, limit: limit) }
            throw error
        }
        guard result.size <= limit else { throw .tooLarge(size: result.size, limit: limit) }
        return try readAll(result.path, size: result.size)
    }

    /// A new directory only this user can enter, under the system's temporary directory.
    private static func makeTemporaryDirectory() throws(DownloadError) -> String {
        var template = Array((FileManager.default.temporaryDirectory.path + "/rangeget-data-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw .io(IOError("create a directory in", FileManager.default.temporaryDirectory.path))
        }
        return String(cString: made)
    }

    /// The `size` bytes of the file at `path`.
    private static func readAll(_ path: String, size: Int64) throws(DownloadError) -> Data {
        let descriptor = retryingOnInterrupt { open(path, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw .io(IOError("open", path)) }
        defer { close(descriptor) }
        var data = Data(count: Int(size))
        let failure: Int32? = data.withUnsafeMutableBytes { buffer in
            var done = 0
            while done < buffer.count {
                let count = retryingOnInterrupt { read(descriptor, buffer.baseAddress! + done, buffer.count - done) }
                if count < 0 { return errno }
                if count == 0 { return EIO }
                done += count
            }
            return nil
        }
        if let failure { throw .io(IOError("read", path, code: failure)) }
        return data
    }
}
