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
# .build/fuzz/artifacts/TARGET/. The script exits non-zero if any target
# failed: a finding (1), or a target that did not build or ran fewer than
# MIN_INPUTS inputs (2; default 1000, a target that never ran reports none).
# Each target's campaign (date, commit, target, inputs, seconds, findings)
# is appended to Fuzz/campaigns/log.md: commit it with the change it checks.
# Replay a crash:  .build/fuzz/TARGET .build/fuzz/artifacts/TARGET/crash-...
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(content-range file-name response-check manifest http-date retry-after progress-format)

src=Sources/RangeGet
# The pure sources the parsers live in. The engine keeps moving code around,
# so anything else a target needs is found by type-checking it: each name not
# in scope is looked up among the RangeGet files that import no C module, and
# added (a missing member is not looked up: its type's file comes with the type).
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
        missing="$(swiftc -typecheck -parse-as-library -swift-version 6 -module-name RangeGet -package-name rangeget "${sources[@]}" \
            Fuzz/Targets/Common.swift "$harness" 2>&1 \
            | grep -oE "cannot find (type )?'[A-Za-z_][A-Za-z0-9_]*' in scope" \
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

mkdir -p .build/fuzz Fuzz/campaigns
log=Fuzz/campaigns/log.md
[ -f "$log" ] || printf '%s\n\n%s\n%s\n' "# Fuzz campaigns (Fuzz/run.sh appends a row per target)" \
    "| date | commit | target | inputs | seconds | findings |" "|---|---|---|---|---|---|" > "$log"
commit="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$( [ -n "$(git status --porcelain 2>/dev/null)" ] && echo +modified)"
minimum="${MIN_INPUTS:-1000}"
status=0
for target in "${targets[@]}"; do
    file="$(harness "$target")" || { status=2; continue; }
    echo "== $target: building"
    mapfile -t sources < <(sources_for "$file" "$(extra "$target")")
    if ! swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g -module-name RangeGet -package-name rangeget \
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
    inputs="${runs#\#}"
    if [ -n "$findings" ]; then
        echo "== $target: FINDINGS after ${inputs:-no} inputs (saved in $artifacts):" >&2
        echo "$findings" >&2
        status=1
        summary="$(echo "$findings" | tr '\n' ';' | sed 's/  */ /g; s/|/\//g')"
    elif [ -z "$inputs" ] || [ "$inputs" -lt "$minimum" ]; then
        echo "== $target: DID NOT RUN: ${inputs:-no} inputs, fewer than $minimum (see .build/fuzz/$target.log)" >&2
        [ "$status" -eq 0 ] && status=2
        summary="did not run (${inputs:-no} inputs)"
    else
        echo "== $target: no finding in $inputs inputs"
        summary="none"
    fi
    echo "| $(date -u +%Y-%m-%d) | $commit | $target | ${inputs:-0} | $seconds | $summary |" >> "$log"
done
exit $status
