// SpotCheck: a resume from a server that sends neither ETag nor Last-Modified
// has no If-Range validator, and a file that changed but kept its size would
// be spliced: old bytes on disk, new ones fetched. Before such a resume, a few
// small ranges of the bytes already on disk, at random offsets, are fetched
// again and compared with the disk (invariant 5). A difference means the file
// changed: the download starts over. The same fetch compares a finished file
// with a server that names no validator, and `spread` picks the ranges over a
// whole file that that check and MirrorVote compare. It is here, not in
// Store, because it fetches: PartialFile picks a resume's samples and
// Download+Attempt hands it `firstDifference` as its `SampleComparison`. The
// pure samplers stay beside the constants and the fetch they serve.

enum SpotCheck {
    /// Ranges fetched again before a resume without validators.
    static let sampleCount = 3
    /// The length of each, in bytes.
    static let sampleLength: Int64 = 16 << 10
    /// Ranges spread over a whole file to compare it with a server's, or
    /// mirrors with one another.
    static let spreadCount = 4

    /// `spreadCount` ranges of `sampleLength` bytes spread over a `size`-byte file.
    static func spread(size: Int64, using random: inout some RandomNumberGenerator) -> [ByteRange] {
        samples(size: size, count: spreadCount, length: sampleLength, using: &random)
    }

    /// `count` ranges of at most `length` bytes spread over a `size`-byte
    /// file: one at a place `random` picks in each of `count` equal stripes;
    /// the whole file, once, when it is no longer than `count` ranges.
    static func samples(
        size: Int64, count: Int, length: Int64,
        using random: inout some RandomNumberGenerator
    ) -> [ByteRange] {
        guard size > 0, count > 0, length > 0 else { return [] }
        guard size > Int64(count) * length else { return [ByteRange(0, size)] }
        let stripe = size / Int64(count)
        return (0..<Int64(count)).map { index in
            let first = index * stripe
            let last = index == Int64(count) - 1 ? size : first + stripe
            let start = first + Int64.random(in: 0...(last - first - length), using: &random)
            return ByteRange(start, start + length)
        }
    }

    /// Up to `count` ranges of at most `length` bytes inside `done`, each
    /// from a byte picked uniformly from `done` by `random` (one that would
    /// overlap or touch an earlier sample is left out); sorted.
    static func samples(
        of done: RangeSet, count: Int, length: Int64,
        using random: inout some RandomNumberGenerator
    ) -> [ByteRange] {
        let total = done.byteCount
        guard total > 0, length > 0 else { return [] }
        var picked: [ByteRange] = []
        for _ in 0..<count {
            var skip = Int64.random(in: 0..<total, using: &random)
            for range in done.ranges {
                guard skip >= range.count else {
                    let start = max(range.start, min(range.start + skip, range.end - length))
                    let sample = ByteRange(start, min(start + length, range.end))
                    if !picked.contains(where: { $0.start <= sample.end && sample.start <= $0.end }) {
                        picked.append(sample)
                    }
                    break
                }
                skip -= range.count
            }
        }
        return picked.sorted()
    }

    /// The first of `samples` whose bytes at `url` (a `size`-byte file) differ
    /// from those in `file`, or nil when all agree. The samples are fetched at
    /// once. An answer naming another length is a difference; any other
    /// answer `ResponseCheck.partialContent` refuses (an error status,
    /// another range, a coded or multipart body) fails the check, which
    /// leaves the partial download as it is. `origin`: the URL the
    /// headers were given for (`RangeFetch`).
    static func firstDifference(
        in file: OutputFile, url: String, headersGivenFor origin: String, size: Int64, samples: [ByteRange],
        options: TransferOptions
    ) throws(DownloadError) -> ByteRange? {
        let fetched = concurrently(samples, named: "rangeget check") { sample in
            Result { () throws(CurlError) in
                try RangeFetch(url: url, range: sample, options: options, headersGivenFor: origin)
            }
        }
        for sample in samples {
            let response: RangeFetch
            switch fetched[sample]! {
            case let .failure(error):
                throw .network(
                    url: url, message: "checking the partial download: \(error.message)", failure: error.failure)
            case let .success(answer): response = answer
            }
            let remote: [UInt8]
            switch response.bytes(of: sample, expected: Expectation(size: size, etag: nil, lastModified: nil)) {
            case let .success(bytes):
                remote = bytes
            case .failure(.otherTotal):
                // Another complete length, in a 206 or a 416 (RELIABILITY.md 3): the file changed.
                return sample
            case let .failure(rejection):
                throw .server(
                    url: url,
                    message: "checking the partial download, bytes \(sample) were not served as asked "
                        + "(\(rejection)); the partial download is kept for a later attempt")
            }
            let local: [UInt8]
            do { local = try file.read(count: Int(sample.count), at: sample.start) } catch { throw .io(error) }
            if local != remote { return sample }
        }
        return nil
    }
}
