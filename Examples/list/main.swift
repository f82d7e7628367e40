// rangeget-list-example DIR URL...: fetches every URL into DIR through one
// DownloadSession, 8 connections at most for all of them together (the
// README's example of a list; a test runs it against the test server).
import Foundation
import RangeGet

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: rangeget-list-example DIR URL...\n".utf8))
    exit(2)
}
// README: begin
let session = DownloadSession(configuration: .init(connections: 8))
let entries = arguments.dropFirst().map { DownloadList.Entry(urls: [$0]) }
let list = session.list(entries, into: arguments[0])
let summary = await list.run(onEnd: { index, result in
    switch result {
    case let .success(file): print("saved \(file.path) (\(file.size) bytes)")
    case let .failure(error): print("failed: \(entries[index].urls[0]): \(error)")
    }
})
print("\(summary.complete) of \(summary.entries) files, at most \(session.peakConnectionsInUse) connections at once")
// README: end
exit(summary.failed.isEmpty ? 0 : 1)
