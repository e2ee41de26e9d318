#!/usr/bin/env python3
"""Compares a katlas.isa.v1 manifest with `cuobjdump -res-usage` of the same file, function by
function: the arch of each cubin with its a/f suffix, and REG, STACK, SHARED, LOCAL.
usage: res-usage-compare.py MANIFEST.json CUOBJDUMP_RES_USAGE.txt  -> one JSON line on stdout"""
import collections, json, sys

def blocks(path):
    out, arch, cur, fn = [], None, None, None
    for line in open(path, errors="replace"):
        t = line.strip()
        if t.startswith("arch = "):
            arch = t[7:]
        elif t == "Resource usage:":
            if cur is not None:
                out.append(cur)
            cur, arch = {"arch": arch, "f": {}}, None
        elif t.startswith("Function ") and t.endswith(":"):
            fn = t[9:-1]
        elif t.startswith("REG:") and fn is not None and cur is not None:
            cur["f"][fn] = {k: int(v) for k, v in (kv.split(":", 1) for kv in t.split()) if v.isdigit()}
            fn = None
    if cur is not None:
        out.append(cur)
    return out

m = json.load(open(sys.argv[1]))
cub = [o for o in m["objects"] if o["format"] == "cubin"]
theirs = blocks(sys.argv[2])
bad, examples, n, src = collections.Counter(), [], 0, collections.Counter()
if len(cub) != len(theirs):
    bad["cubin_count"] += 1
    examples.append(f"{len(cub)} cubins in katlas, {len(theirs)} resource blocks in cuobjdump")
for o, b in zip(cub, theirs):
    if b["arch"] is not None and b["arch"] != o["arch"]:
        bad["arch"] += 1
        if len(examples) < 20:
            examples.append(f"{o['chain_text']}: arch katlas {o['arch']} cuobjdump {b['arch']}")
    for k in o["kernels"]:
        nv = k["nvidia"]
        t = b["f"].get(k["name"])
        if t is None:
            bad["missing"] += 1
            continue
        n += 1
        src[nv.get("regcount_source") or "none"] += 1
        ours = {"REG": nv.get("regcount") or 0, "STACK": nv.get("min_stack_size") or nv.get("max_stack_size") or 0,
                "SHARED": nv["shared_static_bytes"], "LOCAL": nv["local_bytes"]}
        for key, v in ours.items():
            if t.get(key) != v:
                bad[key] += 1
                if len(examples) < 20:
                    examples.append(f"{o['chain_text']} {k['name']}: {key} katlas {v} cuobjdump {t.get(key)}")
listed = sum(len(b["f"]) for b in theirs)
print(json.dumps({"functions_compared": n, "functions_in_cuobjdump": listed, "mismatches": dict(bad),
                  "regcount_source": dict(src), "suffix_f_cubins": sum(o["arch"].endswith("f") for o in cub),
                  "examples": examples}))
