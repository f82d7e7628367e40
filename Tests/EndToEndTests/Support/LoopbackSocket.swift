// A TCP socket on 127.0.0.1 at a port the kernel picks: how the test
// servers that are not RangeServer (ScriptedServer, NginxServer) find
// their port.
import Foundation
import Glibc

enum LoopbackSocket {
    /// A new TCP socket (close-on-exec) bound to 127.0.0.1 on a free port,
    /// not yet listening. Throws the errno of the call that failed.
    static func bound() throws -> (descriptor: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            let error = POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            close(fd)
            throw error
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }
}
