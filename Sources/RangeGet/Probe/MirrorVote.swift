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
    /// sample it could not serve), by index.
    static func outvoted(_ mirrors: [RemoteFile], samples: [ByteRange],
                         options: TransferOptions) -> [Int: String] {
        let answers = concurrently(Array(mirrors.indices), named: "rangeget sample") { index in
            Result { () throws(DownloadError) in try bytes(of: mirrors[index], at: samples, options: options) }
        }
        var groups: [(bytes: [[UInt8]], members: [Int])] = []
        var dropped: [Int: String] = [:]
        for index in mirrors.indices {
            switch answers[index]! {
            case let .failure(error):
                dropped[index] = "its sample bytes could not be fetched to compare (\(error))"
            case let .success(bytes):
                if let group = groups.firstIndex(where: { $0.bytes == bytes }) {
                    groups[group].members.append(index)
                } else {
                    groups.append((bytes, [index]))
                }
            }
        }
        // The largest group; the first found wins a tie, and groups are found in the mirrors' order.
        guard let winner = groups.indices.max(by: { groups[$0].members.count < groups[$1].members.count
                || (groups[$0].members.count == groups[$1].members.count && $0 > $1) }) else { return dropped }
        for (group, members) in groups.enumerated().map({ ($0.offset, $0.element) }) where group != winner {
            let differing = samples.indices.filter { members.bytes[$0] != groups[winner].bytes[$0] }.map { samples[$0] }
            let reference = mirrors[groups[winner].members[0]].url
            for index in members.members {
                dropped[index] = "its bytes \(differing.map(String.init(describing:)).joined(separator: ", ")) differ "
                    + "from those \(reference) and the mirrors that agree with it serve"
            }
        }
        return dropped
    }

    /// The bytes `mirror` serves at each of `samples`, each answer checked
    /// against the mirror's own size and validators.
    private static func bytes(of mirror: RemoteFile, at samples: [ByteRange],
                              options: TransferOptions) throws(DownloadError) -> [[UInt8]] {
        var bytes: [[UInt8]] = []
        for sample in samples {
            let fetched: RangeFetch
            do { fetched = try RangeFetch(url: mirror.effectiveURL, range: sample, options: options) } catch {
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
