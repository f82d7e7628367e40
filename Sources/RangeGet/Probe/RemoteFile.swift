// RemoteFile: what the probe learned about the file behind a URL.

/// The size, validators and range support of a remote file.
public struct RemoteFile: Sendable, Equatable {
    /// The URL the user gave.
    public var url: String
    /// The URL ranged requests go to: the end of the probe's redirects.
    public var effectiveURL: String
    /// The complete length; nil when the server did not say (chunked, no length).
    public var size: Int64?
    /// The entity tag as sent, strong or weak.
    public var etag: String?
    /// `Last-Modified` as sent.
    public var lastModified: String?
    /// True unless the server showed that ranged requests do not work.
    public var acceptsRanges: Bool
    /// The file name from `Content-Disposition`, unsanitised.
    public var contentDisposition: String?
    /// The headers of the response the probe read (the final one, after
    /// redirects), by lowercased name; a header sent several times has its
    /// values joined with ", ". Empty when the download went on from its
    /// resume state without asking the server (a resume from one URL).
    public var headers: [String: String] = [:]

    /// `Content-Type` as the server sent it, nil when it sent none.
    public var contentType: String? { headers["content-type"] }

    /// The largest size rangeget believes: 4 EiB, more than any disk holds.
    /// A server claiming more is refused at the probe, before a byte is
    /// written, so offsets always have room below Int64.max.
    public static let largestSize: Int64 = 1 << 62

    /// The entity tag when it is strong; weak tags never validate byte ranges (RFC 9110 13.1.5).
    public var strongETag: String? {
        guard let etag, !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    /// The `If-Range` value: a strong ETag, else Last-Modified when there is no
    /// ETag at all, else nil (RFC 9110 13.1.5 forbids weak tags and dates
    /// standing in for a tag).
    package var ifRange: String? {
        if let etag { return strongETag == nil ? nil : etag }
        return lastModified
    }

    /// The request headers that may go to `effectiveURL`: when the redirects
    /// left the origin (scheme, host or port) of the URL the user gave, only
    /// those that cannot carry a credential (`Accept`, `Accept-Language`,
    /// `Cache-Control`, `User-Agent`; curl CVE-2018-1000007, CVE-2022-27776):
    /// the rest were meant for the origin only.
    package func headers(from headers: [String]) -> [String] {
        HeaderPolicy.headers(headers, givenFor: url, sentTo: effectiveURL)
    }

    /// How `other` (the same URL probed again, or a new URL for it) differs
    /// in size or validators, as the end of a sentence; nil when it is the
    /// same file. ETags are compared when both have one, else Last-Modified
    /// when both have it.
    func differs(from other: RemoteFile) -> String? {
        if size != other.size {
            return "has \(other.size.map(String.init) ?? "an unknown number of") bytes, not \(size ?? 0)"
        }
        if let etag, let now = other.etag {
            return etag == now ? nil : "has ETag \(now), not \(etag)"
        }
        if let lastModified, let now = other.lastModified, lastModified != now {
            return "was last modified \(now), not \(lastModified)"
        }
        return nil
    }
}

extension RemoteFile {
    /// What `head`, the answer to a request for `url` that ended at
    /// `effectiveURL`, says about the file; size and range support are the
    /// caller's reading of the status.
    init(url: String, effectiveURL: String?, head: ResponseHead, size: Int64?, acceptsRanges: Bool) {
        self.url = url
        self.effectiveURL = effectiveURL ?? url
        self.size = size
        etag = head.etag
        lastModified = head.lastModified
        self.acceptsRanges = acceptsRanges
        contentDisposition = head["content-disposition"]
        headers = head.fields
    }
}
