// MetalinkReader: a Metalink document read with libxml2's SAX2 interface
// into `Metalink.File`s. A Metalink may come from anyone, so nothing it
// names is fetched or expanded: a DOCTYPE stops the parser as soon as it is
// seen (no DTD and no entity declaration is ever read, so no entity expands
// and no external entity is opened), no entity is ever looked up, the
// parser may not use the network (XML_PARSE_NONET), and a document over
// 16 MiB is refused before parsing. Piece hashes are no longer collected
// once a file has more than it may have. What a file publishes that cannot
// be read becomes its `problem`.
internal import CLibXML2

/// One parse: the state libxml2's callbacks share through its user-data
/// pointer. Used by `read` only, on the calling thread.
final class MetalinkReader {
    /// The largest document read: 16 MiB.
    static let largestDocument = 16 << 20

    /// A Metalink version, by its namespace.
    private enum Version: String {
        case four = "urn:ietf:params:xml:ns:metalink"
        case three = "http://www.metalinker.org/"
    }

    /// What an open element is to the reader: Metalink's elements on the way
    /// to a file's fields, the fields, and any other element (`other`: not
    /// read, nor anything in it).
    private enum Element {
        case metalink, files, file, verification, resources, size, hash, pieces, pieceHash, url, other

        /// What a child of this element named `name`, of Metalink's namespace in `version`, is.
        func child(_ name: String, _ version: Version) -> Element {
            switch (version, self, name) {
            case (.four, .metalink, "file"), (.three, .files, "file"): return .file
            case (.three, .metalink, "files"): return .files
            case (.three, .file, "verification"): return .verification
            case (.three, .file, "resources"): return .resources
            case (_, .file, "size"): return .size
            case (.four, .file, "hash"), (.three, .verification, "hash"): return .hash
            case (.four, .file, "pieces"), (.three, .verification, "pieces"): return .pieces
            case (_, .pieces, "hash"): return .pieceHash
            case (.four, .file, "url"), (.three, .resources, "url"): return .url
            default: return .other
            }
        }
    }

    /// A `<pieces>` being read.
    private struct PiecesReading {
        /// Its `type` and `length` attributes.
        var type: String
        var length: String
        /// The hashes so far, with their `piece` numbers (version 3).
        var hashes: [(number: Int?, hex: String)] = []
        /// True once there were more than `PieceHashes.mostPieces`: the rest are not collected.
        var tooMany = false
    }

    /// A `<file>` being read.
    private struct FileReading {
        var file: Metalink.File
        /// The types of the `<hash>`es and `<pieces>` rangeget cannot check.
        var unknownHashes: [String] = []
        var unknownPieces: [String] = []
        /// The `<pieces>` read, and the one being read.
        var pieceSets: [PieceHashes] = []
        var pieces: PiecesReading?

        /// Records the first thing of the file that cannot be read.
        mutating func refuse(_ problem: String) {
            if file.problem == nil { file.problem = problem }
        }
    }

    /// The parser, for its line and to stop it.
    private var context: xmlParserCtxtPtr?
    private var version: Version?
    /// Why a callback stopped the parse (a DOCTYPE, not a Metalink); said before libxml2's error.
    private var refusal: String?
    /// libxml2's first error, with its line.
    private var error: (message: String, line: Int)?
    /// The open elements, from the root.
    private var open: [Element] = []
    private var files: [Metalink.File] = []
    private var file: FileReading?
    /// The element whose text is being collected, its attributes and its depth.
    private var reading: (element: Element, attributes: [String: String], depth: Int, text: [UInt8])?

    /// Reads the files of the Metalink document `bytes`.
    static func read(_ bytes: [UInt8]) throws(MetalinkError) -> [Metalink.File] {
        guard bytes.count <= largestDocument else {
            throw MetalinkError(
                "the Metalink is \(bytes.count) bytes; rangeget reads Metalink documents of at most 16 MiB")
        }
        guard bytes.contains(where: { !$0.isXMLSpace }) else { throw MetalinkError("the Metalink is empty") }
        _ = libxml2Initialized
        let reader = MetalinkReader()
        var handler = saxHandler()
        guard let context = xmlCreatePushParserCtxt(&handler, Unmanaged.passUnretained(reader).toOpaque(), nil, 0, nil)
        else { throw MetalinkError("the Metalink could not be read: libxml2 could not start a parser") }
        defer { xmlFreeParserCtxt(context) }
        reader.context = context
        // No XML_PARSE_NOENT (substitute entities) or XML_PARSE_DTDLOAD, ever.
        xmlCtxtUseOptions(context, Int32(XML_PARSE_NONET.rawValue))
        // In chunks: the push parser refuses one of over 10 MB (the lookup limit XML_PARSE_HUGE would lift).
        bytes.withUnsafeBytes { buffer in
            let chunk = 1 << 16
            for start in stride(from: 0, to: buffer.count, by: chunk) {
                let count = min(chunk, buffer.count - start)
                let last = start + count == buffer.count
                let bytes = buffer.baseAddress!.advanced(by: start).assumingMemoryBound(to: CChar.self)
                guard xmlParseChunk(context, bytes, Int32(count), last ? 1 : 0) == 0 else { break }
            }
        }
        return try withExtendedLifetime(reader) { () throws(MetalinkError) in try reader.result() }
    }

