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

    /// The entity tag when it is strong; weak tags never validate byte ranges (RFC 9110 13.1.5).
    public var strongETag: String? {
        guard let etag, !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    /// The `If-Range` value: a strong ETag, else Last-Modified when there is no
    /// ETag at all, else nil (RFC 9110 13.1.5 forbids weak tags and dates
    /// standing in for a tag).
    public var ifRange: String? {
        if let etag { return strongETag == nil ? nil : etag }
        return lastModified
    }
}
