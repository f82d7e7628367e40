// The Metalink a server points to (Metalink/HTTP, RFC 6249: `Link: <URL>;
// rel=describedby; type="application/metalink4+xml"` on the first URL's
// response): fetched into memory (16 MiB at most) and read, and the file it
// describes at this URL (or its only file) lends the download its size, its
// piece hashes and, without pieces, its whole-file hash, as a Metalink given
// on the command line would. Its mirrors are not added (the `rel=duplicate`
// links are the server's mirrors). Anything that goes wrong (no answer, not a
// Metalink, no file for this URL, another size) is a notice, never a
// failure: the download goes on as it would without the link.
//
// Where it does not happen: with `discovery` off; when the caller gave a
// checksum, a checksum list or pieces (theirs win); when the request
// headers may not leave the URL's origin and the Metalink is elsewhere; on
// a resume that sends no probe. On a session, the fetch runs on the
// session's worker thread and holds its other downloads while it runs.

extension Download {
    /// The `discoveredIn` of what a `Link: rel=describedby` named.
    static let describedByLink = "Link: rel=describedby"

    /// `options` with what the Metalink `remote`'s response points to says
    /// of the file (see above); `options` unchanged when there is none.
    func describedIntegrity(
        _ options: DownloadOptions, of remote: RemoteFile, onEvent: @Sendable (DownloadEvent) -> Void
    ) async -> DownloadOptions {
        guard options.discovery, options.pieces == nil, options.checksum == nil, options.checksumList == nil,
            remote.url == url, let size = remote.size,
            let document = DuplicateLinks(
                field: remote.headers["link"], responseURL: remote.effectiveURL, givenURL: url
            ).describedBy.first
        else { return options }
        func skip(_ why: String) -> DownloadOptions {
            onEvent(.notice("the Metalink \(document) from \(Self.describedByLink) is not used: \(why)"))
            return options
        }
        if !options.transfer.headerLines.allSatisfy(HeaderPolicy.mayCrossOrigins),
            !HeaderPolicy.sameOrigin(document, url)
        {
            return skip("the request headers were given for \(HeaderPolicy.origin(of: url)) only")
        }
        let bytes: [UInt8]
        do throws(DownloadError) {
            bytes = try await Metalink.document(at: document, options: options)
        } catch {
            return skip("\(error)")
        }
        let metalink: Metalink
        do throws(MetalinkError) {
            metalink = try Metalink(parsing: bytes)
        } catch {
            return skip(error.message)
        }
        let here = Set([remote.url, remote.effectiveURL].map(DuplicateLinks.key))
        let entries = metalink.list.entries
        guard
            let entry = entries.first(where: { $0.urls.contains { here.contains(DuplicateLinks.key($0)) } })
                ?? (entries.count == 1 ? entries.first : nil)
        else { return skip("it describes no file at this URL") }
        if let described = entry.size, described != size {
            return skip("it describes \(described) bytes, the server serves \(size)")
        }
        if let pieces = entry.pieces, !pieces.fits(size: size) {
            return skip("its pieces describe another size than the server's \(size) bytes")
        }
        guard entry.pieces != nil || entry.checksum != nil else { return skip("it gives no hash") }
        var described = options
        described.pieces = entry.pieces
        described.expectedSize = entry.size
        if entry.pieces == nil { described.checksum = entry.checksum }
        let what = entry.pieces.map { "its \($0.count) pieces" } ?? "its \(entry.checksum!.algorithm.rawValue)"
        onEvent(.notice("checking \(what) from the Metalink \(document) (\(Self.describedByLink))"))
        return described
    }
}

extension Metalink {
    /// The bytes of the Metalink document at `url`, fetched into memory
    /// (16 MiB at most) with `options`' transfer settings, and none of its
    /// checks or discovery: those are for the file it describes.
    package static func document(at url: String, options: DownloadOptions) async throws(DownloadError) -> [UInt8] {
        var fetching = options
        fetching.checksum = nil
        fetching.checksumList = nil
        fetching.pieces = nil
        fetching.expectedSize = nil
        fetching.discovery = false
        fetching.restart = false
        return Array(try await Download.data(from: url, options: fetching))
    }
}
