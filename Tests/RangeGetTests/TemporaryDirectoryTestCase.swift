// A test case with a directory of its own, made before each test and
// removed after it.
import Foundation
import XCTest

class TemporaryDirectoryTestCase: XCTestCase {
    /// This test's directory, empty at its start.
    var directory: String!

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = NSTemporaryDirectory() + "rangeget-\(type(of: self))-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
        try super.tearDownWithError()
    }
}
