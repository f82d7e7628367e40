#!/usr/bin/env bash
# Builds the libFuzzer targets over the pure RangeGet sources that read
# outside input, and runs each for a while.
#
#   Fuzz/run.sh [SECONDS-PER-TARGET] [TARGET...]
#
# Targets: content-range file-name response-check manifest http-date
# retry-after progress-format (default: all, 60 s each). Needs a Swift
# toolchain whose swiftc supports -sanitize=fuzzer (the Linux toolchains
# do). Each target is built with AddressSanitizer into
# .build/fuzz/, starts from the seeds in Fuzz/Corpus/TARGET, keeps its growing
# corpus in .build/fuzz/corpus/TARGET and writes any crashing input to
# .build/fuzz/artifacts/TARGET/. A crash ends that target with a non-zero
# status; the script exits non-zero if any target failed.
# Replay a crash:  .build/fuzz/TARGET .build/fuzz/artifacts/TARGET/crash-...
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(content-range file-name response-check manifest http-date retry-after progress-format)

src=Sources/RangeGet
# The pure sources the parsers live in. The engine keeps moving code around,
# so anything else a target needs is found by type-checking it: each missing
# name is looked up among the RangeGet files that import no C module, and added.
base=(
    "$src/Probe/ContentRange.swift" "$src/Probe/FileName.swift" "$src/Probe/ResponseHead.swift"
    "$src/Probe/RemoteFile.swift" "$src/Plan/ByteRange.swift" "$src/Plan/RangeSet.swift"
    "$src/Store/Manifest.swift" "$src/Store/SystemCalls.swift" "$src/Engine/ResponseCheck.swift"
)
mapfile -t pure < <(grep -rL --include='*.swift' -E '^import (CCurl|CCurlShim|CCrypto|Digests)' "$src" | sort)

# Prints the sources `harness` (and the `extra` files) need, one a line.
sources_for() {
    local harness="$1" extra="$2" sources=("${base[@]}")
    [ -n "$extra" ] && sources+=("$extra")
    for _ in $(seq 1 12); do
        missing="$(swiftc -typecheck -parse-as-library -swift-version 6 -module-name RangeGet "${sources[@]}" \
            Fuzz/Targets/Common.swift "$harness" 2>&1 \
            | grep -oE "cannot find (type )?'[A-Za-z_][A-Za-z0-9_]*' in scope|has no member '[A-Za-z_][A-Za-z0-9_]*'" \
            | grep -oE "'[^']+'" | tr -d "'" | sort -u)"
        [ -z "$missing" ] && break
        added=0
        for name in $missing; do
            for file in "${pure[@]}"; do
                if grep -qE "(struct|class|enum|protocol|typealias|actor|func|var|let) $name\b" "$file" \
                    && [[ ! " ${sources[*]} " == *" $file "* ]]; then
                    sources+=("$file")
                    added=1
                    break
                fi
            done
        done
        [ $added -eq 0 ] && break
    done
    printf '%s\n' "${sources[@]}"
}

harness() {
    case "$1" in
        content-range) echo Fuzz/Targets/ContentRangeFuzz.swift ;;
        file-name) echo Fuzz/Targets/FileNameFuzz.swift ;;
        response-check) echo Fuzz/Targets/ResponseCheckFuzz.swift ;;
        manifest) echo Fuzz/Targets/ManifestFuzz.swift ;;
        http-date) echo Fuzz/Targets/HTTPDateFuzz.swift ;;
        retry-after) echo Fuzz/Targets/RetryAfterFuzz.swift ;;
        progress-format) echo Fuzz/Targets/ProgressFormatFuzz.swift ;;
        *) echo "unknown target '$1'" >&2; return 1 ;;
    esac
}

# Files outside the library a target needs: the command's formatting of sizes and times.
extra() {
    case "$1" in
        progress-format) echo Sources/rangeget/Units.swift ;;
        *) echo "" ;;
    esac
}

mkdir -p .build/fuzz
status=0
for target in "${targets[@]}"; do
    file="$(harness "$target")" || { status=2; continue; }
    echo "== $target: building"
    mapfile -t sources < <(sources_for "$file" "$(extra "$target")")
    if ! swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g -module-name RangeGet \
        "${sources[@]}" Fuzz/Targets/Common.swift "$file" -o ".build/fuzz/$target" > ".build/fuzz/$target.build.log" 2>&1; then
        grep -E "error" ".build/fuzz/$target.build.log" >&2
        echo "== $target: build failed, see .build/fuzz/$target.build.log" >&2
        status=2
        continue
    fi
    corpus=".build/fuzz/corpus/$target"
    artifacts=".build/fuzz/artifacts/$target/"
    mkdir -p "$corpus" "$artifacts"
    echo "== $target: fuzzing for $seconds s"
    # Fork mode with -ignore_crashes keeps fuzzing after a finding, so one run
    # reports every distinct property violation. Leak detection is off: an
    # empty file read through FileManager leaks 4 KiB inside Foundation itself.
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 TMPDIR="${TMPDIR:-/tmp}" \
        ".build/fuzz/$target" -fork=1 -ignore_crashes=1 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=4096 -artifact_prefix="$artifacts" "$corpus" "Fuzz/Corpus/$target" > ".build/fuzz/$target.log" 2>&1
    runs="$(grep -oE "^#[0-9]+" ".build/fuzz/$target.log" | tail -1)"
    # Replay every saved input once to name the property it broke.
    findings="$(for input in "$artifacts"*; do
        [ -f "$input" ] || continue
        SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 ".build/fuzz/$target" "$input" 2>&1 \
            | grep -oE "property violated: [a-zA-Z -]+|AddressSanitizer: [a-z-]+|libFuzzer: [a-z -]+" | head -1 \
            || echo "crash: replay $input"
    done | sort | uniq -c)"
    if [ -n "$findings" ]; then
        echo "== $target: FINDINGS after ${runs:-?} inputs (saved in $artifacts):" >&2
        echo "$findings" >&2
        status=1
    else
        echo "== $target: no finding in ${runs:-?} inputs"
    fi
done
exit $status
