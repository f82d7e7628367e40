// Issue 36 g: a racing transfer whose answer runs past its Content-Range is
// not trusted, nor are the bytes its partner skipped because it had written
// them (Engine.distrust). A resume must not trust them either: not through
// the partner's record in the write journal, nor through a manifest a
// checkpoint saved while the race ran. What a kill would leave is read at the
// moment the answer is distrusted (the retry event, on the transfer thread,
// comes right after), then put back after the run for the resume.
import Foundation
import RangeGet
import RangeServer
import Synchronization
import XCTest

final class DistrustedRaceTests: EndToEndTestCase {
    /// Two connections; the second piece (from 512 KiB) is answered 1.8 s
    /// late, so once the first connection is done (1.3 s at 384 KiB/s) and
    /// the piece has been silent for a second, it is raced. The racer's
    /// answer is overlong: it writes the piece ahead of the late answer,
    /// which skips what is written, then runs past its end. A kill then must
    /// leave nothing from 512 KiB on that a resume trusts: the resume asks
    /// for all of it again.
    func testBytesOfADistrustedRaceAreTrustedByNoResume() throws {
        let size: Int64 = 1 << 20
        let late: Int64 = 512 << 10
        let resource = Resource.generated(size: size, seed: 370)
        server.setResource(resource, at: "f")
        server.setRatePerConnection(384 << 10)
        server.setFaults([
            FaultRule(.delay(milliseconds: 1800), when: .nthRequest(2)),
            FaultRule(.overlong(1000), when: .rangeStart(late))
        ])
        let output = path("f")
        let (manifest, journal) = (output + ".part.json", output + ".part.journal")
        let leftAtTheKill = Mutex<(manifest: Data?, journal: Data?)?>(nil)
        let run = runLibrary(
            [server.url("f")], to: output,
            stopWhen: { event in
                guard case let .retry(_, _, reason, _, _, _) = event, reason.contains("ran past its Content-Range")
                else {
                    return false
                }
                leftAtTheKill.withLock {
                    $0 = (
                        FileManager.default.contents(atPath: manifest),
                        FileManager.default.contents(atPath: journal)
                    )
                }
                return true
            },
            configure: { options in
                options.connections = 2
                options.minimumSplit = 256 << 10
                // Checkpoints while the race runs list its bytes as done.
                options.checkpointInterval = 0.1
            })
        XCTAssertEqual(run.error, .interrupted(keptResumeState: true))
        let faults = server.statistics.requests.compactMap { request in request.fault.map { (request.rangeHeader, $0) }
        }
        XCTAssertEqual(faults.map(\.1), ["delay:1800", "overlong:1000"], "\(faults)")
        XCTAssertTrue(
            run.events.contains { event in
                if case let .transfer(.raced(_, range)) = event { return range.start == late }
                return false
            }, "the late piece was never raced")
        let left = try XCTUnwrap(leftAtTheKill.withLock { $0 }, "no answer was distrusted")
        try XCTUnwrap(left.manifest).write(to: URL(fileURLWithPath: manifest))
        if let journalLeft = left.journal { try journalLeft.write(to: URL(fileURLWithPath: journal)) }
        let trusted = try XCTUnwrap(try ManifestFile.trusted(manifest))
        XCTAssertFalse(trusted.contains { $0.upperBound > late }, "a resume would trust \(trusted), past \(late)")

        server.setRatePerConnection(nil)
        server.setFaults([])
        server.resetStatistics()
        let resumed = runLibrary([server.url("f")], to: output) { $0.connections = 2 }
        guard case let .success(result) = resumed.result else {
            return XCTFail("the resume: \(String(describing: resumed.error))")
        }
        assertSameBytes(output, resource)
        XCTAssertLessThanOrEqual(result.bytesReused, late)
        let asked = covered(server.requestedRanges)
        XCTAssertTrue(
            asked.contains { $0.lowerBound <= late && $0.upperBound == size },
            "the resume asked for \(asked), not all of \(late)..<\(size) again")
    }
}
