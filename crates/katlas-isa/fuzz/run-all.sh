#!/usr/bin/env bash
# Runs every cargo-fuzz target of katlas-isa for N seconds each (default 90), one after the
# other, after seeding each corpus from the committed fixtures in ../tests/fixtures/.
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`) and python3 (to cut the MessagePack
# metadata note out of the AMD code object). The toolchain is stable (rust-toolchain.toml), so
# RUSTC_BOOTSTRAP=1 unlocks the nightly flags cargo-fuzz passes to rustc.
# Usage: crates/katlas-isa/fuzz/run-all.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-90}"
shift || true
fx=../tests/fixtures
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(scan_any offload_bundle ccob amdgpu_elf fatbin cubin msgpack)
export RUSTC_BOOTSTRAP=1

# Copies FILE into corpus/TARGET, dropping the first SKIP bytes (the magic the target prepends).
seed() {
    local target=$1 file=$2 skip=${3:-0}
    mkdir -p "corpus/$target"
    tail -c +$((skip + 1)) "$fx/$file" > "corpus/$target/seed-$file"
}
seed_all() {
    for f in kernels.ccob kernels.zlib.ccob kernels.fatbin kernels.gfx1201.hsaco kernels.hipfb \
             kernels.host.o kernels.sm_80.cubin kernels.sm_90.cubin kernels.sm_90a.cubin; do
        seed scan_any "$f"
    done
    seed offload_bundle kernels.hipfb 24          # __CLANG_OFFLOAD_BUNDLE__
    seed ccob kernels.ccob 4                      # CCOB
    seed ccob kernels.zlib.ccob 4
    seed amdgpu_elf kernels.gfx1201.hsaco
    seed fatbin kernels.fatbin 4                  # 0xBA55ED50
    for f in kernels.sm_80.cubin kernels.sm_90.cubin kernels.sm_90a.cubin; do seed cubin "$f"; done
    mkdir -p corpus/msgpack
    python3 - "$fx/kernels.gfx1201.hsaco" corpus/msgpack/seed-metadata.msgpack <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
shoff, = struct.unpack_from("<Q", d, 0x28)
shentsize, shnum = struct.unpack_from("<HH", d, 0x3A)
for i in range(shnum):
    _, typ, _, _, off, size = struct.unpack_from("<IIQQQQ", d, shoff + i * shentsize)
    if typ != 7:  # SHT_NOTE
        continue
    p = off
    while p + 12 <= off + size:
        nsz, dsz, nt = struct.unpack_from("<III", d, p)
        desc = p + 12 + ((nsz + 3) & ~3)
        if nt == 32:  # NT_AMDGPU_METADATA
            open(sys.argv[2], "wb").write(d[desc:desc + dsz])
            sys.exit(0)
        p = desc + ((dsz + 3) & ~3)
sys.exit("no NT_AMDGPU_METADATA note in " + sys.argv[1])
PY
}

seed_all
status=0
for t in "${targets[@]}"; do
    echo "=== $t (${secs}s)"
    if ! cargo fuzz run "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1; then
        echo "=== $t FAILED (see artifacts/$t/)"
        status=1
    fi
done
exit $status
