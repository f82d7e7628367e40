// rangeget: wiring only. Pick the subcommand, run it, exit with its code.
import Glibc

let arguments = Array(CommandLine.arguments.dropFirst())
let code: Int32
switch arguments.first {
case "serve":
    code = ServeCommand.run(Array(arguments.dropFirst()))
default:
    code = GetCommand.run(arguments)
}
exit(code)
