// TransportFailure: what went wrong below HTTP when a download failed on the
// network, so that a caller can tell a name that did not resolve from a
// refused connection, a TLS or certificate failure or a timeout without
// reading the message. Which libcurl code is which kind is decided in one
// table, `CurlError.classification`, beside the retry policy.

/// The kind of transport failure a `DownloadError.network` carries.
///
/// The raw values are stable: `rangeget --json` reports them as `failure`.
public enum TransportFailure: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The host name did not resolve: no such name, or no answer from the resolver.
    case dnsResolution
    /// The proxy's name did not resolve, or the proxy refused or broke the tunnel.
    case proxy
    /// No TCP connection: refused (nothing listens on the port) or unreachable.
    case connectFailed
    /// The TLS handshake failed or broke off: a server that does not speak
    /// TLS on that port, no cipher both sides accept, a client certificate
    /// problem.
    case tls
    /// The server's certificate failed verification: an issuer not trusted,
    /// expired, another host name, a pinned key or OCSP status that does not
    /// match, or a CA file that cannot be read.
    case certificate
    /// Nothing arrived in time: no connection within the connect timeout, or
    /// no data for the stall timeout.
    case timeout
    /// The connection broke mid-transfer: reset, or closed before the
    /// response was complete (or before any response).
    case connectionLost
    /// A redirect that cannot be followed: too many in a row, one from https
    /// down to http, or one to a scheme other than http and https.
    case redirect
    /// The reply was not HTTP that can be read: a garbled head, an HTTP/2 or
    /// HTTP/3 error, a body in a content encoding that cannot be decoded.
    case protocolError
    /// Anything else: a local failure (memory, setting up libcurl), or a
    /// libcurl code newer than the table.
    case other

    /// The raw value, as `--json` prints it.
    public var description: String { rawValue }
}
