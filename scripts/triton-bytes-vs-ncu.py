#!/usr/bin/env python3
"""katlas's counter-free bytes of the hot Triton kernels against ncu's DRAM bytes.

Usage: scripts/triton-bytes-vs-ncu.py RUN_DIR [RUN_DIR ...] [--top N] [--katlas PATH]

A RUN_DIR holds one program's full torch.profiler trace (trace.json.gz), katlas's Triton launch
records (launches.jsonl or triton-launches.jsonl), optionally triton-cache/, and the ncu
`--csv --page raw` rows of the same program (ncu.csv). The same program launches the same kernel
sequence, so the trace's kernel events (in time order) and ncu's rows are zipped one to one; a
name that differs at a position stops the zip there. Per hot Triton kernel (top N by trace time)
it prints katlas's per-call bytes (`katlas parse torch-trace --format json`), their source, the
mean ncu DRAM bytes (read + write) of the zipped launches, and the ratio.
"""
import csv
import gzip
import io
import json
import os
import subprocess
import sys

UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def base(name):
    """The function's own name: ncu and CUPTI spell C++ templates and namespaces differently."""
    n = name.removeprefix("void ").split("(")[0].split("<")[0]
    return n.split("::")[-1].strip()


def ncu_rows(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID",')
    rows = list(csv.reader(io.StringIO(text[start:])))
    head, units = rows[0], rows[1]
    col = {n: i for i, n in enumerate(head)}
    out = []
    for r in rows[2:]:
        if len(r) != len(head):
            continue
        b = 0.0
        for m in ("dram__bytes_read.sum", "dram__bytes_write.sum"):
            v = r[col[m]].replace(",", "")
            b += float(v) * UNITS.get(units[col[m]], 1)
        out.append((r[col["Kernel Name"]], b))
    return out


def trace_kernels(path):
    ev = json.load(gzip.open(path))["traceEvents"]
    ks = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    return [e["name"] for e in ks]


def katlas_parse(katlas, run):
    launches = next((os.path.join(run, n) for n in ("triton-launches.jsonl", "launches.jsonl") if os.path.isfile(os.path.join(run, n))), None)
    cmd = [katlas, "parse", "torch-trace", os.path.join(run, "trace.json.gz"), "--format", "json"]
    if launches:
        cmd += ["--triton-launches", launches]
    if os.path.isdir(os.path.join(run, "triton-cache")):
        cmd += ["--triton-cache", os.path.join(run, "triton-cache")]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    ks = [k for p in out["phases"] for k in p["kernels"]]
    return ks


def main():
    args = sys.argv[1:]
    top, katlas = 8, os.environ.get("KATLAS", "target/debug/katlas")
    if "--top" in args:
        i = args.index("--top")
        top = int(args[i + 1])
        del args[i : i + 2]
    if "--katlas" in args:
        i = args.index("--katlas")
        katlas = args[i + 1]
        del args[i : i + 2]
    within = total = 0
    for run in args:
        names = trace_kernels(os.path.join(run, "trace.json.gz"))
        ncu = ncu_rows(os.path.join(run, "ncu.csv"))
        sums = {}
        for n, (m, b) in zip(names, ncu):
            if base(n) != base(m):
                print(f"{run}: the trace and ncu differ at a launch ({n} vs {m}): zipped up to there", file=sys.stderr)
                break
            s = sums.setdefault(n, [0, 0.0])
            s[0] += 1
            s[1] += b
        ks = [k for k in katlas_parse(katlas, run) if "triton" in k.get("extra", {})]
        ks.sort(key=lambda k: -k["total_us"])
        print(f"\n{os.path.basename(run.rstrip('/'))} ({len(names)} trace kernels, {len(ncu)} ncu rows)")
        print(f"| kernel | time us | katlas bytes/call | source | ncu DRAM bytes/call | ratio |")
        print(f"|---|---:|---:|---|---:|---:|")
        for k in ks[:top]:
            n = k["name"]
            est, src = k.get("bytes"), k.get("extra", {}).get("bytes_source", k.get("extra", {}).get("bytes_note", "-"))
            got = sums.get(n)
            dram = got[1] / got[0] if got and got[0] else None
            ratio = est / dram if est and dram else None
            if ratio is not None:
                total += 1
                within += abs(ratio - 1) <= 0.15
            fmt = lambda x: f"{x / 1e6:.3f} MB" if x else "-"
            print(f"| {n[:48]} | {k['total_us']:.1f} | {fmt(est)} | {src} | {fmt(dram)} | {f'{ratio:.2f}' if ratio else '-'} |")
    if total:
        print(f"\nwithin 15% of ncu: {within} of {total} ({100 * within / total:.0f}%)")


if __name__ == "__main__":
    main()
