// Shared by every fuzz target: Foundation (the RangeGet sources rely on it
// being imported somewhere in the module) and a check that traps, so
// libFuzzer records the input that broke a property.
import Foundation

@inline(never)
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("property violated: \(message())") }
}