    /// libxml2 wants its globals set up once, before parsers run on several threads.
    private static let libxml2Initialized: Void = xmlInitParser()

    /// What the parse found: the files, or why there are none.
    private func result() throws(MetalinkError) -> [Metalink.File] {
        if let refusal { throw MetalinkError(refusal) }
        if let error {
            throw MetalinkError("the Metalink is not well-formed XML: line \(error.line): \(error.message)")
        }
        guard !files.isEmpty else { throw MetalinkError("the Metalink lists no files") }
        return files
    }

    /// The line the parser is at (1-based).
    private var line: Int { Int(xmlSAX2GetLineNumber(UnsafeMutableRawPointer(context))) }

    /// Stops the parse for `reason`.
    private func stop(_ reason: String) {
        if refusal == nil { refusal = reason }
        xmlStopParser(context)
    }

    private func refuseDoctype() {
        stop(
            "the Metalink declares a DOCTYPE (line \(line)); rangeget reads Metalink without DTDs or entities "
                + "(refusing it stops entity-expansion and external-entity attacks)")
    }

    private func start(_ name: String, namespace: UnsafePointer<xmlChar>?, attributes: Attributes) {
        guard let version, let parent = open.last else {
            let namespace = namespace.map { String(cString: $0) }
            guard name == "metalink", let version = namespace.flatMap(Version.init(rawValue:)) else {
                let within = namespace.map { "in namespace '\($0)'" } ?? "in no namespace"
                return stop(
                    "not a Metalink document: its root element is <\(name)> \(within); a Metalink's is <metalink> in "
                        + "\(Version.four.rawValue) (version 4) or \(Version.three.rawValue) (version 3)")
            }
            self.version = version
            open = [.metalink]
            return
        }
        let ours = namespace.map { xmlStrEqual($0, version.rawValue) != 0 } ?? false
        let element = ours ? parent.child(name, version) : .other
        open.append(element)
        var kept: [String: String] = [:]
        switch element {
        case .metalink, .files, .verification, .resources, .other:
            return
        case .file:
            file = FileReading(
                file: Metalink.File(
                    name: attributes["name"] ?? "", size: nil, mirrors: [], checksums: [], pieces: nil, line: line,
                    problem: nil))
            return
        case .pieces:
            file?.pieces = PiecesReading(type: attributes["type"] ?? "", length: attributes["length"] ?? "")
            return
        case .pieceHash:
            guard let count = file?.pieces?.hashes.count, file?.pieces?.tooMany == false else { return }
            guard count < PieceHashes.mostPieces else {
                file?.pieces?.tooMany = true
                return
            }
            if version == .three { kept["piece"] = attributes["piece"] }
        case .size:
            break
        case .hash:
            kept["type"] = attributes["type"]
        case .url:
            for name in ["priority", "preference", "location", "type"] { kept[name] = attributes[name] }
        }
        reading = (element, kept, open.count, [])
    }

    private func end() {
        guard let version, let element = open.popLast() else { return }
        if let reading, reading.depth == open.count + 1 {
            self.reading = nil
            read(
                reading.element, text: String(decoding: reading.text.trimmingXMLSpace, as: UTF8.self),
                reading.attributes)
        } else if element == .pieces, let pieces = file?.pieces {
            file?.pieces = nil
            read(pieces, version: version)
        } else if element == .file, let reading = file {
            file = nil
            files.append(finished(reading))
        }
    }

    private func characters(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard reading?.depth == open.count else { return }
        reading?.text.append(contentsOf: bytes)
    }

