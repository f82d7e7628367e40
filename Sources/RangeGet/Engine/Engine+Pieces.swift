// Pieces checked as they land (PieceCheck): what the engine does with a
// verdict. A piece that matched is verified, and the manifest records it. A
// piece that did not costs that piece alone: its bytes stop counting, a
// transfer still writing past it keeps what it wrote after it, and the piece
// is fetched again, from a mirror that did not write it when one is left.
// The mirror that wrote it alone is counted against: dropped at its second
// bad piece, or at once when the good copy shows its bytes were another
// file's (most sampled offsets differ); a dropped mirror's unverified bytes
// are all fetched again. A piece bad more times than the retries allow
// fails the download.

extension Engine {
    /// Bytes sampled from a bad piece, to compare with its good copy.
    static let sampleCount = 64

    /// Records the bytes a transfer wrote, and which mirror wrote them.
    func recordWritten(_ range: ByteRange, by mirror: Mirror) {
        written.insert(range)
        if pieceCheck != nil, !range.isEmpty { writers.append((range, mirror.index)) }
    }

    /// Sends the pieces written since the last turn to be hashed, and acts
    /// on the verdicts that came back.
    func checkPieces(now: Double) -> EngineOutcome? {
        guard let pieceCheck else { return nil }
        for verdict in pieceCheck.takeVerdicts() {
            if let outcome = settle(verdict, now: now) { return outcome }
        }
        pieceCheck.submit(within: writtenSnapshot())
        return nil
    }

    /// True when nothing is left to fetch or check: with piece hashes, every piece matched.
    var piecesDone: Bool { pieceCheck?.isComplete ?? true }

    private func settle(_ verdict: PieceCheck.Verdict, now: Double) -> EngineOutcome? {
        let suspects = writers(of: verdict.range)
        onEvent(
            .transfer(
                .pieceChecked(
                    index: verdict.index, range: verdict.range, matches: verdict.matches,
                    urls: suspects.map(\.remote.url))))
        if verdict.matches {
            writers.removeAll { verdict.range.contains($0.range) }
            guard let bad = badSamples.removeValue(forKey: verdict.index) else { return nil }
            let mirror = mirrors[bad.mirror]
            let good = samples(of: verdict.range)
            let differing = zip(bad.bytes, good).count { $0 != $1 }
            guard mirror.isUsable, differing * 2 > Self.sampleCount else { return nil }
            return dropForBadData(
                mirror,
                because: "it serves another file: its piece \(verdict.index) differs from a good mirror's at "
                    + "\(differing) of \(Self.sampleCount) sampled bytes",
                now: now)
        }
        for mirror in suspects { mirror.badPieces.append(verdict.index) }
        excise(verdict.range, now: now)
        let failures = (pieceFailures[verdict.index] ?? 0) + 1
        pieceFailures[verdict.index] = failures
        guard failures <= settings.retries else {
            return .failed(
                .verification(
                    "piece \(verdict.index) (bytes \(verdict.range)) failed its \(pieceCheck!.hashes.algorithm.rawValue) "
                        + "check \(failures) times, from \(Set(suspects.map(\.remote.url)).sorted().joined(separator: ", "))"
                ))
        }
        requeue(
            Piece(range: verdict.range), from: verdict.range.start, failures: 0, notBefore: now,
            avoiding: suspects.map(\.index))
        guard suspects.count == 1, let mirror = suspects.first else { return nil }
        badSamples[verdict.index] = (mirror.index, samples(of: verdict.range))
        let others = mirrors.contains { $0.isUsable && $0 !== mirror }
        guard mirror.badPieces.count >= 2, others else { return nil }
        let pieces = mirror.badPieces.map(String.init).joined(separator: ", ")
        return dropForBadData(mirror, because: "its pieces \(pieces) failed their checks", now: now)
    }

    /// The mirrors that wrote bytes of `range`, by finished and running transfers.
    private func writers(of range: ByteRange) -> [Mirror] {
        var indices = Set<Int>()
        for writer in writers where writer.range.overlaps(range) { indices.insert(writer.mirror) }
        for connection in connections where connection.isBusy {
            if let soFar = connection.writtenSoFar, soFar.overlaps(range), let mirror = connection.mirror {
                indices.insert(mirror.index)
            }
        }
        return indices.sorted().map { mirrors[$0] }
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

    /// `range`'s bytes do not count: not written, not in the journal nor
    /// the manifest, and no longer verified.
    func untrust(_ range: ByteRange) {
        written.remove(range)
        journal?.forget(RangeSet([range]))
        checkpointer?.retract(range)
        pieceCheck?.forget(range)
    }

    /// `sampleCount` bytes of `range` as the file holds them now, evenly spaced.
    private func samples(of range: ByteRange) -> [UInt8] {
        guard let file = pieceFile else { return [] }
        let step = max(1, range.count / Int64(Self.sampleCount))
        return (0..<Self.sampleCount).map { sample in
            let offset = range.start + Int64(sample) * step
            guard offset < range.end else { return 0 }
            return (try? file.read(count: 1, at: offset))?.first ?? 0
        }
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
