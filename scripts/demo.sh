#!/usr/bin/env bash
# make demo: serve a generated file with a per-connection cap, download it
# with 1 and with 8 connections, stream it to stdout in order over 8
# connections, interrupt a download and resume it, and check every result's
# SHA-256 against the original.
set -euo pipefail

cd "$(dirname "$0")/.."
bin="$(swift build -c release --show-bin-path)/rangeget"
data=demo-data
size_mib=48
rate=8M
mkdir -p "$data/out"
rm -f "$data"/out/*

if [ ! -f "$data/demo.bin" ] || [ "$(stat -c %s "$data/demo.bin")" -ne $((size_mib << 20)) ]; then
    echo "generating $data/demo.bin ($size_mib MiB)"
    head -c $((size_mib << 20)) /dev/urandom > "$data/demo.bin"
fi
want=$(sha256sum "$data/demo.bin" | cut -d' ' -f1)

"$bin" serve "$data" --rate-per-connection "$rate" > "$data/serve.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q serving "$data/serve.log" 2>/dev/null && break; sleep 0.1; done
url="$(sed -n 's/.* on \(http[^ ]*\)$/\1/p' "$data/serve.log")demo.bin"
echo "server: $url, each connection capped at $rate/s"

check() {
    local got
    got=$(sha256sum "$1" | cut -d' ' -f1)
    if [ "$got" = "$want" ]; then echo "  sha256 OK ($got)"; else echo "  sha256 MISMATCH: $got" >&2; exit 3; fi
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
seconds_since() { awk -v a="$1" -v b="$(now_ms)" 'BEGIN { printf "%.2f", (b - a) / 1000 }'; }

echo
echo "1 connection:"
start=$(now_ms)
"$bin" -q -n 1 -o "$data/out/one.bin" "$url"
one=$(seconds_since "$start")
echo "  $one s"
check "$data/out/one.bin"

echo "8 connections:"
start=$(now_ms)
"$bin" -q -n 8 -o "$data/out/eight.bin" "$url"
eight=$(seconds_since "$start")
echo "  $eight s"
check "$data/out/eight.bin"
echo "  speed-up: $(awk -v a="$one" -v b="$eight" 'BEGIN { printf "%.1f", a / b }')x"

echo "8 connections, in order to stdout (-o - | sha256sum):"
start=$(now_ms)
got=$("$bin" -q -n 8 -o - "$url" | sha256sum | cut -d' ' -f1)
echo "  $(seconds_since "$start") s"
if [ "$got" = "$want" ]; then echo "  sha256 OK ($got)"; else echo "  sha256 MISMATCH: $got" >&2; exit 3; fi

echo
echo "interrupted and resumed (2 connections, Ctrl-C after 1.5 s):"
"$bin" -q -n 2 -o "$data/out/resumed.bin" "$url" &
client=$!
sleep 1.5
kill -INT $client
status=0; wait $client || status=$?
echo "  first run exited with $status (130 = interrupted, resumable)"
echo "  manifest: $(cat "$data/out/resumed.bin.part.json" | head -c 300)"
"$bin" -n 2 -o "$data/out/resumed.bin" "$url"
check "$data/out/resumed.bin"
