// MirrorVote: mirrors of one file are judged by their bytes, not their
// labels. Real mirrors rarely share an ETag or a Last-Modified date (nginx
// makes its ETag from the file's modification time), so a mirror whose
// validators differ from the others' is kept when the bytes it serves at a
// few places spread over the file are those most mirrors serve there. Each
// mirror keeps its own validators, for its If-Range.
//
// What is sampled: `SpotCheck.spread`, 4 ranges of 16 KiB, one at a random
// place in each quarter of the file (the whole file when it is that small),
// the same ranges from every mirror. What
// is left: a mirror that differs only outside the samples (a file edited in
// a few bytes) passes; a checksum the user gives remains the proof of the
// whole file, and the engine still checks each mirror's answers against its
// own validators.

enum MirrorVote {
    /// True when every mirror names the same strong ETag: one version of
    /// one file, as its servers say; no byte needs to be sampled.
    static func validatorsAgree(_ mirrors: [RemoteFile]) -> Bool {
        guard let first = mirrors.first?.strongETag else { return false }
        return mirrors.allSatisfy { $0.strongETag == first }
    }

    /// The value most of `values` have; of several as common, the one that
    /// comes first. Nil for no values.
    static func majority<Value: Hashable>(_ values: [Value]) -> Value? {
        var counts: [Value: Int] = [:]
        for value in values { counts[value, default: 0] += 1 }
        let most = counts.values.max()
        return values.first { counts[$0] == most }
    }

    /// Which of `mirrors` (one size, at least two) serve the bytes most of
    /// them serve at `samples`; a tie goes to the group of the first. The
    /// others, each with why it is left out (the samples that differ, or the
    /// sample it could not serve), by index. Only the first `voters` mirrors
    /// (all by default) elect the bytes; the rest must serve the same (the
    /// mirrors a server named, `Download.addingDiscoveredMirrors`, never
    /// outvote the ones the user named); when none of them could serve its
    /// samples, only the mirrors that could not are returned.
    static func outvoted(
        _ mirrors: [RemoteFile], samples: [ByteRange],
        options: TransferOptions, voters: Int? = nil
    ) -> [Int: String] {
        let answers = concurrently(Array(mirrors.indices), named: "rangeget sample") { index in
            Result { () throws(DownloadError) in try bytes(of: mirrors[index], at: samples, options: options) }
        }
        var dropped: [Int: String] = [:]
        let served = mirrors.indices.map { index -> [[UInt8]]? in
            switch answers[index]! {
            case let .failure(error):
                dropped[index] = "its sample bytes could not be fetched to compare (\(error))"
                return nil
            case let .success(bytes):
                return bytes
            }
        }
        let elected = largestGroup(Array(served.prefix(voters ?? mirrors.count)))
        guard let reference = elected.first, let expected = served[reference] else { return dropped }
        for index in mirrors.indices where dropped[index] == nil && served[index] != expected {
            let differing = samples.indices.filter { served[index]![$0] != expected[$0] }.map { samples[$0] }
            dropped[index] =
                "its bytes \(differing.map(String.init(describing:)).joined(separator: ", ")) differ "
                + "from those \(mirrors[reference].url) and the mirrors that agree with it serve"
        }
        return dropped
    }

    /// The indices of the largest group of equal `answers` (one without an
    /// answer joins none); of groups as large, the one whose first member
    /// comes first. Empty when there is no answer. The download's vote and
    /// `bench` both count with it.
    static func largestGroup<Answer: Hashable>(_ answers: [Answer?]) -> [Int] {
        guard let winner = majority(answers.compactMap(\.self)) else { return [] }
        return answers.indices.filter { answers[$0] == winner }
    }

    /// The bytes `mirror` serves at each of `samples`, each answer checked
    /// against the mirror's own size and validators.
    private static func bytes(
        of mirror: RemoteFile, at samples: [ByteRange],
        options: TransferOptions
    ) throws(DownloadError) -> [[UInt8]] {
        var bytes: [[UInt8]] = []
        for sample in samples {
            let fetched: RangeFetch
            do {
                fetched = try RangeFetch(
                    url: mirror.effectiveURL, range: sample, options: options, headersGivenFor: mirror.url)
            } catch {
                throw .network(url: mirror.url, message: error.message, failure: error.failure)
            }
            switch fetched.bytes(of: sample, expected: Expectation(mirror)) {
            case let .success(answer): bytes.append(answer)
            case let .failure(rejection):
                throw .server(url: mirror.url, message: "bytes \(sample) were not served as asked (\(rejection))")
            }
        }
        return bytes
    }
}
