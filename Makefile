# rangeget: `make demo` shows it working, `make test` proves it.
.PHONY: deps build docs api demo format test soak bench install uninstall deb clean

deps:
	@scripts/install-deps

# The Swift runtime is linked statically: the binary runs without the
# toolchain and keeps about 6 MiB less resident. Without SwiftPM's $ORIGIN
# run path, an installed binary loads no library from the directory it sits
# in (/usr/local/bin).
build: deps
	scripts/build-info
	swift build -c release --product rangeget --static-swift-stdlib --disable-local-rpath

# The man page and the completions, as the binary writes them from its
# registry of commands and their option tables (a test fails when the
# committed files differ from these), and the library's reference: its DocC
# catalog, built into .build/docs (open .build/docs/index.html through a web
# server, or `docc preview`).
docs:
	swift build --product rangeget
	bin="$$(swift build --show-bin-path)/rangeget" && \
		"$$bin" help --man >docs/rangeget.1 && \
		"$$bin" help --completion bash >docs/completion/rangeget.bash && \
		"$$bin" help --completion zsh >docs/completion/_rangeget
	scripts/api-check --docs

# The library's public API, written to docs/api/RangeGet.txt: run it when a
# change to the public API is meant (make test fails while the file differs).
api:
	swift build --product rangeget
	scripts/api-check --update

# make install: where to, by the GNU conventions. DESTDIR stages the tree elsewhere
# (a package, the tests); zsh's directory has a variable of its own because
# Debian's zsh looks in /usr/share/zsh/vendor-completions instead.
PREFIX ?= /usr/local
DESTDIR ?=
ZSH_COMPLETIONS ?= $(PREFIX)/share/zsh/site-functions
# The binary to install: the release build of `make build` unless told (the
# tests install the debug build they run).
BINARY ?= $(shell swift build -c release --show-bin-path)/rangeget

bindir = $(DESTDIR)$(PREFIX)/bin
man1dir = $(DESTDIR)$(PREFIX)/share/man/man1
bashcompletiondir = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
zshcompletiondir = $(DESTDIR)$(ZSH_COMPLETIONS)

# Installs what `make build` built and never builds: `sudo make install`
# would otherwise run SwiftPM as root and leave root-owned files in .build.
install:
	@test -x "$(BINARY)" || { echo "make install: $(BINARY) is missing: run make build first" >&2; exit 1; }
	install -D -m 0755 "$(BINARY)" "$(bindir)/rangeget"
	install -D -m 0644 docs/rangeget.1 "$(man1dir)/rangeget.1"
	install -D -m 0644 docs/completion/rangeget.bash "$(bashcompletiondir)/rangeget"
	install -D -m 0644 docs/completion/_rangeget "$(zshcompletiondir)/_rangeget"

# Removes the files install put there and nothing else; directories stay
# (install -D cannot tell which of them it created).
uninstall:
	rm -f "$(bindir)/rangeget" "$(man1dir)/rangeget.1" "$(bashcompletiondir)/rangeget" "$(zshcompletiondir)/_rangeget"

# A Debian package of the release build, in the package root:
# rangeget_VERSION_ARCH.deb (scripts/deb says what goes in it).
deb: build
	@scripts/install-deps dpkg-dev
	scripts/deb

demo: build
	scripts/demo.sh

# Formats every Swift file in place as .swift-format says (`make test` lints the same files).
format:
	swift-format format --in-place --recursive --parallel Sources Tests Examples Package.swift

test: deps
	scripts/build-info
	swift build --build-tests
	# The public API as committed, every public symbol documented, and the
	# DocC catalog built without a warning (a broken link fails it).
	scripts/api-check --docs
	# The code as the formatter writes it (.swift-format; `make format` fixes it).
	swift-format lint --strict --recursive --parallel Sources Tests Examples Package.swift
	# XCTest only: the suite has no swift-testing tests, and its empty run
	# would otherwise print the last line ("0 tests ... passed"). The last
	# lines say how many tests were skipped and why.
	bash -o pipefail -c "swift test --skip-build --disable-swift-testing 2>&1 | scripts/test-summary"

# The soak of random faults (SoakTests) at size: SOAK_RUNS runs from
# SOAK_SEED, by default the time, printed first so a failure replays
# (make test runs 12 runs from a fixed seed).
SOAK_RUNS ?= 300
soak: deps
	scripts/build-info
	swift build --build-tests
	seed="$${SOAK_SEED:-$$(date +%s)}" && echo "make soak: $(SOAK_RUNS) runs from seed $$seed" && \
		RANGEGET_SOAK_RUNS="$(SOAK_RUNS)" RANGEGET_SOAK_SEED="$$seed" \
		swift test --skip-build --disable-swift-testing --filter SoakTests

bench:
	Benchmarks/run

clean:
	rm -rf .build demo-data rangeget_*.deb
