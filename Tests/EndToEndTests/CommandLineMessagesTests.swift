// Issue 18: the command line as a newcomer finds it. Each test runs the built
// binary and checks what it prints: tables, the summary, messages, --json.
import Foundation
import RangeServer
import XCTest

final class CommandLineMessagesTests: EndToEndTestCase {
    /// The cell under each header starts where the header does, on every row.
    private func assertColumnsAlign(_ table: String, headers: [String], file: StaticString = #filePath, line: UInt = #line) {
        let lines = table.split(separator: "\n").map { Array($0) }
        guard let header = lines.first.map({ String($0) }) else { return XCTFail("no table", file: file, line: line) }
        for name in headers.dropFirst() {
            guard let range = header.range(of: " " + name) else { return XCTFail("no \(name) in \(header)", file: file, line: line) }
            let column = header.distance(from: header.startIndex, to: range.lowerBound) + 1
            for row in lines.dropFirst() {
                XCTAssertTrue(row.count > column && row[column] != " " && row[column - 1] == " ",
                              "\(name) starts at \(column) in\n\(table)", file: file, line: line)
            }
        }
    }

    /// `padding(to:)` added a space to the widest cell of a column.
    func testStatusTableColumnsLineUp() throws {
        try Data("{broken".utf8).write(to: URL(fileURLWithPath: path("a-long-output-name.iso.part.json")))
        try Data("{broken".utf8).write(to: URL(fileURLWithPath: path("b.part.json")))
        let run = try CLI.run(["status"], in: directory)
        XCTAssertEqual(run.status, 4, run.stdout + run.stderr)
        assertColumnsAlign(run.stdout, headers: ["OUTPUT", "DONE", "SIZE", "LEFT", "UPDATED", "STATE"])
    }
}
