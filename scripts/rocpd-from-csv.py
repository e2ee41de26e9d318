#!/usr/bin/env python3
"""Write a rocpd database (rocprofv3's SQLite output, schema version 3) from a rocprofv3 CSV run.

katlas has no rocpd database from a real run that its tests can fetch, so the tests build
one from the real MI300A CSV trace in fixtures/ with this script. The tables follow
rocprofiler-sdk's documented schema (`rocpd_tables.sql`): every table is suffixed with the
process's UUID (`_` for `-`), the unsuffixed names are views over them, and the columns,
keys and JSON `extdata` are filled as rocprofv3's writer fills them. A database made here
tests the format and katlas's reading of it, not rocprofv3's own numbers (format-only).

Usage: rocpd-from-csv.py CSV_DIR OUT.db [--prefix P] [--pid N] [--shift-ns N]

CSV_DIR holds one rocprofv3 run: P*kernel_trace.csv and P*agent_info.csv, optionally
P*counter_collection.csv (joined on Dispatch_Id when both files have it, else on
Correlation_Id) and P*marker_api_trace.csv (roctx ranges: Function is the range's message).
--pid names the process (default 4242), --shift-ns moves every timestamp.
"""
import argparse
import csv
import glob
import json
import os
import re
import sqlite3
import sys

