# rangeget: `make demo` shows it working, `make test` proves it.
.PHONY: deps build demo test bench clean

deps:
	@scripts/install-deps

# The Swift runtime is linked statically: the binary runs without the
# toolchain and keeps about 6 MiB less resident. Without SwiftPM's $ORIGIN
# run path, an installed binary loads no library from the directory it sits
# in (/usr/local/bin).
build: deps
	scripts/build-info
	swift build -c release --product rangeget --static-swift-stdlib --disable-local-rpath

demo: build
	scripts/demo.sh

test: deps
	scripts/build-info
	swift build --build-tests
	# XCTest only: the suite has no swift-testing tests, and its empty run
	# would otherwise print the last line ("0 tests ... passed"). The last
	# lines say how many tests were skipped and why.
	bash -o pipefail -c "swift test --skip-build --disable-swift-testing 2>&1 | scripts/test-summary"

bench:
	Benchmarks/run

clean:
	rm -rf .build demo-data
