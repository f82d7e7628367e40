// The values a transfer is made of: the piece it fetches, the race it may
// share with another connection, and how it ended, which the engine settles.

/// A piece of work: bytes to fetch, and how often fetching them failed.
struct Piece: Sendable {
    var range: ByteRange
    /// Consecutive attempts that ended without a byte written.
    var failures = 0
    /// Monotonic time before which the piece must not be retried (backoff).
    var notBefore: Double = 0
    /// Mirrors that served this piece's bytes bad: another fetches it when one can.
    var avoid: [Int] = []
    /// A piece fetched again after it failed its check: one transfer from
    /// one mirror, never cut nor raced, so that a second failure names
    /// the mirror that served it.
    var recheck = false
    /// False for a piece refused beyond the server's connection limit: while
    /// it waits, the connections the server took go on with other work.
    var holdsOthers = true
}

/// Two connections fetching the same tail: each writes only bytes beyond
/// what either has written, so no byte is written twice; the first to reach
/// the end wins and the other is cancelled.
final class Race {
    /// Where the race began: the first byte both sides fetch.
    let start: Int64
    /// Everything below this offset (from the race's start) is written.
    var frontier: Int64

    init(frontier: Int64) {
        start = frontier
        self.frontier = frontier
    }
}

/// How a transfer ended, decided when libcurl reports it done.
enum TransferEnd {
    /// Every byte of the piece was written.
    case complete
    /// The transfer stopped early, for `cause`; the rest of the piece goes back to the queue.
    case incomplete(reason: String, cause: RetryCause, rejection: Rejection?)
    /// Writing to disk failed: the download cannot go on.
    case localFailure(IOError)
}

/// What a finished transfer did.
struct FinishedTransfer {
    var piece: Piece
    var end: TransferEnd
    /// The bytes of the piece now on disk (from the piece's start).
    var written: ByteRange
    var mirror: Mirror
    var race: Race?
    /// The libcurl failure that ended an incomplete transfer (a stall counts
    /// as libcurl's timeout); nil when libcurl reported success or rangeget
    /// itself ended it (a rejection, a lost race, a stop).
    var curlError: CurlError?
    /// True when rangeget closed it before the server sent all it was asked
    /// for: the server goes on a moment, until it notices, and holds the
    /// request's place in its connection limit meanwhile.
    var cutShort = false
    /// How its request went (for `TransferEvent.transferTimed`).
    var timing: TransferTiming
}
