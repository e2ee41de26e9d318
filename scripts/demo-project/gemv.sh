#!/bin/sh
# The demo project's decode GEMV: the katlas lab's 4-bit GEMV (gemv_hfq4g256) on the CPU, in
# the variant this project dispatches. scripts/demo collects it (workloads/lab-decode.toml), and the
# task katlas writes for the multi-row lever allows this file: applying the lever here is
# choosing `r4` (four output rows per pass over the activations, one thread) over `scalar`
# (one row per pass). `katlas-lab list` shows every variant.
VARIANT=scalar
exec "${KATLAS_LAB:?the katlas-lab binary (workloads/lab-decode.toml sets it from its lab param)}" \
  --backend cpu --kernel 'gemv_hfq4g256$' --variant "$VARIANT" "$@"
