// PieceSource: where a free connection looks for its next piece, in order.
// A queued piece whose backoff is over comes first. While a queued piece
// waits out its backoff, nothing else starts: no steal, no piece of the end
// reserve, no race; unless it was refused beyond a server's connection
// limit, where the connections the server took go on meanwhile. Else the end of a running transfer (a steal), then a
// piece of the end reserve, then a race for a slow transfer's tail. Pure:
// the engine asks it for a free connection, and to tell the loop whether
// the file waits for its first connection, so the two cannot disagree
// (issue 36: a file waiting out a Retry-After counted its end reserve as
// work it could start, and held every other file of a list to one
// connection, though it handed none of the reserve out).

/// A place a free connection's next piece may come from.
enum PieceSource: Equatable, Sendable {
    /// The queued piece at this index, the first whose backoff is over.
    case queued(index: Int)
    /// The end of a running transfer (work stealing).
    case steal
    /// A piece of the end reserve (`Planner.endReserve`).
    case reserve
    /// A slow running transfer's tail, fetched a second time (the end game).
    case race

    /// The sources to try, in order, for a free connection at `now`:
    /// `notBefore` holds the queued pieces' backoff ends; `plain` is one
    /// stream from byte 0 (its only piece is queued); `reserve` is true while
    /// an end reserve is left; `running` while a transfer runs (one to steal
    /// from or race). Empty: nothing to start now.
    /// `holding` is false for the queued pieces whose wait holds nothing
    /// back (refused beyond a server's connection limit: the connections it
    /// took go on); absent, every one holds.
    static func order(
        notBefore: [Double], holding: [Bool]? = nil, now: Double, plain: Bool, reserve: Bool, running: Bool
    ) -> [PieceSource] {
        if let index = notBefore.firstIndex(where: { $0 <= now }) { return [.queued(index: index)] }
        guard !(holding ?? notBefore.map { _ in true }).contains(true), !plain else { return [] }
        var sources: [PieceSource] = running ? [.steal] : []
        if reserve { sources.append(.reserve) }
        if running { sources.append(.race) }
        return sources
    }
}
