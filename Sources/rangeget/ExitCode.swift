// The exit codes of rangeget, as documented in README.md. Errors are mapped
// to codes only here, in the executable.
import RangeGet

enum ExitCode: Int32 {
    case success = 0
    case network = 1
    case usage = 2
    case verification = 3
    case local = 4
    case interrupted = 130

    init(_ error: DownloadError) {
        switch error {
        case .usage: self = .usage
        case .network, .server: self = .network
        case .verification: self = .verification
        case .io, .manifest, .busy: self = .local
        case .interrupted: self = .interrupted
        }
    }
}
