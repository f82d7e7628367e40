# rangeget: `make demo` shows it working, `make test` proves it.
.PHONY: deps build demo test bench clean

deps:
	@scripts/install-deps

build: deps
	swift build -c release --product rangeget

demo: build
	scripts/demo.sh

test: deps
	swift build --build-tests
	swift test --skip-build

bench:
	Benchmarks/run

clean:
	rm -rf .build demo-data
