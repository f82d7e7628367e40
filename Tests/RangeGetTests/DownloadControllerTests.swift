import SystemSupport
import XCTest

// DownloadController's state machine stepped by hand, without a transfer:
// the calls of a library user (pause, resume, cancel, stop) in every order
// among the driving thread's own steps (an attempt that stops, a wake-up),
// so a race that needs a thread to lose the CPU at one exact point is a
// plain sequence here (issue 36).
@testable import RangeGet

final class DownloadControllerTests: XCTestCase {
    /// A call of a library user, or the next step of the driving thread.
    private enum Move: String, CaseIterable {
        case pause, resume, cancel, stop, driverStep
    }

    /// A controller and the thread driving it, moved one step at a time
    /// the way `Download` and `DownloadController.drive` move them.
    private final class Machine {
        /// Where the driving thread is.
        enum Driver {
            /// In an attempt, whose transfers go on until `stop` is requested.
            case attempting(StopSignal)
            /// Waiting for the gate to open.
            case parked(Gate)
            /// Gone while paused (`start()`): `resume()` starts another.
            case left
            case ended
        }

        let controller = DownloadController(keepsResumeState: true)
        private(set) var driver = Driver.ended

        init(threaded: Bool) {
            guard case .claimed = controller.claim(threaded: threaded, observer: { _ in }) else {
                preconditionFailure("a new controller is ready")
            }
            take(.attempt)
        }

        func perform(_ move: Move) {
            switch move {
            case .pause:
                controller.pause()
            case .resume:
                // `Download.resume()` starts a driving thread when told to.
                if controller.resume() { take(.attempt) }
            case .cancel, .stop:
                // `Download.cancel` ends the download itself when no thread drives it; `stop()` is a cancel that keeps.
                if case .endHere = controller.cancel(discard: move == .cancel) {
                    controller.finish(.failure(.stopped))
                    driver = .ended
                }
            case .driverStep:
                switch driver {
                case let .attempting(stop) where stop.isRequested:
                    _ = controller.register(nil)
                    take(controller.settle(.failure(.stopped)))
                case let .parked(gate) where gate.isOpen:
                    take(controller.unpark())
                case .attempting, .parked, .left, .ended:
                    break
                }
            }
        }

        /// The driving thread carries out `step`.
        private func take(_ step: DownloadController.Step) {
            switch step {
            case .attempt:
                let stop = StopSignal(loop: nil)
                if controller.register(stop) { stop.request() }
                driver = .attempting(stop)
            case let .park(gate):
                driver = .parked(gate)
            case .leave:
                driver = .left
            case let .end(outcome, _):
                controller.finish(outcome)
                driver = .ended
            }
        }

        /// What is wrong with the state the driver is in, if anything: a
        /// thread parked with no wake-up coming must be paused, and so must
        /// a download no thread drives; an ended driver, an ended download.
        var inconsistency: String? {
            let state = controller.publicState
            switch driver {
            case .attempting:
                if state == .running || state == .pausing { return nil }
            case let .parked(gate):
                if gate.isOpen || state == .paused { return nil }
            case .left:
                if state == .paused { return nil }
            case .ended:
                switch state {
                case .finished, .failed, .cancelled: return nil
                case .ready, .running, .pausing, .paused: break
                }
            }
            return "the driver \(driver) with the download \(state)"
        }
    }

    /// Issue 36 as reported: paused, then `resume()` and `pause()` back to
    /// back before the parked thread woke. It parked again on a new
    /// semaphore, the state left at pausing, and nothing would signal it:
    /// neither `resume()` nor `cancel()` took effect.
    func testResumeThenPauseBeforeTheParkedThreadWakesLeavesItPausedAndWakeable() {
        let machine = Machine(threaded: false)
        machine.perform(.pause)
        machine.perform(.driverStep)
        XCTAssertEqual(machine.controller.publicState, .paused)
        machine.perform(.resume)
        machine.perform(.pause)
        machine.perform(.driverStep)
        XCTAssertEqual(machine.controller.publicState, .paused, "parked again, so paused again")
        guard case .parked = machine.driver else { return XCTFail("\(machine.driver)") }
        machine.perform(.cancel)
        machine.perform(.driverStep)
        XCTAssertEqual(machine.controller.publicState, .cancelled(keptResumeState: false))
        guard case .ended = machine.driver else { return XCTFail("\(machine.driver)") }
    }

    /// Every sequence of six moves, for a blocking run and a `start()`ed
    /// one: after each move the state matches where the driving thread is,
    /// and a cancel then ends the download within a few of its steps.
    func testEveryOrderOfCallsAndWakeUpsStaysConsistentAndEndsOnCancel() {
        let moves = Move.allCases
        let length = 6
        var checked = 0
        for threaded in [false, true] {
            for number in 0..<(0..<length).reduce(1, { count, _ in count * moves.count }) {
                var rest = number
                let sequence = (0..<length).map { _ in
                    defer { rest /= moves.count }
                    return moves[rest % moves.count]
                }
                let machine = Machine(threaded: threaded)
                for (index, move) in sequence.enumerated() {
                    machine.perform(move)
                    if let problem = machine.inconsistency {
                        return XCTFail(
                            "threaded \(threaded), after \(sequence.prefix(index + 1).map(\.rawValue)): \(problem)")
                    }
                }
                machine.perform(.cancel)
                for _ in 0..<3 { machine.perform(.driverStep) }
                guard case .ended = machine.driver, case .cancelled = machine.controller.publicState else {
                    return XCTFail(
                        "threaded \(threaded), \(sequence.map(\.rawValue)) then cancel: the driver \(machine.driver), "
                            + "the download \(machine.controller.publicState)")
                }
                checked += 1
            }
        }
        XCTAssertEqual(checked, 2 * 15625)
    }
}
