// rangeget: wiring only. Pick the subcommand, run it, exit with its code.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A file-size limit (ulimit -f) must fail the write with EFBIG, not kill us:
// the manifest is then saved and the error reported.
signal(SIGXFSZ, SIG_IGN)

let (subcommand, arguments) = Subcommand.selected(by: Array(CommandLine.arguments.dropFirst()))
exit(subcommand.run(arguments))
