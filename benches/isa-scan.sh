#!/usr/bin/env bash
# Benchmark: katlas-isa metadata scan (and scan with instruction mix) against the LLVM tool
# pipeline hipfire's atlas uses (clang-offload-bundler + llvm-readobj per object; serial
# llvm-objdump for the mix), on Debian's rocSPARSE and rocRAND libraries.
#
#   benches/isa-scan.sh [--peer-sample N] [--runs R]
#
# Needs scripts/fetch-fixtures to have run. Prints a markdown section for docs/PERF.md.
# The peer pipeline is measured on a deterministic sample of the bundles (every Nth record,
# default 10) because the full run takes tens of minutes; rates (kernels/s, MB/s) are compared.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${KATLAS_FIXTURES:-$ROOT/.cache/fixtures}"
SAMPLE=10
RUNS=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --peer-sample) SAMPLE=$2; shift 2;;
    --runs) RUNS=$2; shift 2;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target/bench}"
(cd "$ROOT" && cargo build -q --release -p katlas-isa --example scan && cargo build -q --release -p katlas)
SCAN="$CARGO_TARGET_DIR/release/examples/scan"
KATLAS="$CARGO_TARGET_DIR/release/katlas"
BUNDLER=$(command -v clang-offload-bundler-22 || echo /usr/lib/llvm-22/bin/clang-offload-bundler)
READOBJ=$(command -v llvm-readobj-22 || echo /usr/lib/llvm-22/bin/llvm-readobj)
OBJDUMP=$(command -v llvm-objdump-22 || echo /usr/lib/llvm-22/bin/llvm-objdump)
SPARSE="$CACHE/deb/bookworm/librocsparse0/usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
RAND5="$CACHE/deb/trixie/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
RAND6="$CACHE/deb/sid/librocrand1/usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
for f in "$SPARSE" "$RAND5" "$RAND6"; do [[ -f $f ]] || { echo "missing $f: run scripts/fetch-fixtures" >&2; exit 3; }; done
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

# --- katlas: whole libraries, metadata only ----------------------------------------------------
katlas_meta() { # prints "seconds kernels object_bytes objects user_cpu_s sys_cpu_s"
  python3 - "$SCAN" "$@" <<'PY'
import json, resource, subprocess, sys, time
t0 = time.monotonic(); out = subprocess.run(sys.argv[1:], check=True, capture_output=True, text=True).stdout
wall = time.monotonic() - t0; ru = resource.getrusage(resource.RUSAGE_CHILDREN)
s = json.loads(out); print(wall, s['kernels'], s['object_bytes'], s['objects'], ru.ru_utime, ru.ru_stime)
PY
}
katlas_cli() { # the whole command, writing the manifest file: prints "seconds user_cpu_s sys_cpu_s"
  python3 - "$KATLAS" isa scan --disasm never --no-cache --output "$WORK/manifest.json" "$@" <<'PY'
import resource, subprocess, sys, time
t0 = time.monotonic(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
wall = time.monotonic() - t0; ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, ru.ru_utime, ru.ru_stime)
PY
}
LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
declare -A KT KC
for lib in SPARSE RAND5 RAND6; do
  times=(); users=(); syss=(); ctimes=()
  for r in $(seq "$RUNS"); do
    read -r s k b o us sy < <(katlas_meta "${!lib}"); times+=("$s"); users+=("$us"); syss+=("$sy")
    read -r cs cu csy < <(katlas_cli "${!lib}"); ctimes+=("$cs")
  done
  KT[$lib]="$(printf '%s\n' "${times[@]}" | median) $k $b $o $(printf '%s\n' "${users[@]}" | median) $(printf '%s\n' "${syss[@]}" | median)"
  KC[$lib]="$(printf '%s\n' "${ctimes[@]}" | median) $(stat -c %s "$WORK/manifest.json")"
  rm -f "$WORK/manifest.json"
done

