// Pieces checked as they land (PieceCheck): what the engine does with a
// verdict. A piece that matched is verified, and the manifest records it. A
// piece that did not costs that piece alone: its bytes stop counting, a
// transfer still writing past it keeps what it wrote after it, and the piece
// is fetched again, from a mirror that did not write it when one is left.
// The bad copy is kept (in memory, within a limit) until the good copy
// lands: each mirror whose bytes in it differ is counted against, dropped
// at its second bad piece, or at once when most of the bytes it sent of the
// piece differ (another file). A piece one mirror wrote alone counts against
// it at once. A dropped mirror's unverified bytes are all fetched again. A
// piece bad more times than the retries allow fails the download. Until one
// of its pieces matched, a mirror is on trial: one piece at a time (its
// transfers already running go on).

extension Engine {
    /// Records the bytes a transfer wrote, and which mirror wrote them.
    func recordWritten(_ range: ByteRange, by mirror: Mirror) {
        written.insert(range)
        guard let pieceCheck, !range.isEmpty else { return }
        writers.append((range, mirror.index))
        if onTrial(mirror),
            !PieceCheck.pieces(inside: range, length: pieceCheck.hashes.length, size: pieceCheck.size).isEmpty
        {
            mirror.awaitingVerdict = true
        }
    }

    /// The longest piece a mirror is put on trial with: one piece, hashed
    /// before it gets another, costs a mirror serving another file one
    /// piece; a longer piece would hold a good mirror to one connection
    /// for too long.
    static let trialPieceLimit: Int64 = 4 << 20

    /// True when `mirror` must show a good piece before it gets more than
    /// one transfer, one piece long: with piece hashes (of at most
    /// `trialPieceLimit`), another mirror usable, and none of its pieces
    /// matched yet (or one went bad since).
    func onTrial(_ mirror: Mirror) -> Bool {
        guard let pieceCheck, !mirror.proven, pieceCheck.hashes.length <= Self.trialPieceLimit else { return false }
        return mirrors.contains { $0.isUsable && $0 !== mirror }
    }

    /// `piece` cut, for a mirror on trial, to end with the first whole hash
    /// piece it covers (the rest back to the queue); as it is otherwise.
    func trialCut(_ piece: Piece, for mirror: Mirror, now: Double) -> Piece {
        guard let pieceCheck, onTrial(mirror) else { return piece }
        let length = pieceCheck.hashes.length
        let end = (piece.range.start + length - 1) / length * length + length
        guard end < piece.range.end else { return piece }
        requeue(piece, from: end, failures: piece.failures, notBefore: now)
        var cut = piece
        cut.range = ByteRange(piece.range.start, end)
        return cut
    }

    /// Sends the pieces written since the last turn to be hashed, and acts
    /// on the verdicts that came back.
    func checkPieces(now: Double) -> EngineOutcome? {
        guard let pieceCheck else { return nil }
        for verdict in pieceCheck.takeVerdicts() where pieceCheck.accept(verdict) {
            if let outcome = settle(verdict, now: now) { return outcome }
        }
        // Every 2 ms at most while transfers run (the snapshot and its
        // arithmetic each turn cost more than the wait: a 1 MiB piece takes
        // about 1 ms to hash), at once when none does.
        guard now - lastPieceSubmit >= 0.002 || !connections.contains(where: \.isBusy) else { return nil }
        lastPieceSubmit = now
        // Pieces from a mirror none of whose pieces has matched yet are
        // hashed first: a mirror serving another file shows it sooner.
        pieceCheck.submit(within: writtenSnapshot()) { [self] range in
            writerParts(of: range).contains { !mirrors[$0.mirror].proven }
        }
        return nil
    }

    /// True when nothing is left to fetch or check: with piece hashes, every piece matched.
    var piecesDone: Bool { pieceCheck?.isComplete ?? true }

