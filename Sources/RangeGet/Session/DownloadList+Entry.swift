// The entries of a list and what it reports: one file's URLs and name
// (Entry), a line of a list file that cannot be an entry (Problem), and the
// counts of a whole run (Summary). The list itself is DownloadList.swift.
import FoundationEssentials

extension DownloadList {
    /// One file of a list: its URLs (mirrors of one file) and, optionally,
    /// the name it is saved under.
    public struct Entry: Sendable, Equatable {
        /// The file's URLs, mirrors of one file; the first names it.
        public var urls: [String] {
            didSet { urlsChecked = false }
        }
        /// The file's name inside the list's directory; nil: named by the
        /// server (Content-Disposition) or by the URL.
        public var output: String?
        /// The line of the list the entry starts on (1-based), for
        /// messages; 0 when it came from no list file.
        public var line: Int
        /// Says so when `output` is not the `out=` name as the list gave it.
        public var outputNotice: String?
        /// The digest the finished file must have (a Metalink's `<hash>`),
        /// checked when `pieces` is nil (pieces prove every byte); nil: the
        /// list's options decide (`checksum`, `checksumList`).
        public var checksum: Checksum?
        /// The digest of each piece (a Metalink's `<pieces>`), checked as
        /// each piece lands; nil: none published.
        public var pieces: PieceHashes?
        /// The size the file must have (a Metalink's `<size>`); a server
        /// that reports another is refused. Nil: whatever the server says.
        public var size: Int64?

        /// An entry of `urls` (mirrors of one file), saved as `output` when given.
        public init(urls: [String], output: String? = nil) {
            self.init(urls: urls, output: output, line: 0, outputNotice: nil)
        }

        /// An entry of one URL, saved as `output` when given.
        public init(url: URL, output: String? = nil) {
            self.init(urls: [url.absoluteString], output: output)
        }

        /// True when `ListFile` checked every URL as it read them (a second
        /// parse per file was 4% of a small file's CPU).
        var urlsChecked = false

        package init(urls: [String], output: String?, line: Int, outputNotice: String?, urlsChecked: Bool = false) {
            self.urls = urls
            self.output = output
            self.line = line
            self.outputNotice = outputNotice
            self.urlsChecked = urlsChecked
        }

        /// Equal entries name the same URLs, output, line, notice and integrity.
        public static func == (left: Entry, right: Entry) -> Bool {
            (left.urls, left.output, left.line, left.outputNotice) == (
                right.urls, right.output, right.line, right.outputNotice
            ) && (left.checksum, left.size) == (right.checksum, right.size) && left.pieces == right.pieces
        }
    }

    /// A line of a list file that could not be read.
    public struct Problem: Sendable, Equatable {
        /// The line (1-based).
        public var line: Int
        /// Why, in one line naming it.
        public var message: String

        package init(line: Int, message: String) {
            self.line = line
            self.message = message
        }
    }
}