# --- peer: split .hip_fatbin records, clang-offload-bundler --list/--unbundle, llvm-readobj ----
split_records() { # $1 lib -> writes $WORK/rec.N files (every SAMPLE-th record), prints count total
  python3 - "$1" "$WORK" "$SAMPLE" <<'PY'
import sys, struct, mmap
path, work, every = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = open(path, 'rb'); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
shoff, = struct.unpack_from('<Q', m, 0x28); shnum, shstrndx = struct.unpack_from('<HH', m, 0x3c)
secs = [struct.unpack_from('<IIQQQQIIQQ', m, shoff + i*64) for i in range(shnum)]
stro = secs[shstrndx][4]
def name(o): return m[stro+o:m.find(b'\0', stro+o)].decode()
sec = next(s for s in secs if name(s[0]) == '.hip_fatbin'); base, size = sec[4], sec[5]
pos, n, kept, kept_bytes = base, 0, 0, 0
while True:
    a = m.find(b'__CLANG_OFFLOAD_BUNDLE__', pos, base+size); c = m.find(b'CCOB', pos, base+size)
    at = min(x for x in (a, c) if x >= 0) if max(a, c) >= 0 else -1
    if at < 0: break
    if m[at:at+4] == b'CCOB':
        ver, = struct.unpack_from('<H', m, at+4)
        ln = struct.unpack_from('<I', m, at+8)[0] if ver == 2 else struct.unpack_from('<Q', m, at+8)[0]
    else:
        cnt, = struct.unpack_from('<Q', m, at+24); p = at+32; ln = 0
        for _ in range(cnt):
            off, sz, tl = struct.unpack_from('<QQQ', m, p); p += 24 + tl; ln = max(ln, off+sz)
    if n % every == 0:
        open(f'{work}/rec.{n}', 'wb').write(m[at:at+ln]); kept += 1; kept_bytes += ln
    n += 1; pos = at + ln
print(n, kept, kept_bytes)
PY
}
peer_meta() { # runs the peer on $WORK/rec.*; prints "seconds kernels failures object_bytes"
  # object_bytes: the objects it unbundled (what katlas's MB/s counts too); a record whose
  # unbundle fails costs the peer its time but adds no bytes
  # fail_s: time spent in unbundles that failed (reported so the ratio can leave it out)
  local t0 t1 tf0 tf1 kernels=0 fails=0 obytes=0 fail_ns=0; t0=$(now)
  for rec in "$WORK"/rec.*; do
    for tgt in $("$BUNDLER" --list --type=o --input="$rec" 2>>"$WORK/peer.err" | grep -v '^host-' || true); do
      tf0=$(date +%s%N)
      if "$BUNDLER" --unbundle --type=o --targets="$tgt" --input="$rec" --output="$WORK/o.o" 2>>"$WORK/peer.err"; then
        kernels=$((kernels + $("$READOBJ" --notes "$WORK/o.o" | grep -c '^  - \.' || true)))
        obytes=$((obytes + $(stat -c %s "$WORK/o.o")))
      else
        tf1=$(date +%s%N); fail_ns=$((fail_ns + tf1 - tf0))
        fails=$((fails + 1))
      fi
    done
  done
  t1=$(now); echo "$(python3 -c "print($t1-$t0)") $kernels $fails $obytes $(python3 -c "print($fail_ns/1e9)")"
}
declare -A PT
for lib in SPARSE RAND5 RAND6; do
  rm -f "$WORK"/rec.*
  read -r total kept kept_bytes < <(split_records "${!lib}")
  # the peer's time varies by 2x between runs on this shared machine: median of RUNS runs
  ptimes=(); pfails=()
  for r in $(seq "$RUNS"); do
    read -r ps pk pf pb pfs < <(peer_meta); ptimes+=("$ps"); pfails+=("$pfs")
  done
  echo "peer $lib seconds: ${ptimes[*]} (of which failed unbundles: ${pfails[*]})" >&2
  [[ $pf == 0 ]] || echo "peer: $pf unbundle failures on $lib: $(sort -u "$WORK/peer.err" | head -3)" >&2
  PT[$lib]="$(printf '%s\n' "${ptimes[@]}" | median) $pk $pb $kept $total $pf $(printf '%s\n' "${pfails[@]}" | median)"
