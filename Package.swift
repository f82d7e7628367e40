// swift-tools-version:6.0
// rangeget: a segmented, resumable download accelerator on libcurl.
// The folder layout is the data flow; see README.md ("Design").
import PackageDescription

let package = Package(
    name: "rangeget",
    products: [
        .library(name: "RangeGet", targets: ["RangeGet"]),
        .library(name: "RangeServer", targets: ["RangeServer"]),
        .executable(name: "rangeget", targets: ["rangeget"])
    ],
    targets: [
        // <curl/curl.h> as a Swift module.
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // OpenSSL's libcrypto, for checksums (SHA-256, SHA-1, MD5).
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // libxml2's SAX parser, for Metalink documents (no DTDs, no entities).
        .systemLibrary(
            name: "CLibXML2",
            pkgConfig: "libxml-2.0",
            providers: [.apt(["libxml2-dev"])]
        ),
        // Digests over libcrypto, kept apart from the curl module.
        .target(name: "Digests", dependencies: ["CCrypto", "SystemSupport"]),
        // The helpers over the C library every target needs, in one copy:
        // the monotonic clock, EINTR retries, named threads.
        .target(name: "SystemSupport"),
        // Typed, non-variadic wrappers for curl_easy_setopt and friends.
        .target(name: "CCurlShim", dependencies: ["CCurl"]),
        // The library: probe, plan, engine, store, public API.
        .target(name: "RangeGet", dependencies: ["CCurl", "CCurlShim", "CLibXML2", "Digests", "SystemSupport"]),
        // A range-capable HTTP/1.1 test server with injectable faults.
        .target(name: "RangeServer", dependencies: ["SystemSupport"], exclude: ["README.md"]),
        // The command-line tool: wiring only.
        .executableTarget(name: "rangeget", dependencies: ["RangeGet", "RangeServer", "SystemSupport"]),
        // A small program that uses only the library's public API (README: "Using the library").
        .executableTarget(name: "rangeget-example", dependencies: ["RangeGet"], path: "Examples/fetch"),
        // The README's list example: several files through one DownloadSession.
        .executableTarget(name: "rangeget-list-example", dependencies: ["RangeGet"], path: "Examples/list"),
        .testTarget(name: "RangeGetTests", dependencies: ["RangeGet", "RangeServer", "SystemSupport"]),
        .testTarget(
            name: "EndToEndTests", dependencies: ["RangeGet", "RangeServer", "SystemSupport", "Digests", "rangeget"]),
        .testTarget(name: "RangeServerTests", dependencies: ["RangeServer"])
    ]
)
