#!/bin/sh
# A refresh command for rangeget's --refresh-cmd against `rangeget serve
# --expiring-urls`: prints a fresh signed URL from the server's /sign/NAME.
#
#     Benchmarks/refresh-url.sh SIGN_URL [OLD_URL]
#
# rangeget runs it as `--refresh-cmd "Benchmarks/refresh-url.sh
# http://127.0.0.1:PORT/sign/NAME"` and appends the expired URL, which this
# script ignores (curl would fetch it as a second URL).
set -eu
if [ $# -lt 1 ]; then
    echo "usage: $0 SIGN_URL [OLD_URL]" >&2
    exit 2
fi
exec curl -fsS "$1"
