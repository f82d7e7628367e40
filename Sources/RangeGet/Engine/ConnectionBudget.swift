// ConnectionBudget: the connections several downloads share (the files of a
// list, `-i`). Every download may always run one transfer; beyond that it
// takes spare connections from the budget while they last and gives each
// back as soon as it has no transfer to run on it. So when the small files
// of a list are done and their lanes have nothing left to start, the
// connections they no longer need go to the files still running, instead of
// a large file crawling along on its static share.
import Synchronization

/// Spare connections shared by downloads that each run at least one.
public final class ConnectionBudget: Sendable {
    private let spare: Mutex<Int>

    /// A budget with `spare` connections beyond each download's first. A
    /// negative `spare` is a debt (more downloads at once than connections):
    /// connections given back pay it off before any can be taken.
    public init(spare: Int) {
        self.spare = Mutex(spare)
    }

    /// Spare connections free now (negative while in debt).
    public var available: Int { spare.withLock { $0 } }

    /// Takes one spare connection; false when none is free.
    func take() -> Bool {
        spare.withLock { count in
            guard count > 0 else { return false }
            count -= 1
            return true
        }
    }

    /// Returns `count` connections (taken ones, or a finished download's
    /// first, whose owner starts no other download).
    public func giveBack(_ count: Int = 1) {
        spare.withLock { $0 += count }
    }
}