    private func settle(_ verdict: PieceCheck.Verdict, now: Double) -> EngineOutcome? {
        let parts = writerParts(of: verdict.range)
        let suspects = Set(parts.map(\.mirror)).sorted().map { mirrors[$0] }
        onEvent(
            .transfer(
                .pieceChecked(
                    index: verdict.index, range: verdict.range, matches: verdict.matches,
                    urls: suspects.map(\.remote.url))))
        for mirror in suspects { mirror.awaitingVerdict = false }
        if verdict.matches {
            writers.removeAll { verdict.range.contains($0.range) }
            if suspects.count == 1 { suspects[0].proven = true }
            guard let copy = badCopies.removeValue(forKey: verdict.index) else { return nil }
            heldCopyBytes -= Int64(copy.bytes.count)
            return judge(copy, piece: verdict.index, now: now)
        }
        excise(verdict.range, now: now)
        let failures = (pieceFailures[verdict.index] ?? 0) + 1
        pieceFailures[verdict.index] = failures
        guard failures <= settings.retries else {
            let algorithm = pieceCheck!.hashes.algorithm.rawValue
            let sources = suspects.map(\.remote.url).joined(separator: ", ")
            return .failed(
                .verification(
                    "piece \(verdict.index) (bytes \(verdict.range)) failed its \(algorithm) check \(failures) times, "
                        + "from \(sources)"))
        }
        // Fetched again whole from one mirror: not from the one that wrote
        // it alone while another is left; written by several, from any.
        requeue(
            Piece(range: verdict.range, recheck: true), from: verdict.range.start, failures: 0, notBefore: now,
            avoiding: suspects.count == 1 ? suspects.map(\.index) : [])
        // The bad bytes are kept until the good copy shows whose differ:
        // a piece one mirror wrote alone counts against it now.
        let counted = suspects.count == 1 ? Set(suspects.map(\.index)) : []
        let keep: Bool
        if var copy = badCopies[verdict.index] {
            // A copy from an earlier failure waits for the good one.
            copy.counted.formUnion(counted)
            badCopies[verdict.index] = copy
            keep = true
        } else if heldCopyBytes + verdict.range.count <= Self.copyLimit {
            let bytes = (try? pieceFile?.read(count: Int(verdict.range.count), at: verdict.range.start)) ?? []
            badCopies[verdict.index] = BadCopy(range: verdict.range, bytes: bytes, parts: parts, counted: counted)
            heldCopyBytes += Int64(bytes.count)
            keep = true
        } else {
            keep = false
        }
        guard suspects.count == 1 || !keep else { return nil }
        for mirror in suspects {
            if let outcome = count(badPiece: verdict.index, against: mirror, now: now) { return outcome }
        }
        return nil
    }

    /// The most bytes of bad pieces kept in memory at once: beyond it, a
    /// bad piece counts against every mirror that wrote some of it.
    static let copyLimit: Int64 = 64 << 20

    /// What the good copy of a piece tells about its bad copy: each mirror
    /// whose bytes differ is counted against (unless it was already), and
    /// one whose bytes mostly differ serves another file and is dropped.
    private func judge(_ copy: BadCopy, piece: Int, now: Double) -> EngineOutcome? {
        guard let good = try? pieceFile?.read(count: Int(copy.range.count), at: copy.range.start),
            good.count == copy.bytes.count
        else { return nil }
        // Each mirror is judged by the bytes it alone wrote: in a race, both
        // sides' written ranges cover the bytes either wrote.
        for index in Set(copy.parts.map(\.mirror)).sorted() {
            let mirror = mirrors[index]
            guard mirror.isUsable else { continue }
            let own = RangeSet(copy.parts.filter { $0.mirror == index }.map(\.range))
                .subtracting(RangeSet(copy.parts.filter { $0.mirror != index }.map(\.range)))
            var sent = 0
            var differing = 0
            for range in own.ranges {
                let offsets = Int(range.start - copy.range.start)..<Int(range.end - copy.range.start)
                sent += offsets.count
                differing += offsets.count { copy.bytes[$0] != good[$0] }
            }
            guard differing > 0 else { continue }
            if differing * 2 > sent, sent >= 4096 {
                return dropForBadData(
                    mirror,
                    because: "it serves another file: \(differing) of the \(sent) bytes it sent of piece "
                        + "\(piece) differ from a good mirror's",
                    now: now)
            }
            if !copy.counted.contains(index), let outcome = count(badPiece: piece, against: mirror, now: now) {
                return outcome
            }
        }
        return nil
    }

    /// Counts bad piece `index` against `mirror`: at its second, with
    /// another mirror left, it is dropped; at its first, it is on trial
    /// again for new pieces (`onTrial`). Its running transfers go on: each
    /// piece they write is checked as it lands, so a second bad one drops
    /// the mirror within a piece, and stopping them threw away what was in
    /// flight (the metalink benchmark: 19 to 29 MiB served beyond the file
    /// for a mirror with one flipped byte).
    private func count(badPiece index: Int, against mirror: Mirror, now: Double) -> EngineOutcome? {
        mirror.badPieces.append(index)
        guard mirror.isUsable, mirrors.contains(where: { $0.isUsable && $0 !== mirror }) else { return nil }
        guard mirror.badPieces.count >= 2 else {
            mirror.proven = false
            return nil
        }
        let pieces = mirror.badPieces.map(String.init).joined(separator: ", ")
        return dropForBadData(mirror, because: "its pieces \(pieces) failed their checks", now: now)
    }

