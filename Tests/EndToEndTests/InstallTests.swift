// `make install` and `make uninstall` (issue 19): each file where Debian and
// curl users look for it, with its mode, under PREFIX and DESTDIR; uninstall
// takes back exactly those files. The tests install the debug build they run,
// so a fresh clone needs no release build for them.
import Foundation
import XCTest

final class InstallTests: EndToEndTestCase {
    func testInstallPutsEachFileInPlaceWithItsModeAndUninstallRemovesOnlyThem() throws {
        let root = path("root")
        let other = root + "/usr/bin/other"
        try FileManager.default.createDirectory(atPath: root + "/usr/bin", withIntermediateDirectories: true)
        XCTAssertTrue(
            FileManager.default.createFile(
                atPath: other, contents: Data("not rangeget's".utf8),
                attributes: [.posixPermissions: 0o755]))
        let variables = ["DESTDIR=\(root)", "PREFIX=/usr", "BINARY=\(CLI.binary)"]

        let install = try make(["install"] + variables)
        XCTAssertEqual(install.status, 0, install.stderr)
        let installed = [
            "usr/bin/rangeget": (CLI.binary, 0o755),
            "usr/share/man/man1/rangeget.1": ("docs/rangeget.1", 0o644),
            "usr/share/bash-completion/completions/rangeget": ("docs/completion/rangeget.bash", 0o644),
            "usr/share/zsh/site-functions/_rangeget": ("docs/completion/_rangeget", 0o644)
        ]
        XCTAssertEqual(try modes(under: root), installed.mapValues { $0.1 }.merging(["usr/bin/other": 0o755]) { $1 })
        for (file, (source, _)) in installed {
            let sourcePath = source.hasPrefix("/") ? source : CLI.repositoryRoot.appendingPathComponent(source).path
            XCTAssertTrue(FileManager.default.contentsEqual(atPath: root + "/" + file, andPath: sourcePath), file)
        }
        let version = try CLI.run(["--version"], in: directory, executable: root + "/usr/bin/rangeget")
        XCTAssertEqual(version.status, 0, version.stderr)
        XCTAssertTrue(version.stdout.hasPrefix("rangeget "), version.stdout)

        let uninstall = try make(["uninstall"] + variables)
        XCTAssertEqual(uninstall.status, 0, uninstall.stderr)
        XCTAssertEqual(
            try modes(under: root), ["usr/bin/other": 0o755], "uninstall left a file, or took one it did not install")
    }

    func testPrefixDefaultsToUsrLocalAndZshCompletionsCanGoWhereDebiansZshLooks() throws {
        let local = try make(["install", "DESTDIR=\(path("local"))", "BINARY=\(CLI.binary)"])
        XCTAssertEqual(local.status, 0, local.stderr)
        XCTAssertEqual(
            Set(try modes(under: path("local")).keys),
            [
                "usr/local/bin/rangeget", "usr/local/share/man/man1/rangeget.1",
                "usr/local/share/bash-completion/completions/rangeget", "usr/local/share/zsh/site-functions/_rangeget"
            ])

        // make deb installs this way.
        let debian = try make([
            "install", "DESTDIR=\(path("debian"))", "PREFIX=/usr",
            "ZSH_COMPLETIONS=/usr/share/zsh/vendor-completions", "BINARY=\(CLI.binary)"
        ])
        XCTAssertEqual(debian.status, 0, debian.stderr)
        XCTAssertEqual(try modes(under: path("debian"))["usr/share/zsh/vendor-completions/_rangeget"], 0o644)
        XCTAssertNil(try modes(under: path("debian"))["usr/share/zsh/site-functions/_rangeget"])
    }

    func testInstallWithoutABuildSaysToBuildAndInstallsNothing() throws {
        let run = try make(["install", "DESTDIR=\(path("root"))", "BINARY=\(path("nowhere/rangeget"))"])
        XCTAssertNotEqual(run.status, 0)
        XCTAssertTrue(run.stderr.contains("run make build first"), run.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("root")))
    }

    /// Runs `make ARGUMENTS` in the package root, without the settings an
    /// enclosing `make test` would pass down (MAKEFLAGS carries its
    /// command-line variables) or a PREFIX from the environment.
    private func make(_ arguments: [String]) throws -> Run {
        let unset = ["MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PREFIX", "DESTDIR", "ZSH_COMPLETIONS", "BINARY"]
            .flatMap { ["-u", $0] }
        return try CLI.run(
            unset + ["make", "--no-print-directory", "-C", CLI.repositoryRoot.path] + arguments,
            in: directory, timeout: 60, executable: "/usr/bin/env")
    }

    /// The permission bits of every file under `root` (directories left out),
    /// by path relative to it.
    private func modes(under root: String) throws -> [String: Int] {
        var modes: [String: Int] = [:]
        for file in try FileManager.default.subpathsOfDirectory(atPath: root) {
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/" + file)
            guard attributes[.type] as? FileAttributeType != .typeDirectory else { continue }
            modes[file] = (attributes[.posixPermissions] as? Int).map { $0 & 0o7777 }
        }
        return modes
    }
}