    /// Reads the text of an element of the file being read.
    private func read(_ element: Element, text: String, _ attributes: [String: String]) {
        switch element {
        case .size:
            guard let size = Int64(decimal: text), size <= RemoteFile.largestSize else {
                return refuse("<size> '\(text)' is not a size in bytes (a decimal integer up to 2^62)")
            }
            file?.file.size = size
        case .hash:
            let type = (attributes["type"] ?? "").trimmingXMLSpace.lowercased()
            guard let algorithm = Checksum.Algorithm(metalinkType: type) else {
                if file?.unknownHashes.contains(type) == false { file?.unknownHashes.append(type) }
                return
            }
            guard let checksum = Checksum(algorithm: algorithm, hex: text) else {
                return refuse("its \(type) <hash> is not \(algorithm.hexLength) hex digits")
            }
            if let other = file?.file.checksums.first(where: { $0.algorithm == algorithm }) {
                if other != checksum { refuse("it has two different \(type) <hash>es") }
                return
            }
            file?.file.checksums.append(checksum)
        case .pieceHash:
            file?.pieces?.hashes.append((attributes["piece"].flatMap { Int(decimal: $0) }, text))
        case .url:
            let type = attributes["type"]?.trimmingXMLSpace.lowercased()
            // A version 3 <url> of a torrent (or another peer-to-peer network) is not a mirror of the file.
            if let type, !["http", "https", "ftp", "ftps"].contains(type) { return }
            let priority: Int?
            if let preference = attributes["preference"].flatMap({ Int(decimal: $0) }) {
                priority = preference <= 100 ? 101 - preference : nil
            } else {
                priority = attributes["priority"].flatMap { Int(decimal: $0) }.flatMap {
                    (1...999_999).contains($0) ? $0 : nil
                }
            }
            file?.file.mirrors.append(Metalink.Mirror(url: text, priority: priority, location: attributes["location"]))
        case .metalink, .files, .file, .verification, .resources, .pieces, .other:
            break
        }
    }

    /// Reads a finished `<pieces>` into the file's piece sets.
    private func read(_ pieces: PiecesReading, version: Version) {
        let type = pieces.type.trimmingXMLSpace.lowercased()
        guard let algorithm = Checksum.Algorithm(metalinkType: type) else {
            if file?.unknownPieces.contains(type) == false { file?.unknownPieces.append(type) }
            return
        }
        guard let length = Int64(decimal: pieces.length), length > 0 else {
            return refuse("its <pieces> length '\(pieces.length)' is not a positive integer")
        }
        guard !pieces.tooMany else {
            return refuse("it has more than \(PieceHashes.mostPieces) <pieces>, more than rangeget checks")
        }
        var hashes = pieces.hashes
        if version == .three {
            // Version 3 numbers its pieces: in order of their numbers, 0 up, each once.
            hashes.sort { ($0.number ?? -1) < ($1.number ?? -1) }
            guard hashes.indices.allSatisfy({ hashes[$0].number == $0 }) else {
                return refuse("its \(type) <pieces> are not numbered 0, 1, 2 and on, each once")
            }
        }
        guard !hashes.isEmpty else { return refuse("its \(type) <pieces> list no hashes") }
        guard let set = PieceHashes(algorithm: algorithm, length: length, hexDigests: hashes.map(\.hex)) else {
            let bad = hashes.firstIndex { Checksum(algorithm: algorithm, hex: $0.hex) == nil } ?? 0
            return refuse("piece \(bad) of its \(type) <pieces> is not \(algorithm.hexLength) hex digits")
        }
        file?.pieceSets.append(set)
    }

    /// The file read, its checksums strongest first and its strongest pieces.
    private func finished(_ reading: FileReading) -> Metalink.File {
        var reading = reading
        reading.file.checksums.sort { $0.algorithm.rank < $1.algorithm.rank }
        reading.file.pieces = reading.pieceSets.min { $0.algorithm.rank < $1.algorithm.rank }
        if reading.file.checksums.isEmpty, !reading.unknownHashes.isEmpty {
            reading.refuse("it publishes only hashes rangeget cannot check: " + Self.named(reading.unknownHashes))
        }
        if reading.pieceSets.isEmpty, !reading.unknownPieces.isEmpty {
            reading.refuse("it publishes only piece hashes rangeget cannot check: " + Self.named(reading.unknownPieces))
        }
        return reading.file
    }

    private func refuse(_ problem: String) {
        file?.refuse(problem)
    }

