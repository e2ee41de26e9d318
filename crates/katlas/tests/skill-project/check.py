"""Correctness: bench.py's GEMV with kernels/gemv.cu's ROWS_PER_BLOCK against one row at a time."""

import sys

# Bytecode beside bench.py would be a file the candidate changed outside the task's allowed files.
sys.dont_write_bytecode = True

import bench  # noqa: E402

a, x = bench.weights()
got = bench.gemv(a, x, bench.rows_per_block())
want = [sum(w * v for w, v in zip(row, x)) for row in a]
bad = [r for r, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-9 * max(1.0, abs(w))]
if bad:
    print(f"FAIL: {len(bad)} of {len(want)} rows differ, first row {bad[0]}")
    sys.exit(1)
print(f"PASS: {len(want)} rows")
