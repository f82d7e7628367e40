// The libcurl side of HeaderCollector: the one CURLOPT_HEADERFUNCTION
// callback of every transfer, handing each header line to its collector.
import CCurl

extension HeaderCollector {
    /// Makes `easy` deliver its header lines here (`CURLOPT_HEADERFUNCTION`,
    /// `CURLOPT_HEADERDATA`). libcurl holds the collector unretained: its
    /// owner keeps it alive while `easy` runs transfers.
    func install(on easy: EasyHandle) throws(CurlError) {
        try easy.set(CURLOPT_HEADERDATA, pointer: Unmanaged.passUnretained(self).toOpaque())
        try easy.set(CURLOPT_HEADERFUNCTION, callback: collectHeaderLine)
    }
}

private let collectHeaderLine: CurlDataCallback = { data, size, count, user in
    guard let data, let user else { return 0 }
    let collector = Unmanaged<HeaderCollector>.fromOpaque(user).takeUnretainedValue()
    collector.consume(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}
