// How the command words a library error: the library's own line, with its
// remedy named as the option of the command that sets it (`--restart`,
// `--force`) rather than as the `DownloadOptions` property the library names.
import RangeGet

extension DownloadError {
    /// The one line the command gives for this error: on stderr, in `--json`
    /// and in `status`.
    var commandLineText: String {
        guard let remedy else { return description }
        return "\(problem); \(remedy.commandLineText)"
    }
}

extension DownloadError.Remedy {
    /// What to do, in the command's terms.
    var commandLineText: String {
        switch self {
        case .restart: "run again with --restart to start over"
        case .overwrite: "use --force to replace it"
        case .verifyOrOverwrite: "use --checksum to verify it, or --force to replace it"
        }
    }
}