    /// Hash types for a message: `(no type)` for a missing one.
    private static func named(_ types: [String]) -> String {
        types.map { $0.isEmpty ? "(no type)" : $0 }.joined(separator: ", ")
    }
}

extension MetalinkReader {
    /// The callbacks: elements, text and errors, and the refusal of a DOCTYPE
    /// (no entity is declared or looked up, no external subset read).
    private static func saxHandler() -> xmlSAXHandler {
        var handler = xmlSAXHandler()
        handler.initialized = XML_SAX2_MAGIC
        handler.startElementNs = { user, name, _, namespace, _, _, count, _, attributes in
            MetalinkReader.reader(user).start(
                String(cString: name!), namespace: namespace,
                attributes: Attributes(pointers: attributes, count: Int(count)))
        }
        handler.endElementNs = { user, _, _, _ in MetalinkReader.reader(user).end() }
        handler.characters = { user, bytes, count in
            MetalinkReader.reader(user).characters(UnsafeBufferPointer(start: bytes, count: Int(count)))
        }
        handler.internalSubset = { user, _, _, _ in MetalinkReader.reader(user).refuseDoctype() }
        handler.externalSubset = { user, _, _, _ in MetalinkReader.reader(user).refuseDoctype() }
        handler.entityDecl = { user, _, _, _, _, _ in MetalinkReader.reader(user).refuseDoctype() }
        handler.getEntity = { _, _ in nil }
        handler.getParameterEntity = { _, _ in nil }
        handler.resolveEntity = { _, _, _ in nil }
        handler.serror = { user, error in
            guard let error = error?.pointee, error.level.rawValue >= XML_ERR_ERROR.rawValue else { return }
            let reader = MetalinkReader.reader(user)
            guard reader.error == nil else { return }
            let message = error.message.map { String(cString: $0) } ?? "error \(error.code)"
            reader.error = (message.trimmingXMLSpace, Int(error.line))
        }
        return handler
    }

    /// The reader a callback's user-data pointer is.
    private static func reader(_ user: UnsafeMutableRawPointer?) -> MetalinkReader {
        Unmanaged<MetalinkReader>.fromOpaque(user!).takeUnretainedValue()
    }

    /// An element's attributes as SAX2 gives them: five pointers each (local
    /// name, prefix, namespace, start and end of the value). Only
    /// unqualified attributes are read, as Metalink's are.
    private struct Attributes {
        let pointers: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
        let count: Int

        subscript(name: String) -> String? {
            guard let pointers else { return nil }
            for index in 0..<count {
                let base = pointers + 5 * index
                guard base[2] == nil, let local = base[0], let start = base[3], let end = base[4],
                    String(cString: local) == name
                else { continue }
                // Without entity substitution (XML_PARSE_NOENT), SAX2 writes an `&` of a value as
                // `&#38;`, for a tree builder to read again: the only `&` a value can hold.
                let value = String(decoding: UnsafeBufferPointer(start: start, count: end - start), as: UTF8.self)
                return value.contains("&") ? value.replacing("&#38;", with: "&") : value
            }
            return nil
        }
    }
}

extension Checksum.Algorithm {
    /// The place of this algorithm among those rangeget knows, 0 the strongest.
    fileprivate var rank: Int { [Self.sha512, .sha256, .sha1, .md5].firstIndex(of: self)! }

    /// The algorithm of a Metalink hash type (lowercase): the IANA names
    /// (`sha-256`) and version 3's (`sha256`).
    init?(metalinkType type: String) {
        self.init(rawValue: type.filter { $0 != "-" })
    }
}

extension UInt8 {
    /// True for the white space of XML: space, tab, CR and LF.
    fileprivate var isXMLSpace: Bool { self == 0x20 || self == 0x09 || self == 0x0A || self == 0x0D }
}

extension BidirectionalCollection<UInt8> {
    /// The bytes without XML white space at either end.
    fileprivate var trimmingXMLSpace: SubSequence {
        guard let first = firstIndex(where: { !$0.isXMLSpace }), let last = lastIndex(where: { !$0.isXMLSpace }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}

extension String {
    /// The text without XML white space at either end.
    fileprivate var trimmingXMLSpace: String { String(Substring(utf8.trimmingXMLSpace)) }
}

extension FixedWidthInteger {
    /// The value of a decimal integer of digits only (XML white space
    /// around it aside); nil for anything else, or one too large.
    fileprivate init?(decimal text: String) {
        let digits = text.trimmingXMLSpace
        guard !digits.isEmpty, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Self(digits)
        else { return nil }
        self = value
    }
}
