// A URL given on the command line, refused as the library would refuse it.
import RangeGet

enum CommandLineURL {
    /// Refuses what the library would (`RemoteURL`): anything but an
    /// absolute http or https URL with a host.
    static func check(_ url: String) throws(UsageError) {
        if let problem = RemoteURL.problem(url) { throw UsageError(problem) }
    }
}
