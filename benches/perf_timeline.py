# perf script -F tid,time,sym on stdin -> per 20 ms slice: threads with samples, samples, top symbols
# (benches/nvidia-scan-scaling.sh: a slice with one thread is time that did not run in parallel)
import sys, collections
rows = []
for l in sys.stdin:
    p = l.split(None, 2)
    if len(p) < 2: continue
    try: tid = int(p[0]); t = float(p[1].rstrip(':'))
    except ValueError: continue
    rows.append((t, tid, p[2].strip() if len(p) > 2 else ''))
if not rows: sys.exit()
t0 = rows[0][0]
th = collections.defaultdict(set); n = collections.Counter(); sy = collections.defaultdict(collections.Counter)
for t, tid, s in rows:
    k = int((t - t0) / 0.02); th[k].add(tid); n[k] += 1; sy[k][s[:50]] += 1
for k in sorted(th):
    print(f"{k*0.02:5.2f}s threads={len(th[k]):2d} samples={n[k]:4d}", sy[k].most_common(3))
