# katlas's reader of Nsight Compute reports (.ncu-rep), run by `katlas parse ncu-rep` as a
# helper process: the format is NVIDIA's own and only NVIDIA's `ncu_report` module reads it.
# argv: REPORT MAX_LAUNCHES TOP_LINES [DIR ...]  (DIRs: where else `ncu_report` may live)
# stdout: one JSON object per launch; {"truncated": N} when MAX_LAUNCHES stopped the reading.
# Exit 3 with "NO_READER ..." on stderr when no `ncu_report` can be imported.
import glob
import json
import math
import os
import shutil
import sys

DROP = ("device__attribute", "nvlink__", "numa__", "c2clink__", "profiler__")
STALL = "smsp__pcsamp_warps_issue_stalled_"


def import_reader(extra):
    try:
        import ncu_report

        return ncu_report
    except ImportError:
        pass
    dirs = list(extra)
    ncu = shutil.which("ncu")
    if ncu:
        dirs.append(os.path.join(os.path.dirname(os.path.realpath(ncu)), "extras", "python"))
    dirs += sorted(glob.glob("/opt/nvidia/nsight-compute*/extras/python"), reverse=True)
    dirs += sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python"), reverse=True)
    for d in dirs:
        if os.path.isfile(os.path.join(d, "ncu_report.py")) or os.path.isdir(os.path.join(d, "ncu_report")):
            sys.path.insert(0, d)
            try:
                import ncu_report

                return ncu_report
            except ImportError as e:
                print(f"ncu_report in {d} does not load: {e}", file=sys.stderr)
                sys.path.pop(0)
    print("NO_READER no `ncu_report` module: looked on sys.path and in " + (", ".join(dirs) or "no Nsight Compute install"), file=sys.stderr)
    sys.exit(3)


def number(v):
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        v = float(v)
        return v if math.isfinite(v) else None
    return None


def source_lines(n, a, top):
    """Per source line: instructions executed and PC samples (with the stall reasons), summed
    over the line's SASS addresses, the top lines and the totals over all lines; nothing when
    the report has no source counters."""
    per_pc = {}

    def add(name, key):
        m = a.metric_by_name(name)
        if m is None or not m.has_correlation_ids():
            return False
        ids = m.correlation_ids()
        for i in range(m.num_instances()):
            v = number(m.value(i))
            if v:
                pc = ids.as_uint64(i)
                d = per_pc.setdefault(pc, {})
                d[key] = d.get(key, 0) + v
        return True

    have = add("inst_executed", "inst_executed")
    have = add("smsp__pcsamp_sample_count", "samples") or have
    if not have:
        return [], None
    for name in a.metric_names():
        if name.startswith(STALL) and not name.endswith("_not_issued"):
            add(name, "stall:" + name[len(STALL):])
    lines = {}
    for pc, d in per_pc.items():
        si = a.source_info(pc)
        key = (si.file_name(), si.line()) if si is not None else ("", 0)
        acc = lines.setdefault(key, {})
        for k, v in d.items():
            acc[k] = acc.get(k, 0) + v
    out = []
    for (f, line), d in lines.items():
        stalls = {k[6:]: v for k, v in d.items() if k.startswith("stall:") and k != "stall:selected"}
        out.append({"file": f, "line": line, "inst_executed": d.get("inst_executed", 0), "samples": d.get("samples", 0),
                    "stalls": dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:3])})
    out.sort(key=lambda r: (-r["samples"], -r["inst_executed"], r["file"], r["line"]))
    totals = {k: sum(r[k] for r in out) for k in ("inst_executed", "samples")}
    return out[:top], totals


def main():
    path, limit, top, extra = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    n = import_reader(extra)
    ctx = n.load_report(path)
    if ctx is None:
        print(f"{path}: the reader could not load it as a report", file=sys.stderr)
        sys.exit(2)
    seen = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            if seen >= limit:
                print(json.dumps({"truncated": limit}))
                return
            seen += 1
            a = rng.action_by_idx(ai)
            metrics, strings = {}, {}
            for name in a.metric_names():
                m = a.metric_by_name(name)
                if m is None or not m.has_value():
                    continue
                if name == "device__attribute_display_name" or name.startswith(("device__attribute_compute_capability", "launch__block_dim", "launch__grid_dim")):
                    pass
                elif name.startswith(DROP) or "__" not in name:
                    continue
                v = m.value()
                x = number(v)
                if x is not None:
                    metrics[name] = [x, m.unit()]
                elif isinstance(v, str) and name == "device__attribute_display_name":
                    strings[name] = v
            lines, totals = source_lines(n, a, top)
            rec = {"range": ri, "id": ai, "name": a.name(), "mangled": a.name(n.IAction.NameBase_MANGLED),
                   "metrics": metrics, "strings": strings, "source": lines, "source_totals": totals}
            print(json.dumps(rec))


if __name__ == "__main__":
    main()
