// The opening request a connection carries (Opening.swift): its range, and
// whether its body is kept in memory, which is judged once, on the loop's
// thread, from the final head. Its transitions are Connection's.
import CCurl

/// What a connection's opening request asked for and what became of its body.
/// (A class, as every payload of `Connection.State`: the enum stays one word
/// wide, and the write callback tells its phase in a comparison.)
final class OpeningRequest {
    /// Whether the body is kept in memory (then the connection is
    /// `keepingBody`): not decided yet, or not kept, with the head's check
    /// when one was made (nil: settled before the head was judged).
    enum Hold {
        case undecided
        case declined(check: Result<PartialContent, Rejection>?)
    }

    /// The bytes asked for, from byte 0.
    var range: ByteRange
    /// The largest whole file whose body is kept in memory instead of pausing (0: none).
    let holdLimit: Int64
    var hold = Hold.undecided

    init(range: ByteRange, holdLimit: Int64) {
        self.range = range
        self.holdLimit = holdLimit
    }
}

/// The body of a whole small file an opening request keeps in memory.
final class HeldBody {
    /// The check of the head: a 206 with the whole file, `answer.total` bytes.
    let answer: PartialContent
    private(set) var bytes: [UInt8] = []

    init(answer: PartialContent) {
        self.answer = answer
        bytes.reserveCapacity(Int(answer.total))
    }

    /// Adds `count` bytes; false, and nothing kept, when they go past the
    /// length the head announced.
    func keep(_ data: UnsafeRawPointer, count: Int) -> Bool {
        guard Int(answer.total) - bytes.count >= count else { return false }
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: data, count: count))
        return true
    }

    /// True when every byte the head announced is in.
    var isWhole: Bool { bytes.count == Int(answer.total) }
}

extension Connection {
    /// True when the opening request keeps its body in memory: its head, once
    /// in, is a usable 206 (the checks of `ResponseCheck.partialContent`)
    /// with the whole file, of at most the hold limit. Judged once, on the
    /// loop's thread: at the first body byte or when the head is seen in.
    func holdsBody() -> Bool {
        guard case let .opening(request) = state else { return heldBody != nil }
        guard case .undecided = request.hold, request.holdLimit > 0, responseHead.isFinal else { return false }
        let check = ResponseCheck.partialContent(
            responseHead, answering: .prefix(of: request.range),
            expected: .unknown)
        guard case let .success(answer) = check, answer.served == ByteRange(0, answer.total),
            answer.total <= request.holdLimit
        else {
            declineHold(check: check)
            return false
        }
        keepBody(of: answer)
        return true
    }

    /// Decides, if it is not decided yet, that the body is not kept (the
    /// opening's waiter has resumed without it). Loop thread.
    func settleHold() {
        declineHold(check: nil)
    }

    /// The body kept so far.
    var heldBody: [UInt8]? {
        if case let .keepingBody(held) = state { return held.bytes }
        return nil
    }

    /// True when the held body has every byte its head announced.
    var holdsWholeBody: Bool {
        if case let .keepingBody(held) = state { return held.isWhole }
        return false
    }

    /// The check of the opening's final head, as `holdsBody` made it (the
    /// opening's probe reads it rather than checking the head again).
    var openingCheck: Result<PartialContent, Rejection>? {
        switch state {
        case let .opening(request):
            if case let .declined(check) = request.hold { return check }
            return nil
        case let .keepingBody(held):
            return .success(held.answer)
        default:
            return nil
        }
    }

    /// How a transfer ended while no client owned it (`endedUnowned`).
    var unownedEnd: CURLcode? {
        if case let .endedUnowned(result) = state { return result }
        return nil
    }
}
