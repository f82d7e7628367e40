// Metalink: the files a Metalink document describes (RFC 5854's version 4,
// and version 3 of metalinker.org), each with its mirrors, size and hashes,
// and their turning into the entries of a list. A Metalink may come from
// anyone, so a file becomes an entry only when it can be saved as it is
// named (a plain name in the output directory, never a path), fetched over
// http or https, and checked with what it publishes; any other file is a
// problem of its own, as a bad line of a list is. The parsing itself is
// MetalinkReader.swift.

/// A Metalink document: files, each with the mirrors that serve it, its
/// size and the digests it must have.
///
/// Version 4 (RFC 5854, namespace `urn:ietf:params:xml:ns:metalink`) and
/// version 3 (namespace `http://www.metalinker.org/`) are read. A document
/// with a DOCTYPE is refused (no DTD, no entity is ever read or expanded),
/// as is one over 16 MiB.
public struct Metalink: Sendable, Equatable {
    /// One `<url>` of a file.
    public struct Mirror: Sendable, Equatable {
        /// The URL, as published (any scheme).
        public var url: String
        /// Its priority, 1 first; nil when none is given. A version 3
        /// `preference` (0 to 100, higher first) reads as `101 - preference`.
        public var priority: Int?
        /// Where the mirror is, as published (an ISO 3166 country code, say `de`).
        public var location: String?
    }

    /// One `<file>`: its name, size, mirrors and digests.
    public struct File: Sendable, Equatable {
        /// The `name` attribute, as published; empty when it has none.
        public var name: String
        /// The `<size>` in bytes; nil when not given or not readable (then
        /// ``problem`` says so).
        public var size: Int64?
        /// Every `<url>`, in document order.
        public var mirrors: [Mirror]
        /// The whole-file `<hash>`es rangeget can check, strongest first
        /// (SHA-512, SHA-256, SHA-1, MD5).
        public var checksums: [Checksum]
        /// The strongest `<pieces>` rangeget can check; nil when none.
        public var pieces: PieceHashes?
        /// The line of the `<file>` element (1-based).
        public var line: Int
        /// What in the file's element could not be read (a size that is no
        /// number, a hash that is not hex, only hashes of unknown types), in
        /// one line; nil when everything could. ``Metalink/list`` refuses a
        /// file with a problem.
        public var problem: String?
    }

    /// The files, in document order.
    public var files: [File]

    /// Reads a Metalink document (its bytes, in the encoding it declares;
    /// UTF-8 without a declaration). Throws for a document that cannot be
    /// read at all: not well-formed, not a Metalink, with a DOCTYPE, over
    /// 16 MiB, or without a file; a file that cannot be fetched is a
    /// problem of ``list`` instead.
    public init(parsing bytes: [UInt8]) throws(MetalinkError) {
        files = try MetalinkReader.read(bytes)
    }

    /// Reads a Metalink document from its text, as its UTF-8 bytes.
    public init(parsing text: String) throws(MetalinkError) {
        try self.init(parsing: Array(text.utf8))
    }

    /// The files as the entries of a list, and the ones refused as its
    /// problems (the line of a problem is the line of its `<file>`).
    ///
    /// An entry saves its file under its name in the list's directory: a
    /// name that is empty, has a directory part, a `.` or `..` component, a
    /// backslash or a control character, or is not a plain file name
    /// (a leading dot, say) is refused, as is a second file of the same
    /// name. Its URLs are the file's http and https mirrors, priority 1
    /// first, then those without a priority, without repeats, at most 64.
    /// Its checksum is the strongest of ``File/checksums``; its size and
    /// pieces are the file's, and pieces need a size they fit.
    public var list: ListFile {
        var list = ListFile()
        var names: [String: Int] = [:]
        for file in files {
            do throws(MetalinkError) {
                list.entries.append(try file.entry(after: &names))
            } catch {
                list.problems.append(DownloadList.Problem(line: file.line, message: error.message))
            }
        }
        return list
    }

    /// The most URLs an entry keeps; mirrors past them are dropped.
    static let mostMirrors = 64
}

/// Why a Metalink document cannot be read, or one of its files fetched.
public struct MetalinkError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, in one line naming it.
    public var message: String

    /// An error saying `message`.
    init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}

