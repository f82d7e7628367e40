import RangeGet

// OutputDirectory: checks, before anything is fetched, that downloads can be
// saved where the command line says: `-d DIR`, and the directory of `-o
// PATH`, are created when missing (with their parents, as `mkdir -p`, aria2c
// and wget do), and a directory that cannot
// be written into is a usage error (exit 2) with the system's reason, found by
// creating a file there: access(2) says yes to root in /proc, where no file
// can be made.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

enum OutputDirectory {
    /// Makes sure files can be created in `path`, creating it first when
    /// `create` is set and it is missing. `name` says what the command line
    /// called it (`--dir DIR`) in messages.
    static func prepare(_ path: String, create: Bool, name: String) throws(UsageError) {
        var info = stat()
        if stat(path, &info) != 0 {
            let reason = errno
            guard reason == ENOENT || reason == ENOTDIR else {
                throw UsageError("cannot reach \(name): \(systemReason(reason))")
            }
            guard create else { throw UsageError("\(name) does not exist") }
            if let failure = Directories.make(path) {
                throw UsageError("\(name) does not exist and cannot be created: \(failure)")
            }
        } else if (info.st_mode & S_IFMT) != S_IFDIR {
            throw UsageError("\(name) is not a directory")
        }
        if let failure = createTestFile(in: path) { throw UsageError("cannot write to directory \(path): \(failure)") }
    }

    /// Creates and removes an empty file in `directory`; why it failed, or nil.
    private static func createTestFile(in directory: String) -> String? {
        let path = (directory.hasSuffix("/") ? directory : directory + "/") + ".rangeget-write-test-\(getpid())"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        // ENOENT in a directory that is there: a file system that makes no
        // files on request (/proc, /sys); its reason alone misleads.
        guard descriptor >= 0 else {
            return errno == ENOENT ? "its file system takes no new files" : systemReason(errno)
        }
        close(descriptor)
        unlink(path)
        return nil
    }
}
