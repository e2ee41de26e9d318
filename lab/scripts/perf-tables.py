"""Markdown tables for docs/PERF.md from one H200 session's lab.txt and peers.json.

usage: python3 lab/scripts/perf-tables.py RESULTS_DIR   (holding lab.txt and peers.json)
lab.txt holds `== <tag>:` section headers and KATLAS_METRIC lines (lab/scripts/h200-run.sh).
"""
import json, re, sys

d = sys.argv[1]
rows, sec = {}, None
for line in open(f"{d}/lab.txt"):
    if line.startswith("== "):
        m = re.match(r"== (\w+):", line)
        sec = m.group(1) if m else sec
    elif line.startswith("KATLAS_METRIC"):
        p = line.split()
        rows.setdefault(sec, []).append((p[1], dict(kv.split("=", 1) for kv in p[2:] if "=" in kv)))
peers = json.load(open(f"{d}/peers.json"))
P = {(c["peer"], c["shape"]): c for c in peers["cases"] if "error" not in c}
SHAPES = ["4096x4096", "14336x4096", "4096x14336", "8192x8192", "28672x8192"]
HDR = "| N x K | r1 baseline us (% copy) | best variant: median us | GB/s | % of copy | {peer} us | ours vs {peer} | check (max rel) |\n|---|---|---|---|---|---|---|---|"


def best_table(fam, sec, peer, pkey, pname):
    print(HDR.format(peer=pname))
    for sh in SHAPES:
        cand = [r for f, r in rows.get(sec, []) if f == fam and r["shape"] == sh]
        if not cand:
            continue
        best = min(cand, key=lambda r: float(r["median_us"]))
        b = next((r for r in cand if r["variant"] == "r1"), None)
        pus = P[(peer, sh)][pkey]
        print(f"| {sh} | {b['median_us']} ({float(b['copy_pct']):.1f}%) | **{best['variant']}**: {best['median_us']} | "
              f"{float(best['achieved_gbps']):.0f} | **{float(best['copy_pct']):.1f}%** | {pus:.2f} | "
              f"{pus / float(best['median_us']):.2f}x | {best['check']} {float(best['max_rel']):.1e} |")
    print()


print("#### 4-bit GEMV, one launch per event pair (the table's default protocol)")
best_table("gemv_hfq4g256", "all", "int4pack_mm_g128", "median_us", "torch int4")
print("#### 4-bit GEMV, 20 launches per event pair (`--batch 20`); torch timed the same way")
best_table("gemv_hfq4g256", "batch20", "int4pack_mm_g128", "batch20_us", "torch int4")
print("#### bf16 GEMV vs cuBLAS (`torch.nn.functional.linear`), one launch per event pair")
best_table("gemv_bf16", "all", "bf16_linear", "median_us", "cuBLAS")
print("#### Every 4-bit variant (one launch per event pair)")
print("| variant | " + " | ".join(SHAPES) + " |\n|---|" + "---|" * len(SHAPES))
vs = {}
for f, r in rows["all"]:
    if f == "gemv_hfq4g256":
        vs.setdefault(r["variant"], {})[r["shape"]] = r
for v, m in vs.items():
    cells = [f"{m[s]['median_us']} us ({float(m[s]['copy_pct']):.0f}%)" if s in m else "-" for s in SHAPES]
    print(f"| {v} | " + " | ".join(cells) + " |")
print()
print("#### Other families (one launch per event pair)")
print("| kernel | variant | shape | median us | GB/s | % copy | check (max rel) |\n|---|---|---|---|---|---|---|")
for f, r in rows["all"]:
    if f in ("gemv_hfq4g256_res", "swiglu_hfq4g256", "rmsnorm", "rope", "attn_decode"):
        print(f"| {f} | {r['variant']} | {r['shape']} | {r['median_us']} | {float(r['achieved_gbps']):.0f} | {float(r['copy_pct']):.1f} | {r['check']} {float(r['max_rel']):.1e} |")
print()
if "flush" in rows:
    print("#### L2 flushed before every sample (`--l2-flush`), 50 samples")
    print("| variant | shape | median us | % copy |\n|---|---|---|---|")
    for f, r in rows["flush"]:
        print(f"| {r['variant']} | {r['shape']} | {r['median_us']} | {float(r['copy_pct']):.1f} |")
