// Fuzz target: Manifest.load on arbitrary bytes. Never crash; an unusable
// manifest is a one-line ManifestError naming --restart; a usable one has a
// sane size and sorted, disjoint ranges inside it.
import Glibc

nonisolated(unsafe) private var manifestPath: String = {
    let directory = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    return directory + "/rangeget-fuzz-manifest-\(getpid()).json"
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func manifestFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let path = manifestPath
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    require(descriptor >= 0, "cannot create \(path)")
    var written = 0
    while written < count {
        let result = write(descriptor, start + written, count - written)
        require(result > 0, "cannot write \(path)")
        written += result
    }
    close(descriptor)
    do {
        guard let manifest = try Manifest.load(from: path) else { fatalError("an existing manifest loaded as nil") }
        require(manifest.version == Manifest.currentVersion, "version \(manifest.version)")
        require(manifest.size >= 0, "negative size")
        var previousEnd: Int64 = -1
        for range in manifest.done.ranges {
            require(range.start >= 0 && range.start < range.end && range.end <= manifest.size, "range \(range)")
            require(range.start > previousEnd, "ranges not sorted, disjoint and apart")
            previousEnd = range.end
        }
    } catch {
        require(error.description.contains("--restart"), "error without a way out: \(error)")
        require(!error.description.contains("\n"), "multi-line error: \(error)")
    }
    return 0
}
