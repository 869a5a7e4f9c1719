#!/bin/sh
# run_bounded.sh FUZZER CORPUS SECONDS
#
# Runs a libFuzzer binary for SECONDS on a temporary copy of CORPUS, so the
# source tree is never written (new inputs and crash artifacts go to the
# copy). Exits 0 if the time ran out without a finding, non-zero otherwise;
# on a finding the temporary directory is kept and the crashing input is
# printed in base64 so CI logs alone are enough to reproduce it.
set -u

if [ $# -ne 3 ]; then
    echo "usage: $0 FUZZER CORPUS SECONDS" >&2
    exit 2
fi
fuzzer=$1
corpus=$2
secs=$3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fuzz.XXXXXX") || exit 2
mkdir "$tmp/corpus" "$tmp/artifacts" || exit 2
if [ -d "$corpus" ]; then
    cp -R "$corpus"/. "$tmp/corpus/" || exit 2
fi

# UBSan findings must stop the run, not scroll by.
UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export UBSAN_OPTIONS

"$fuzzer" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$tmp/artifacts/" -print_final_stats=1 "$tmp/corpus"
rc=$?

found=$(find "$tmp/artifacts" -type f | head -n 1)
if [ $rc -eq 0 ] && [ -z "$found" ]; then
    rm -rf "$tmp"
    exit 0
fi

echo "run_bounded: fuzzer exited $rc; artifacts kept in $tmp/artifacts" >&2
for f in $(find "$tmp/artifacts" -type f); do
    echo "--- $f (base64)" >&2
    base64 "$f" >&2
done
[ $rc -ne 0 ] && exit $rc
exit 1