    /// Who wrote which bytes of `range`, by finished and running transfers,
    /// each part cut to `range`.
    private func writerParts(of range: ByteRange) -> [(range: ByteRange, mirror: Int)] {
        var parts: [(range: ByteRange, mirror: Int)] = []
        func add(_ written: ByteRange, _ mirror: Int) {
            let part = ByteRange(max(written.start, range.start), min(written.end, range.end))
            if !part.isEmpty { parts.append((part, mirror)) }
        }
        for writer in writers where writer.range.overlaps(range) { add(writer.range, writer.mirror) }
        for connection in connections where connection.isBusy {
            if let soFar = connection.writtenSoFar, soFar.overlaps(range), let mirror = connection.mirror {
                add(soFar, mirror.index)
            }
        }
        return parts
    }

    /// Takes back the bytes of `bad`: finished transfers' from the record,
    /// running ones' by stopping them at its start (what they wrote past
    /// its end still counts; their rest goes back to the queue).
    private func excise(_ bad: ByteRange, now: Double) {
        for connection in connections where connection.isBusy {
            guard let soFar = connection.writtenSoFar, soFar.overlaps(bad), let mirror = connection.mirror else {
                continue
            }
            let planned = connection.remaining?.end ?? soFar.end
            guard connection.race == nil else {
                cancel(
                    connection, reason: "a piece it wrote failed its check", requeue: true,
                    distrustingFrom: max(bad.start, soFar.start), now: now)
                continue
            }
            cancel(
                connection, reason: "a piece it wrote failed its check", requeue: false,
                distrustingFrom: max(bad.start, soFar.start), now: now)
            if soFar.end > bad.end { recordWritten(ByteRange(bad.end, soFar.end), by: mirror) }
            let rest = max(soFar.end, bad.end)
            if rest < planned {
                requeue(Piece(range: ByteRange(rest, planned)), from: rest, failures: 0, notBefore: now)
            }
        }
        untrust(bad)
    }

    /// Stops using `mirror`, which served bytes that are not the file's:
    /// every byte it wrote outside a verified piece is fetched again.
    private func dropForBadData(_ mirror: Mirror, because reason: String, now: Double) -> EngineOutcome? {
        for connection in connections where connection.isBusy && connection.mirror === mirror {
            cancel(
                connection, reason: "mirror dropped", requeue: true,
                distrustingFrom: connection.writtenSoFar?.start, now: now)
        }
        var unverified = RangeSet(writers.filter { $0.mirror == mirror.index }.map(\.range))
        if let pieceCheck { unverified = unverified.subtracting(pieceCheck.verified) }
        writers.removeAll { $0.mirror == mirror.index }
        for range in unverified.ranges {
            untrust(range)
            requeue(Piece(range: range), from: range.start, failures: 0, notBefore: now, avoiding: [mirror.index])
        }
        return drop(mirror, because: reason, now: now)
    }

    /// `range`'s bytes do not count: not written (by anyone), not in the
    /// journal nor the manifest, and no longer verified.
    func untrust(_ range: ByteRange) {
        written.remove(range)
        // A verdict on these bytes will not come.
        for writer in writers where writer.range.overlaps(range) { mirrors[writer.mirror].awaitingVerdict = false }
        if writers.contains(where: { $0.range.overlaps(range) }) {
            writers = writers.flatMap { writer -> [(range: ByteRange, mirror: Int)] in
                guard writer.range.overlaps(range) else { return [writer] }
                return [
                    ByteRange(writer.range.start, max(writer.range.start, range.start)),
                    ByteRange(min(writer.range.end, range.end), writer.range.end)
                ].filter { !$0.isEmpty }.map { ($0, writer.mirror) }
            }
        }
        journal?.forget(RangeSet([range]))
        checkpointer?.retract(range)
        pieceCheck?.forget(range)
    }
}

extension ByteRange {
    /// True when the two ranges share a byte.
    func overlaps(_ other: ByteRange) -> Bool {
        start < other.end && other.start < end
    }

    /// True when every byte of `other` is in this range.
    func contains(_ other: ByteRange) -> Bool {
        start <= other.start && other.end <= end
    }
}

/// A piece that failed its check, as it was: its bytes, and who wrote which part.
struct BadCopy {
    let range: ByteRange
    let bytes: [UInt8]
    let parts: [(range: ByteRange, mirror: Int)]
    /// The mirrors it was counted against already (a piece one mirror wrote alone).
    var counted: Set<Int>
}
