// Suggestion: what a mistyped option or command most likely meant, and what
// a habit from another download tool means here. A habit is never taken to
// mean something else silently: it ends the run (exit 2) with a hint.

enum Suggestion {
    /// The word of `candidates` closest to `word` by edit distance (an
    /// insertion, deletion, substitution or swap of neighbours each count 1),
    /// when it is close enough to be a typo: at most 1 edit for words of up
    /// to 4 letters, 2 up to 8, else 3. Of several as close, the first.
    static func closest(to word: String, among candidates: [String]) -> String? {
        let limit = word.count <= 4 ? 1 : word.count <= 8 ? 2 : 3
        var best: (word: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(word, candidate)
            if distance <= limit, distance < best?.distance ?? .max { best = (candidate, distance) }
        }
        return best?.word
    }

    /// The optimal-string-alignment distance between `a` and `b`.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.lowercased())
        let b = Array(b.lowercased())
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        // Three rows: two back for the swap of neighbours.
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], before[j - 2] + 1)
                }
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }

    /// What the download's options of other tools mean here, by how they are
    /// typed (`-x`, `--continue`). Where two tools give one letter two
    /// meanings (`-c`: resume in wget and aria2c, a cookie jar in curl), the
    /// hint names both.
    static let habits: [String: String] = {
        let connections = "rangeget's connections are -n N (default 8)"
        let resume = "rangeget resumes on its own (run the same command again)"
        var hints = [
            "-x": "-x is aria2c's connections per server: " + connections,
            "-s": "-s is aria2c's split count: " + connections,
            "-c": "-c is not a rangeget option: where wget and aria2c resume with -c, " + resume
                + "; curl's -c writes a cookie jar, which rangeget does not keep",
            "-O": "-O is not a rangeget option: name the file with -o FILE (wget's -O FILE); "
                + "without it the name comes from the server or the URL (curl's -O)",
            "-C": "-C - is curl's resume: " + resume,
            "-Z": "-Z is curl's parallel mode: rangeget fetches each file over -n connections, and a list with -i LIST"
        ]
        hints["--max-connection-per-server"] = "--max-connection-per-server is aria2c's -x: " + connections
        hints["--split"] = "--split is aria2c's -s: " + connections
        hints["--continue"] = "--continue is not a rangeget option: " + resume
        hints["--output-document"] = "--output-document is wget's -O: rangeget's is -o FILE"
        hints["--remote-name"] =
            "--remote-name is curl's -O: rangeget names the file from the server or the URL on its own"
        hints["--continue-at"] = "--continue-at is curl's -C: " + resume
        hints["--parallel"] =
            "--parallel is curl's -Z: rangeget fetches each file over -n connections, and a list with -i LIST"
        return hints
    }()
}