done

# --- with instruction mix: katlas --mix (native AMDGPU decoder, parallel) vs the serial
# bundler + readobj + llvm-objdump pipeline, on the same records (rocRAND: all; rocSPARSE: every
# MIX_SPARSE_EVERY-th record); both sides median of RUNS runs ---------------------------------
MIX_SPARSE_EVERY=${MIX_SPARSE_EVERY:-20}
mix_bench() { # $1 lib, $2 every-Nth record -> "katlas_s kernels peer_s peer_kernels records total"
  rm -f "$WORK"/rec.*; local total kept kept_bytes r t0 t1 out k pk; local -a kts=() pts=()
  read -r total kept kept_bytes < <(SAMPLE=$2 split_records "$1")
  for r in $(seq "$RUNS"); do
    t0=$(now); out=$("$SCAN" --mix "$WORK"/rec.*); t1=$(now); kts+=("$(python3 -c "print($t1-$t0)")")
  done
  k=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['kernels'])" "$out")
  for r in $(seq "$RUNS"); do
    pk=0; t0=$(now)
    for rec in "$WORK"/rec.*; do
      for tgt in $("$BUNDLER" --list --type=o --input="$rec" 2>/dev/null | grep -v '^host-' || true); do
        "$BUNDLER" --unbundle --type=o --targets="$tgt" --input="$rec" --output="$WORK/o.o" 2>/dev/null || continue
        pk=$((pk + $("$READOBJ" --notes "$WORK/o.o" | grep -c '^  - \.' || true)))
        "$OBJDUMP" -d --no-show-raw-insn "$WORK/o.o" >/dev/null
      done
    done
    t1=$(now); pts+=("$(python3 -c "print($t1-$t0)")")
  done
  echo "$(printf '%s\n' "${kts[@]}" | median) $k $(printf '%s\n' "${pts[@]}" | median) $pk $kept $total"
}
MIX5=$(mix_bench "$RAND5" 1)
MIX6=$(mix_bench "$RAND6" 1)
MIXS=$(mix_bench "$SPARSE" "$MIX_SPARSE_EVERY")

