// ByteSink: where a connection's bytes go, each at its offset in the file.
// Two sinks, one engine: the `.part` file (OutputFile, written in place) and
// the window of a download read in order (StreamWindow, `-o -`).

/// Takes the bytes of the file at their offsets, from the loop's thread.
protocol ByteSink: AnyObject, Sendable {
    /// Takes all of `count` bytes at `offset`; false when the sink has no
    /// room for them yet (nothing was taken: the transfer pauses and offers
    /// them again once `hasRoom(at:)`).
    func accept(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws(IOError) -> Bool

    /// True when a write of any size libcurl hands over, at `offset`, fits now.
    func hasRoom(at offset: Int64) -> Bool
}

extension OutputFile: ByteSink {
    func accept(_ bytes: UnsafeRawPointer, count: Int, at offset: Int64) throws(IOError) -> Bool {
        try write(bytes, count: count, at: offset)
        return true
    }

    func hasRoom(at offset: Int64) -> Bool { true }
}
