#!/usr/bin/env bash
# Team-store benchmark (results: docs/PERF.md, "Team store").
#
# Starts a throwaway PostgreSQL cluster (Debian's postgresql package, default durability
# settings) on a unix socket under .cache/bench/pg, runs the release build of
# crates/katlas-store/examples/bench_team.rs against it (ROWS rows in HOSTS projects:
# index rebuild as the peer, push alone and concurrent, re-push, pull, kernel_stats on both),
# and stops the cluster.
#
# Usage: benches/store.sh [ROWS [HOSTS]]   (default: 16000 16)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/.cache/bench"
cd "$ROOT"
BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x "$BIN/initdb" ]] || { echo "no PostgreSQL server under /usr/lib/postgresql: apt-get install postgresql" >&2; exit 3; }
cargo build --release -q -p katlas-store --example bench_team
PG="$OUT/pg"
rm -rf "$PG"; mkdir -p "$PG"
as=()
if [[ $(id -u) == 0 ]]; then chown postgres "$PG"; as=(runuser -u postgres --); fi
"${as[@]}" "$BIN/initdb" -D "$PG/data" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
"${as[@]}" "$BIN/pg_ctl" -D "$PG/data" -o "-k $PG -c listen_addresses=''" -l "$PG/server.log" -w start >/dev/null
trap '"${as[@]}" "$BIN/pg_ctl" -D "$PG/data" -m fast -w stop >/dev/null; rm -rf "$PG" "$OUT/store"' EXIT
"$ROOT/target/release/examples/bench_team" "postgres://postgres@/postgres?host=$PG" "${1:-16000}" "${2:-16}" "$OUT/store"
