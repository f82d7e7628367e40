// PartialFiles: the names of the files a partial download keeps beside its
// output, in one place. Everything but the data is small (see StateFile).

/// The files of a partial download of `OUTPUT`.
struct PartialFiles: Sendable, Equatable {
    /// `OUTPUT.part`: the data, each byte at its offset.
    let data: String

    /// The files of a download to `output`.
    init(output: String) {
        data = output + ".part"
    }

    /// The files whose data file is `data`.
    init(data: String) {
        self.data = data
    }

    /// The files whose manifest is `manifest`; nil for a name not ending in `.json`.
    init?(manifest: String) {
        guard manifest.hasSuffix(".json") else { return nil }
        data = String(manifest.dropLast(".json".count))
    }

    /// `OUTPUT.part.json`: the durable manifest (see Manifest).
    var manifest: String { data + ".json" }
    /// `OUTPUT.part.journal`: bytes written but perhaps not on disk yet, recorded at each write (see WriteJournal).
    var journal: String { data + ".journal" }
    /// `OUTPUT.part.mark`: says the data file is rangeget's, only where the
    /// file system has no extended attributes (see OutputFile.mark).
    var mark: String { data + ".mark" }
    /// `OUTPUT.part.new`: a small file fetched whole, until it has its name,
    /// where the file system has no unnamed files (see OutputFile.temporary).
    var new: String { data + ".new" }

    /// What each of the files above adds to the output's name.
    static var besideSuffixes: [String] {
        let files = PartialFiles(output: "")
        return [files.data, files.manifest, files.journal, files.mark, files.new]
    }
}
