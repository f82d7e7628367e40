// The command runs on the main thread and waits: an async library call
// (fetching a Metalink, a repair) is run as a task and waited for here.
import Dispatch
import RangeGet
import Synchronization

/// Runs `body` as a task and blocks the calling thread until it ends.
func waitFor<Value: Sendable>(
    _ body: @escaping @Sendable () async throws(DownloadError) -> Value
) -> Result<Value, DownloadError> {
    let outcome = Mutex<Result<Value, DownloadError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let result: Result<Value, DownloadError>
        do throws(DownloadError) {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return outcome.withLock { $0 }!
}