# (table, columns) of rocpd_tables.sql, schema version 3; `{s}` is the table suffix.
TABLES = [
    ("rocpd_metadata", '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "tag" TEXT NOT NULL, "value" TEXT NOT NULL'),
    ("rocpd_string", '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "string" TEXT NOT NULL UNIQUE'),
    (
        "rocpd_info_node",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "hash" BIGINT NOT NULL UNIQUE, "machine_id" TEXT NOT NULL UNIQUE, '
        '"system_name" TEXT, "hostname" TEXT, "release" TEXT, "version" TEXT, "hardware_name" TEXT, "domain_name" TEXT',
    ),
    (
        "rocpd_info_process",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, '
        '"init" BIGINT, "fini" BIGINT, "start" BIGINT, "end" BIGINT, "command" TEXT, "environment" JSONB NOT NULL DEFAULT \'{}\', '
        '"extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    (
        "rocpd_info_thread",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, '
        '"tid" INTEGER NOT NULL, "name" TEXT, "start" BIGINT, "end" BIGINT, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    (
        "rocpd_info_agent",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, '
        '"type" TEXT CHECK ("type" IN (\'CPU\', \'GPU\')), "absolute_index" INTEGER, "logical_index" INTEGER, "type_index" INTEGER, '
        '"uuid" INTEGER, "name" TEXT, "model_name" TEXT, "vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT, '
        '"extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    ("rocpd_info_queue", '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB NOT NULL DEFAULT \'{}\''),
    ("rocpd_info_stream", '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB NOT NULL DEFAULT \'{}\''),
    (
        "rocpd_info_pmc",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER, '
        '"target_arch" TEXT, "event_code" INT, "instance_id" INTEGER, "name" TEXT NOT NULL, "symbol" TEXT NOT NULL, "description" TEXT, '
        '"long_description" TEXT DEFAULT \'\', "component" TEXT, "units" TEXT DEFAULT \'\', "value_type" TEXT, "block" TEXT, "expression" TEXT, '
        '"is_constant" INTEGER, "is_derived" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    (
        "rocpd_info_code_object",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER, '
        '"uri" TEXT, "load_base" BIGINT, "load_size" BIGINT, "load_delta" BIGINT, "storage_type" TEXT, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    (
        "rocpd_info_kernel_symbol",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, '
        '"code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER, "kernarg_segment_size" INTEGER, '
        '"kernarg_segment_alignment" INTEGER, "group_segment_size" INTEGER, "private_segment_size" INTEGER, "sgpr_count" INTEGER, '
        '"arch_vgpr_count" INTEGER, "accum_vgpr_count" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    ("rocpd_track", '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER, "tid" INTEGER, "name_id" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\''),
    (
        "rocpd_event",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "category_id" INTEGER, "stack_id" INTEGER, "parent_stack_id" INTEGER, '
        '"correlation_id" INTEGER, "call_stack" JSONB NOT NULL DEFAULT \'{}\', "line_info" JSONB NOT NULL DEFAULT \'{}\', "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    (
        "rocpd_arg",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "event_id" INTEGER NOT NULL, "position" INTEGER NOT NULL, "type" TEXT NOT NULL, '
        '"name" TEXT NOT NULL, "value" TEXT, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    ("rocpd_pmc_event", '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "event_id" INTEGER, "pmc_id" INTEGER NOT NULL, "value" REAL DEFAULT 0.0, "extdata" JSONB DEFAULT \'{}\''),
    (
        "rocpd_region",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL, '
        '"start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "event_id" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    ("rocpd_sample", '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "track_id" INTEGER NOT NULL, "timestamp" BIGINT NOT NULL, "event_id" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\''),
    (
        "rocpd_kernel_dispatch",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, '
        '"agent_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL, "queue_id" INTEGER NOT NULL, '
        '"stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "private_segment_size" INTEGER, "group_segment_size" INTEGER, '
        '"workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL, "workgroup_size_z" INTEGER NOT NULL, '
        '"grid_size_x" INTEGER NOT NULL, "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER, '
        '"event_id" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    (
        "rocpd_memory_copy",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, '
        '"start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "dst_agent_id" INTEGER, "dst_address" INTEGER, '
        '"src_agent_id" INTEGER, "src_address" INTEGER, "size" INTEGER NOT NULL, "queue_id" INTEGER, "stream_id" INTEGER, '
        '"region_name_id" INTEGER, "event_id" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
    (
        "rocpd_memory_allocate",
        '"id" INTEGER PRIMARY KEY AUTOINCREMENT, "guid" TEXT NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, '
        '"agent_id" INTEGER, "type" TEXT, "level" TEXT, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "address" INTEGER, "size" INTEGER NOT NULL, '
        '"queue_id" INTEGER, "stream_id" INTEGER, "event_id" INTEGER, "extdata" JSONB NOT NULL DEFAULT \'{}\'',
    ),
]


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def one(dir_, prefix, name, required=True):
    hits = sorted(glob.glob(os.path.join(dir_, f"{prefix}*{name}")))
    if not hits:
        if required:
            sys.exit(f"rocpd-from-csv: no {prefix}*{name} in {dir_}")
        return None
    if len(hits) > 1:
        sys.exit(f"rocpd-from-csv: several runs in {dir_} ({', '.join(hits)}): pick one with --prefix")
    return hits[0]


def col(r, *names):
    for n in names:
        v = r.get(n)
        if v not in (None, ""):
            return v
    return None


def num(v):
    """A CSV number; the ROCm 7 CSV writes agents as `Agent 4`."""
    if v is None:
        return None
    m = re.search(r"-?\d+", v)
    return int(m.group()) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv_dir")
    ap.add_argument("out")
    ap.add_argument("--prefix", default="")
    ap.add_argument("--pid", type=int, default=4242)
    ap.add_argument("--shift-ns", type=int, default=0)
    a = ap.parse_args()
    trace = rows(one(a.csv_dir, a.prefix, "kernel_trace.csv"))
    agents = rows(one(a.csv_dir, a.prefix, "agent_info.csv"))
    cpath = one(a.csv_dir, a.prefix, "counter_collection.csv", required=False)
    mpath = one(a.csv_dir, a.prefix, "marker_api_trace.csv", required=False)
    counters = rows(cpath) if cpath else []
    markers = rows(mpath) if mpath else []

    pid, shift = a.pid, a.shift_ns
    guid = f"00000000-0000-7000-8000-{pid:012x}"
    s = "_" + guid.replace("-", "_")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    if os.path.exists(a.out):
        os.remove(a.out)
    db = sqlite3.connect(a.out)
    for name, cols in TABLES:
        db.execute(f'CREATE TABLE "{name}{s}" ({cols})')
        db.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "{name}{s}"')
    ins = lambda t, **kv: db.execute(f'INSERT INTO "{t}{s}" ({", ".join(chr(34) + k + chr(34) for k in kv)}) VALUES ({", ".join("?" * len(kv))})', list(kv.values())).lastrowid
    for tag, value in (("schema_version", "3"), ("uuid", s[1:]), ("guid", guid)):
        ins("rocpd_metadata", tag=tag, value=value)
    strings = {}

    def string(v):
        if v not in strings:
            strings[v] = ins("rocpd_string", guid=guid, string=v)
        return strings[v]

    ins("rocpd_info_node", id=1, guid=guid, hash=pid, machine_id=f"katlas-fixture-{pid}", system_name="Linux", hostname="fixture")
    ins("rocpd_info_process", id=pid, guid=guid, nid=1, ppid=1, pid=pid, command="fixture")
    for r in agents:
        ext = {k.lower(): (num(v) if re.fullmatch(r"-?\d+", v or "") else v) for k, v in r.items()}
        ins(
            "rocpd_info_agent",
            id=int(r["Node_Id"]),
            guid=guid,
            nid=1,
            pid=pid,
            type=r.get("Agent_Type"),
            absolute_index=int(r["Node_Id"]),
            logical_index=num(r.get("Logical_Node_Id")),
            uuid=num(r.get("Device_Id")),
            name=r.get("Name"),
            model_name=r.get("Model_Name"),
            vendor_name=r.get("Vendor_Name"),
            product_name=r.get("Product_Name"),
            user_name=r.get("Product_Name"),
            extdata=json.dumps(ext),
        )
    gpu = next((int(r["Node_Id"]) for r in agents if r.get("Agent_Type") == "GPU"), None)
    ins("rocpd_info_code_object", id=1, guid=guid, nid=1, pid=pid, agent_id=gpu, uri="file://fixture", storage_type="FILE")

    # Register counts a 2024 trace lacks come from the counter collection, per kernel.
    regs = {}
    for r in counters:
        regs.setdefault(r["Kernel_Name"], (num(col(r, "VGPR_Count", "Arch_VGPR_Count")), num(col(r, "SGPR_Count")), num(col(r, "Accum_VGPR_Count"))))
    symbols = {}
    for r in trace:
        name = r["Kernel_Name"]
        if name in symbols:
            continue
        vgpr, sgpr, agpr = regs.get(name, (None, None, None))
        kid = num(r.get("Kernel_Id")) or len(symbols) + 1
        symbols[name] = kid
        ins(
            "rocpd_info_kernel_symbol",
            id=kid,
            guid=guid,
            nid=1,
            pid=pid,
            code_object_id=1,
            kernel_name=name + ".kd",
            display_name=name,
            arch_vgpr_count=num(col(r, "VGPR_Count", "Arch_VGPR_Count")) if col(r, "VGPR_Count", "Arch_VGPR_Count") else vgpr,
            sgpr_count=num(col(r, "SGPR_Count")) if col(r, "SGPR_Count") else sgpr,
            accum_vgpr_count=num(col(r, "Accum_VGPR_Count")) if col(r, "Accum_VGPR_Count") else agpr,
        )
    kind = string("KERNEL_DISPATCH")
    by_key = {}
    key_col = "Dispatch_Id" if trace and "Dispatch_Id" in trace[0] and (not counters or "Dispatch_Id" in counters[0]) else "Correlation_Id"
    for n, r in enumerate(trace, 1):
        if r.get("Kind", "KERNEL_DISPATCH") != "KERNEL_DISPATCH":
            continue
        did = num(col(r, "Dispatch_Id", "Correlation_Id")) or n
        corr = num(r.get("Correlation_Id")) or did
        tid = num(r.get("Thread_Id")) or pid
        if not db.execute(f'SELECT 1 FROM "rocpd_info_thread{s}" WHERE id = ?', (tid,)).fetchone():
            ins("rocpd_info_thread", id=tid, guid=guid, nid=1, ppid=1, pid=pid, tid=tid)
        queue, stream = num(r.get("Queue_Id")) or 0, num(r.get("Stream_Id")) or 0
        for t, i in (("rocpd_info_queue", queue), ("rocpd_info_stream", stream)):
            if not db.execute(f'SELECT 1 FROM "{t}{s}" WHERE id = ?', (i,)).fetchone():
                ins(t, id=i, guid=guid, nid=1, pid=pid, name=f"{t[11:]} {i}")
        ev = ins("rocpd_event", guid=guid, category_id=kind, stack_id=corr, parent_stack_id=corr, correlation_id=0)
        ins(
            "rocpd_kernel_dispatch",
            id=did,
            guid=guid,
            nid=1,
            pid=pid,
            tid=tid,
            agent_id=num(r["Agent_Id"]),
            kernel_id=symbols[r["Kernel_Name"]],
            dispatch_id=did,
            queue_id=queue,
            stream_id=stream,
            start=int(r["Start_Timestamp"]) + shift,
            end=int(r["End_Timestamp"]) + shift,
            private_segment_size=num(col(r, "Private_Segment_Size", "Scratch_Size")),
            group_segment_size=num(col(r, "Group_Segment_Size", "LDS_Block_Size")),
            workgroup_size_x=num(r["Workgroup_Size_X"]),
            workgroup_size_y=num(r["Workgroup_Size_Y"]),
            workgroup_size_z=num(r["Workgroup_Size_Z"]),
            grid_size_x=num(r["Grid_Size_X"]),
            grid_size_y=num(r["Grid_Size_Y"]),
            grid_size_z=num(r["Grid_Size_Z"]),
            region_name_id=string(r["Kernel_Name"]),
            event_id=ev,
        )
        by_key[num(r[key_col])] = ev
    pmc = {}
    for r in counters:
        name = r["Counter_Name"]
        if name not in pmc:
            pmc[name] = ins("rocpd_info_pmc", guid=guid, nid=1, pid=pid, agent_id=num(r.get("Agent_Id")) or gpu, target_arch="GPU", name=name, symbol=name, component="rocm", value_type="ABS")
        ev = by_key.get(num(r[key_col]))
        if ev is None:
            sys.exit(f"rocpd-from-csv: {cpath}: {key_col} {r[key_col]} is not in the kernel trace")
        ins("rocpd_pmc_event", guid=guid, event_id=ev, pmc_id=pmc[name], value=float(r["Counter_Value"]))
    if markers:
        mkind = string("MARKER_CORE_RANGE_API")
        for n, r in enumerate(markers, 1):
            tid = num(r.get("Thread_Id")) or pid
            if not db.execute(f'SELECT 1 FROM "rocpd_info_thread{s}" WHERE id = ?', (tid,)).fetchone():
                ins("rocpd_info_thread", id=tid, guid=guid, nid=1, ppid=1, pid=pid, tid=tid)
            corr = num(r.get("Correlation_Id")) or 100000 + n
            ev = ins("rocpd_event", guid=guid, category_id=mkind, stack_id=corr, parent_stack_id=0, correlation_id=0, extdata=json.dumps({"message": r["Function"]}))
            ins(
                "rocpd_region",
                id=corr,
                guid=guid,
                nid=1,
                pid=pid,
                tid=tid,
                start=int(r["Start_Timestamp"]) + shift,
                end=int(r["End_Timestamp"]) + shift,
                name_id=string("roctxRangePushA"),
                event_id=ev,
            )
    db.commit()
    db.close()


if __name__ == "__main__":
    main()
