// OutgoingText: text the library hands out (error descriptions, event
// reasons and URLs, mirror reports) is cleaned here, once. URLs lose their
// `user:password@`, which the user typed but a terminal, a log or `--json`
// must not show; control characters (C0, DEL, C1), bidi controls and line
// separators, which a server can put into any header it sends (an ETag, a
// Content-Range) and which would reach a terminal inside a message, are
// written as `\u{1B}`, the form the `rangeget` command prints them in too.

/// Cleans text before it leaves the library (the `rangeget` command escapes
/// what it prints with the same rule).
package enum OutgoingText {
    /// `text` without the userinfo of any URL in it, and with every control
    /// character written as `\u{XX}`.
    package static func clean(_ text: String) -> String {
        escapingControls(withoutUserinfo(text))
    }

    /// `text` with the `user:password@` of every URL in it removed: the one
    /// redaction of credentials, for what the library hands out and for the
    /// URLs a manifest, an origin record or `--json` keeps.
    package static func withoutUserinfo(_ text: String) -> String {
        // Userinfo ends with `@`: most text (every URL without credentials) has none.
        guard text.utf8Contains(UInt8(ascii: "@")) else { return text }
        var scalars = String.UnicodeScalarView()
        var authority = false
        var pending = String.UnicodeScalarView()
        var previous: [Unicode.Scalar] = []
        for scalar in text.unicodeScalars {
            if authority {
                if scalar == "@" {
                    // What came since `://` was userinfo: drop it.
                    pending = String.UnicodeScalarView()
                    continue
                }
                if endsAuthority(scalar) {
                    scalars.append(contentsOf: pending)
                    pending = String.UnicodeScalarView()
                    authority = false
                } else {
                    pending.append(scalar)
                    continue
                }
            }
            scalars.append(scalar)
            previous = Array((previous + [scalar]).suffix(3))
            if previous == [":", "/", "/"] {
                authority = true
                previous = []
            }
        }
        scalars.append(contentsOf: pending)
        return String(scalars)
    }

    /// `text` with every control character written as `\u{XX}`, URLs left as they are.
    package static func escapingControls(_ text: String) -> String {
        // Printable ASCII holds none (the common case, every event's URL): not decoded.
        if text.utf8AllSatisfy(\.isPrintableASCII) { return text }
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                result.append(
                    contentsOf: ("\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}").unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// C0, DEL, C1, the bidi controls (which can make a line read
    /// backwards) and the Unicode line and paragraph separators: what a
    /// terminal acts on rather than shows.
    package static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// Where the authority of a URL (`user:password@host:port`) ends: at its
    /// path, query or fragment, or at a character no URL holds unescaped
    /// (userinfo may hold `;`, `,`, `(` and the like, so those do not end it).
    private static func endsAuthority(_ scalar: Unicode.Scalar) -> Bool {
        "/?#\"<>\\`{}|^".unicodeScalars.contains(scalar) || scalar.properties.isWhitespace
    }
}

extension DownloadEvent {
    /// The event with its URLs and messages cleaned (`OutgoingText`).
    var cleaned: DownloadEvent {
        let clean = OutgoingText.clean
        switch self {
        case let .probed(remote): return .probed(remote.cleaned)
        case let .restarting(reason): return .restarting(reason: clean(reason))
        case let .retry(connection, cause, reason, delay, attempt, attempts):
            return .retry(
                connection: connection, cause: cause, reason: clean(reason), delay: delay, attempt: attempt,
                attempts: attempts)
        case let .transfer(.pieceStarted(connection, range, url)):
            return .transfer(.pieceStarted(connection: connection, range: range, url: clean(url)))
        case let .transfer(.connectionsMoved(from, to, count)):
            return .transfer(.connectionsMoved(from: clean(from), to: clean(to), count: count))
        case let .mirrorDropped(url, reason): return .mirrorDropped(url: clean(url), reason: clean(reason))
        case let .notice(message): return .notice(clean(message))
        case var .finished(result):
            result.mirrors = result.mirrors.map(\.cleaned)
            result.remoteFile = result.remoteFile?.cleaned
            return .finished(result)
        case .reusing, .progress, .transfer, .paused, .resumed, .fetched:
            return self
        }
    }
}

extension RemoteFile {
    /// The file with its URLs and the response's header values cleaned (`OutgoingText`).
    var cleaned: RemoteFile {
        var remote = self
        remote.url = OutgoingText.clean(url)
        remote.effectiveURL = OutgoingText.clean(effectiveURL)
        remote.headers = headers.mapValues(OutgoingText.clean)
        return remote
    }
}

extension MirrorReport {
    /// The report with its URL and the reason it was dropped cleaned (`OutgoingText`).
    var cleaned: MirrorReport {
        var report = self
        report.url = OutgoingText.clean(url)
        report.dropped = dropped.map(OutgoingText.clean)
        return report
    }
}