# --- report --------------------------------------------------------------------------------------
LOAD_START=$LOAD_START python3 - "$RUNS" "$SAMPLE" "${KT[SPARSE]}" "${KT[RAND5]}" "${KT[RAND6]}" "${PT[SPARSE]}" "${PT[RAND5]}" "${PT[RAND6]}" "$MIX5" "$MIX6" "$MIXS" "${KC[SPARSE]}" "${KC[RAND5]}" "${KC[RAND6]}" <<'PY'
import sys, platform, os, datetime, subprocess
runs, sample = sys.argv[1], sys.argv[2]
libs = ['rocSPARSE 5.3 (bookworm)', 'rocRAND 5.7.1 (trixie)', 'rocRAND 6.4.3 (sid)']
kt = [list(map(float, x.split())) for x in sys.argv[3:6]]
pt = [list(map(float, x.split())) for x in sys.argv[6:9]]
mixes = [list(map(float, x.split())) for x in sys.argv[9:12]]
kc = [list(map(float, x.split())) for x in sys.argv[12:15]]
cpu = next((l.split(':',1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name')), '?')
load = os.getloadavg()[0]
print(f"## katlas-isa scan ({datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC)\n")
print(f"Machine: {os.cpu_count()} cores ({cpu}), load average {float(os.environ.get('LOAD_START', 'nan')):.1f} before the katlas runs, "
      f"{load:.1f} at the end of the run (shared machine). "
      f"Command: `benches/isa-scan.sh --peer-sample {sample} --runs {runs}`. katlas numbers are the median of {runs} runs "
      f"(release build, `--disasm never`, all cores); the peer is clang-offload-bundler-22 `--list` + `--unbundle` per target + "
      f"llvm-readobj-22 `--notes` per object, run serially on every {sample}th `.hip_fatbin` record (median of {runs} runs), compared by rate.\n")
print("MB are code-object bytes on both sides (katlas: every object it read, after decompression; the peer: the objects it unbundled).\n")
print("| library | object MB | objects | kernels | katlas s | katlas CPU user/sys s | katlas kernels/s | katlas MB/s | peer sample (records, objects MB, failed unbundles) | peer s (in failed unbundles) | peer kernels/s | peer MB/s | ratio kernels/s | ratio MB/s | ratio kernels/s, peer's failed unbundles not counted |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for name, (ks, kk, kb, ko, ku, ksy), (ps, pk, pb, pkept, ptotal, pf, pfs) in zip(libs, kt, pt):
    kr, km = kk/ks, kb/1e6/ks
    pr, pm = (pk/ps if ps else 0), (pb/1e6/ps if ps else 0)
    pr_ok = pk/(ps - pfs) if ps > pfs else 0
    print(f"| {name} | {kb/1e6:.0f} | {ko:.0f} | {kk:.0f} | {ks:.3f} | {ku:.2f}/{ksy:.2f} | {kr:,.0f} | {km:,.0f} | {pkept:.0f}/{ptotal:.0f} rec, {pb/1e6:.0f} MB, {pf:.0f} failed | {ps:.2f} ({pfs:.2f}) | {pr:,.0f} | {pm:,.1f} | {kr/pr if pr else float('nan'):,.0f}x | {km/pm if pm else float('nan'):,.0f}x | {kr/pr_ok if pr_ok else float('nan'):,.0f}x |")
print("\nThe whole command, `katlas isa scan --disasm never --no-cache --output FILE` (writes the compact JSON manifest), "
      f"median of {runs} runs, against the same peer rates:\n")
print("| library | katlas s | manifest MB | katlas kernels/s | ratio kernels/s | ratio MB/s | ratio kernels/s, peer's failed unbundles not counted |")
print("|---|---|---|---|---|---|---|")
for name, (cs, cbytes), (ks, kk, kb, ko, ku, ksy), (ps, pk, pb, pkept, ptotal, pf, pfs) in zip(libs, kc, kt, pt):
    pr, pm = (pk/ps if ps else 0), (pb/1e6/ps if ps else 0)
    pr_ok = pk/(ps - pfs) if ps > pfs else 0
    print(f"| {name} | {cs:.3f} | {cbytes/1e6:.0f} | {kk/cs:,.0f} | {kk/cs/pr if pr else float('nan'):,.0f}x | {kb/1e6/cs/pm if pm else float('nan'):,.0f}x | {kk/cs/pr_ok if pr_ok else float('nan'):,.0f}x |")
print("\nWith instruction mix: katlas `--mix` (native AMDGPU decoder, parallel, per kernel) vs serial clang-offload-bundler + "
      f"llvm-readobj + llvm-objdump per object on the same `.hip_fatbin` records, both medians of {runs} runs "
      "(peer kernels: `llvm-readobj --notes`; it may unbundle fewer objects than katlas reads).\n")
print("| library | records | katlas kernels | katlas s | katlas kernels/s | peer kernels | peer s | peer kernels/s | ratio (kernels/s) |")
print("|---|---|---|---|---|---|---|---|---|")
for name, (ks, kk, ps, pk, kept, total) in zip(['rocRAND 5.7.1 (trixie)', 'rocRAND 6.4.3 (sid)', 'rocSPARSE 5.3 (bookworm)'], mixes):
    kr, pr = kk/ks, (pk/ps if ps else 0)
    print(f"| {name} | {kept:.0f}/{total:.0f} | {kk:.0f} | {ks:.2f} | {kr:,.0f} | {pk:.0f} | {ps:.2f} | {pr:,.0f} | **{kr/pr if pr else float('nan'):,.1f}x** |")
print()
PY
