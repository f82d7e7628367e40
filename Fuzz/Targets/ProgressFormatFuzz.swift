// Fuzz target: the figures of the progress line from any DownloadProgress a
// server's sizes or a library caller can produce: sizes and rate
// (ByteCount.format), percentage (String(format1:)), ETA (secondsLeft, then
// Duration.format), as ProgressDisplay combines them (Sources/rangeget/Units.swift).
// Never trap; each figure is one short line.

private func requireFigure(_ figure: String, _ what: String, _ context: @autoclosure () -> String) {
    require(!figure.isEmpty && figure.utf8.count <= 40 && !figure.contains("\n"),
            "\(what) \(figure.debugDescription) from \(context())")
}

/// 8 bytes as an Int64, big-endian.
private func int64(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int64 {
    Int64(bitPattern: bytes[offset..<(offset + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
}

@_cdecl("LLVMFuzzerTestOneInput")
public func progressFormatFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    guard bytes.count >= 25 else { return 0 }
    let done = int64(bytes, at: 0)
    let total = int64(bytes, at: 8)
    let rate = Double(bitPattern: UInt64(bitPattern: int64(bytes, at: 16)))
    let progress = DownloadProgress(bytesDone: done, totalBytes: bytes[24] & 1 == 0 ? total : nil, bytesPerSecond: rate,
                                    activeConnections: 1)
    let context = "done \(done), total \(total), rate \(rate)"
    requireFigure(ByteCount.format(done), "size", context)
    requireFigure(ByteCount.format(total), "size", context)
    if let totalBytes = progress.totalBytes, totalBytes > 0 {
        requireFigure(String(format1: Double(done) * 100 / Double(totalBytes)), "percentage", context)
    }
    if let left = progress.secondsLeft {
        require(left >= 0, "negative ETA \(left) from \(context)")
        requireFigure(Duration.format(left), "ETA", context)
    }
    requireFigure(Duration.format(rate), "duration", context)
    return 0
}
