// rangeget: wiring only. Pick the subcommand, run it, exit with its code.
import Glibc

// A file-size limit (ulimit -f) must fail the write with EFBIG, not kill us:
// the manifest is then saved and the error reported.
signal(SIGXFSZ, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
let code: Int32
switch arguments.first {
case "serve":
    code = ServeCommand.run(Array(arguments.dropFirst()))
case "status":
    code = StatusCommand.run(Array(arguments.dropFirst()))
case "bench":
    code = BenchCommand.run(Array(arguments.dropFirst()))
case "help":
    code = HelpCommand.run(Array(arguments.dropFirst()))
default:
    code = GetCommand.run(arguments)
}
exit(code)
