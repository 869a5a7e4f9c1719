#!/bin/sh
# tests/compat/run.sh - runs Redis 7.0.15's own test files (unmodified, from
# ../shared/redis-tests-7.0.15 when present) against a fresh keel node and a
# fresh redis-server, one server per file, and prints the [ok] counts side
# by side. Not part of `make test`: `make compat` (FILES="unit/keyspace ...").
#
#   tests/compat/run.sh [KEEL_BINARY]   env: SUITE, FILES, PORT, OUT, ONLY=keel|redis, TAGS,
#   BASEPORT (the suite's --baseport; its own client port is 32 below: set it
#   apart when several runs share the machine)
set -u
KEEL=${1:-build/keel}
SUITE=${SUITE:-../shared/redis-tests-7.0.15}
# Default: every file issue 13 measures keel by.
FILES=${FILES:-"unit/type/string unit/type/incr unit/type/hash unit/type/set unit/type/zset unit/type/list unit/type/list-2 unit/type/list-3 unit/expire unit/keyspace unit/scan unit/multi unit/protocol unit/info-command unit/introspection unit/introspection-2 unit/other unit/quit unit/scripting"}
PORT=${PORT:-27100}
OUT=${OUT:-/tmp/keel-compat.$$}
ONLY=${ONLY:-}
TAGS=${TAGS:-"-slow -needs:debug -needs:repl -needs:save -needs:config-maxmemory -needs:config-resetstat -needs:reset -needs:pfdebug"}
if [ ! -d "$SUITE" ]; then
    echo "compat: $SUITE not found; skipping" >&2
    exit 0
fi
mkdir -p "$OUT"
rm -rf "$OUT/suite" && cp -r "$SUITE" "$OUT/suite" || exit 1
KEEL=$(cd "$(dirname "$KEEL")" && pwd)/$(basename "$KEEL")

wait_port() {
    i=0
    while ! redis-cli -p "$1" ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 100 ] && return 1
        sleep 0.1
    done
}

run_one() { # server file -> count
    srv=$1 f=$2 log="$OUT/$1-$(echo "$2" | tr / _).log"
    dir="$OUT/data-$srv-$(echo "$f" | tr / _)"
    rm -rf "$dir" && mkdir -p "$dir"
    if [ "$srv" = keel ]; then
        "$KEEL" node --port "$PORT" --dir "$dir" --own all --fsync no >"$dir/node.log" 2>&1 &
    else
        redis-server --port "$PORT" --save "" --appendonly no --enable-debug-command yes \
            --dir "$dir" >"$dir/redis.log" 2>&1 &
    fi
    pid=$!
    if wait_port "$PORT"; then
        (cd "$OUT/suite" && timeout 900 ./runtest --host 127.0.0.1 --port "$PORT" --cluster-mode \
            --tags "$TAGS" --ignore-encoding --ignore-digest --durable --timeout 60 \
            ${BASEPORT:+--baseport "$BASEPORT"} --single "$f") >"$log" 2>&1
    else
        echo "server did not start" >"$log"
    fi
    kill "$pid" 2>/dev/null
    # a test that fails while a script loops leaves the server busy (redis
    # too defers SIGTERM until the script ends): give it 10 s, then KILL
    (sleep 10 && kill -9 "$pid") >/dev/null 2>&1 &
    killer=$!
    wait "$pid" 2>/dev/null
    kill "$killer" 2>/dev/null
    sed 's/\x1b\[[0-9;]*m//g' "$log" >"$log.txt"
    ok=$(grep -c '^\[ok\]' "$log.txt")
    bad=$(grep -c '^\[err\]\|^\[exception\]' "$log.txt")
    echo "$ok $bad"
}

printf '%-20s %12s %12s\n' file keel redis-server
for f in $FILES; do
    k="- -" r="- -"
    [ "$ONLY" != redis ] && k=$(run_one keel "$f")
    [ "$ONLY" != keel ] && r=$(run_one redis "$f")
    printf '%-20s %12s %12s\n' "$f" "$(echo $k | cut -d' ' -f1)" "$(echo $r | cut -d' ' -f1)"
done
echo "logs (ANSI-stripped .txt next to each): $OUT"