extension Metalink.File {
    /// The entry of this file; throws the problem that keeps it from being
    /// one. `names`: the usable names of the files before it, with their
    /// lines; this file's is added (a second file of a name is refused
    /// even when the first was, for another reason).
    fileprivate func entry(after names: inout [String: Int]) throws(MetalinkError) -> DownloadList.Entry {
        let prefix = "metalink line \(line): file \(Self.quoted(name)): "
        if name.isEmpty { throw MetalinkError("metalink line \(line): a <file> without a name") }
        if let refusal = Self.nameProblem(name) { throw MetalinkError(prefix + refusal) }
        if let first = names[name] { throw MetalinkError(prefix + "a second file of that name (line \(first))") }
        names[name] = line
        if let problem { throw MetalinkError(prefix + problem) }
        if let pieces {
            guard let size else { throw MetalinkError(prefix + "its <pieces> need a <size>") }
            guard pieces.fits(size: size) else {
                let needed = PieceHashes.pieceCount(size: size, length: pieces.length)
                throw MetalinkError(
                    prefix + "its \(pieces.count) <pieces> of \(pieces.length) bytes do not fit its size of \(size) "
                        + "bytes, which has \(needed)")
            }
        }
        var entry = DownloadList.Entry(
            urls: try usableURLs(prefix: prefix), output: name, line: line, outputNotice: nil, urlsChecked: true)
        entry.checksum = checksums.first
        entry.pieces = pieces
        entry.size = size
        return entry
    }

    /// The http and https mirrors, by priority (1 first, none last, stable),
    /// without repeats, at most `Metalink.mostMirrors`; throws naming the
    /// schemes seen when there is none.
    private func usableURLs(prefix: String) throws(MetalinkError) -> [String] {
        var others: [String] = []
        var usable: [Metalink.Mirror] = []
        for mirror in mirrors {
            if RemoteURL.problem(mirror.url) == nil {
                usable.append(mirror)
            } else {
                // Named by its scheme, or whole when it has none or is a malformed http or https URL.
                let scheme = mirror.url.prefix { $0 != ":" }.lowercased()
                let hasOther = !scheme.isEmpty && scheme.count < mirror.url.count && !["http", "https"].contains(scheme)
                let named = hasOther ? scheme + ":" : Self.quoted(mirror.url)
                if !others.contains(named) { others.append(named) }
            }
        }
        guard !usable.isEmpty else {
            let seen = others.isEmpty ? "it lists none" : "it lists " + others.joined(separator: ", ")
            throw MetalinkError(prefix + "no http or https URL (\(seen))")
        }
        var seen = Set<String>()
        let ordered = usable.enumerated().sorted { left, right in
            let (a, b) = (left.element.priority ?? .max, right.element.priority ?? .max)
            return a != b ? a < b : left.offset < right.offset
        }
        return Array(ordered.map(\.element.url).filter { seen.insert($0).inserted }.prefix(Metalink.mostMirrors))
    }

    /// Why `name` (not empty) cannot be saved as it is, or nil when it can.
    private static func nameProblem(_ name: String) -> String? {
        let savedHere = "rangeget saves Metalink files in the output directory"
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "a name with a control character is not supported"
        }
        if name.contains("\\") { return "a name with a backslash is not supported; \(savedHere)" }
        if name.hasPrefix("/") { return "an absolute name is not supported; \(savedHere)" }
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        if let dots = components.first(where: { $0 == "." || $0 == ".." }) {
            return "a name with a '\(dots)' component is not supported; \(savedHere)"
        }
        if components.count > 1 { return "a name with a directory part is not supported; \(savedHere)" }
        if FileName.sanitize(name) != name {
            return "not a plain file name (a leading dot or space, a trailing space, over 200 bytes, "
                + "or an invisible character)"
        }
        return nil
    }

    /// `name` in single quotes, its control characters written as `\u{..}`.
    static func quoted(_ name: String) -> String {
        var shown = ""
        for scalar in name.unicodeScalars {
            if scalar.properties.generalCategory == .control {
                shown += "\\u{" + String(scalar.value, radix: 16) + "}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return "'\(shown)'"
    }
}
