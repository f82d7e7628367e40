// MultiHandle owns the libcurl multi handle that runs every transfer of a
// download concurrently. One thread drives it; `wakeup` is the only call
// another thread may make.
import CCurl
import CCurlShim

/// A thin owner of a `CURLM *`.
final class MultiHandle {
    let raw: UnsafeMutableRawPointer
    /// The easy handles added and not removed since: its transfers.
    private var added: Set<UnsafeMutableRawPointer> = []

    /// A multi handle; unless `multiplex`, two transfers in flight never
    /// share a connection (libcurl multiplexes HTTP/2 streams by default).
    init(multiplex: Bool) throws(CurlError) {
        _ = CurlGlobal.initialized
        guard let raw = curl_multi_init() else { throw CurlError(CURLE_FAILED_INIT) }
        self.raw = raw
        try set(CURLMOPT_PIPELINING, multiplex ? Int(CURLPIPE_MULTIPLEX) : Int(CURLPIPE_NOTHING))
    }

    deinit {
        curl_multi_cleanup(raw)
    }

    /// Sets a multi option libcurl reads as `long`.
    func set(_ option: CURLMoption, _ value: Int) throws(CurlError) {
        try check(rg_multi_setopt_long(raw, option, value))
    }

    /// Transfers in the multi handle now, running or paused.
    var transfers: Int { added.count }

    /// Adds `easy`'s transfer.
    func add(_ easy: EasyHandle) throws(CurlError) {
        try check(curl_multi_add_handle(raw, easy.raw))
        added.insert(easy.raw)
    }

    /// Takes `easy`'s transfer out; a handle already out is left alone
    /// (an opening's transfer may end before its request is cancelled).
    func remove(_ easy: EasyHandle) {
        guard added.remove(easy.raw) != nil else { return }
        curl_multi_remove_handle(raw, easy.raw)
    }

    /// Drives every transfer as far as it can go without blocking.
    func perform() throws(CurlError) -> Int {
        var running: Int32 = 0
        try check(curl_multi_perform(raw, &running))
        return Int(running)
    }

    /// Waits for socket activity, a `wakeup`, or the timeout.
    func poll(timeoutMilliseconds: Int) throws(CurlError) {
        try check(curl_multi_poll(raw, nil, 0, Int32(timeoutMilliseconds), nil))
    }

    /// Interrupts a `poll` in progress; safe from any thread.
    func wakeup() {
        curl_multi_wakeup(raw)
    }

    /// The next finished transfer: its easy handle and result code.
    func nextFinished() -> (easy: UnsafeMutableRawPointer, result: CURLcode)? {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(raw, &queued) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                return (easy, message.pointee.data.result)
            }
        }
        return nil
    }

    private func check(_ code: CURLMcode) throws(CurlError) {
        guard code == CURLM_OK else { throw CurlError(multi: code) }
    }
}
