//! rocprof CSV outputs: rocprofv3 kernel trace and counter collection, rocprof
//! (v1) `results.csv`. Columns are found by header name; each known column
//! has aliases across the 2024 and 2026 rocprofv3 column sets
//! (`Private_Segment_Size`/`Scratch_Size`, `Group_Segment_Size`/`LDS_Block_Size`).
//! A repeated header line (files concatenated) starts a new column map.
//!
//! AMD grid sizes are in work-items; `grid` on a kernel sample is in
//! workgroups (as CUDA's), the work-item grid is kept in `extra.grid_workitems`.

use super::csvutil::{self, field, line_of, num, uint, Header};
use super::{ParseError, ParseOutput, ParserOptions};
use crate::summary::{KernelAcc, PhaseAcc};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::io::BufRead;

pub(super) struct V3Cols {
    pub(super) kind: Option<usize>,
    pub(super) name: usize,
    pub(super) start: Option<usize>,
    pub(super) end: Option<usize>,
    pub(super) lds: Option<usize>,
    pub(super) scratch: Option<usize>,
    pub(super) vgpr: Option<usize>,
    pub(super) agpr: Option<usize>,
    pub(super) sgpr: Option<usize>,
    pub(super) wg: [Option<usize>; 3],
    pub(super) grid: [Option<usize>; 3],
    pub(super) wg1: Option<usize>,
    pub(super) grid1: Option<usize>,
    pub(super) dispatch: Option<usize>,
    pub(super) counter_name: Option<usize>,
    pub(super) counter_value: Option<usize>,
    pub(super) correlation: Option<usize>,
    pub(super) agent: Option<usize>,
}

impl V3Cols {
    pub(super) fn new(h: &Header, source: &str, line: u64) -> Result<Self, ParseError> {
        Ok(Self {
            kind: h.col(&["Kind"]),
            name: h.require(&["Kernel_Name", "KernelName", "Kernel-Name"], source, line)?,
            start: h.col(&["Start_Timestamp", "BeginNs", "Begin_Timestamp"]),
            end: h.col(&["End_Timestamp", "EndNs"]),
            lds: h.col(&["LDS_Block_Size", "Group_Segment_Size", "lds"]),
            scratch: h.col(&["Scratch_Size", "Private_Segment_Size", "scr"]),
            vgpr: h.col(&["VGPR_Count", "Arch_VGPR_Count", "arch_vgpr", "vgpr"]),
            agpr: h.col(&["Accum_VGPR_Count", "accum_vgpr"]),
            sgpr: h.col(&["SGPR_Count", "sgpr"]),
            wg: [h.col(&["Workgroup_Size_X"]), h.col(&["Workgroup_Size_Y"]), h.col(&["Workgroup_Size_Z"])],
            grid: [h.col(&["Grid_Size_X"]), h.col(&["Grid_Size_Y"]), h.col(&["Grid_Size_Z"])],
            wg1: h.col(&["Workgroup_Size", "wgr"]),
            grid1: h.col(&["Grid_Size", "grd"]),
            dispatch: h.col(&["Dispatch_Id", "Index"]),
            counter_name: h.col(&["Counter_Name"]),
            counter_value: h.col(&["Counter_Value"]),
            correlation: h.col(&["Correlation_Id"]),
            agent: h.col(&["Agent_Id"]),
        })
    }

    fn dims(&self, rec: &csv::ByteRecord) -> (Option<[u32; 3]>, Option<[u32; 3]>) {
        let get3 = |c: &[Option<usize>; 3]| -> Option<[u32; 3]> {
            let x = uint(rec, c[0])? as u32;
            Some([x, uint(rec, c[1]).unwrap_or(1) as u32, uint(rec, c[2]).unwrap_or(1) as u32])
        };
        let wg = get3(&self.wg).or_else(|| uint(rec, self.wg1).map(|x| [x as u32, 1, 1]));
        let grid = get3(&self.grid).or_else(|| uint(rec, self.grid1).map(|x| [x as u32, 1, 1]));
        (wg, grid)
    }

    /// The launch facts of one record.
    pub(super) fn launch_of(&self, rec: &csv::ByteRecord) -> Launch {
        let (wg, grid) = self.dims(rec);
        Launch {
            wg,
            grid,
            lds: uint(rec, self.lds),
            vgpr: uint(rec, self.vgpr).map(|v| v as u32),
            sgpr: uint(rec, self.sgpr),
            agpr: uint(rec, self.agpr),
            scratch: uint(rec, self.scratch),
        }
    }

    pub(super) fn launch(&self, acc: &mut KernelAcc, rec: &csv::ByteRecord) {
        self.launch_of(rec).apply(acc);
    }
}

/// One dispatch's launch facts, from a CSV record or a rocpd row: workgroup and grid in
/// work-items, LDS and scratch bytes, register counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Launch {
    pub(super) wg: Option<[u32; 3]>,
    pub(super) grid: Option<[u32; 3]>,
    pub(super) lds: Option<u64>,
    pub(super) vgpr: Option<u32>,
    pub(super) sgpr: Option<u64>,
    pub(super) agpr: Option<u64>,
    pub(super) scratch: Option<u64>,
}

impl Launch {
    /// Launch configuration of the first dispatch; later differing ones are flagged.
    pub(super) fn apply(&self, acc: &mut KernelAcc) {
        let (wg, grid) = (self.wg, self.grid);
        let s = &mut acc.sample;
        let groups = match (wg, grid) {
            (Some(w), Some(g)) => Some([0, 1, 2].map(|i| if w[i] == 0 { g[i] } else { g[i].div_ceil(w[i]) })),
            _ => None,
        };
        let shared = self.lds;
        if s.calls <= 1 && s.block.is_none() && s.grid.is_none() {
            s.block = wg;
            s.grid = groups;
            s.shared_bytes = shared;
            s.registers = self.vgpr;
            if let Some(g) = grid {
                s.extra.insert("grid_workitems".into(), json!(g));
            }
            if let Some(x) = self.sgpr {
                s.extra.insert("sgpr".into(), json!(x));
            }
            if let Some(x) = self.agpr {
                s.extra.insert("accum_vgpr".into(), json!(x));
            }
            if let Some(x) = self.scratch {
                s.extra.insert("scratch_bytes".into(), json!(x));
            }
        } else if s.block != wg || s.grid != groups || s.shared_bytes != shared {
            s.extra.insert("launch_config_varies".into(), json!(true));
        }
    }
}

pub(super) fn is_header(rec: &csv::ByteRecord) -> bool {
    rec.iter().any(|f| f == b"Kernel_Name" || f == b"KernelName")
}

pub(super) fn kernel_name(raw: &str) -> &str {
    // rocprof v1 prints code-object symbol names (`foo.kd`, `foo [clone .kd]`).
    let n = raw.trim();
    let n = n.strip_suffix(" [clone .kd]").unwrap_or(n);
    n.strip_suffix(".kd").unwrap_or(n)
}

pub(super) fn phase_name(opts: &ParserOptions) -> String {
    opts.phase.clone().unwrap_or_else(|| "run".into())
}

/// The records of a rocprof CSV, each read under the header line before it (a file may repeat
/// its header): `header` checks a header's columns (an error refuses the file) and says what
/// else the rows need of it, `row` gets every other record with its line, the columns, that and
/// the warnings. A record before any header, or no header at all, is an error.
fn records<H>(
    r: &mut dyn BufRead,
    source: &str,
    warnings: &mut Vec<String>,
    header: impl Fn(&Header, &V3Cols, u64) -> Result<H, ParseError>,
    mut row: impl FnMut(&csv::ByteRecord, u64, &(V3Cols, H), &mut Vec<String>),
) -> Result<(), ParseError> {
    let mut rd = csvutil::reader(r);
    let mut rec = csv::ByteRecord::new();
    let mut cols: Option<(V3Cols, H)> = None;
    while csvutil::next_record(&mut rd, &mut rec, source, 0, warnings)? {
        let line = line_of(&rec);
        if is_header(&rec) {
            let h = Header::new(&rec);
            let c = V3Cols::new(&h, source, line)?;
            let more = header(&h, &c, line)?;
            cols = Some((c, more));
            continue;
        }
        let Some(c) = &cols else {
            return Err(ParseError::new(source, Some(line), "no header line with a Kernel_Name column before the first record"));
        };
        row(&rec, line, c, warnings);
    }
    if cols.is_none() {
        return Err(ParseError::new(source, None, "empty input: no CSV header"));
    }
    Ok(())
}

/// Kernel trace: one row per dispatch with start and end timestamps (ns).
fn parse_trace(r: &mut dyn BufRead, source: &str, opts: &ParserOptions, parser: &str) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new(parser, source);
    let mut acc = PhaseAcc::default();
    let mut skipped = 0u64;
    // rocprof v1 puts counters in columns of their own.
    let header = |h: &Header, c: &V3Cols, line: u64| {
        if c.start.is_none() || c.end.is_none() {
            return Err(ParseError::new(source, Some(line), "no Start_Timestamp/End_Timestamp (or BeginNs/EndNs) columns: not a kernel trace"));
        }
        Ok(if parser == "rocprof-v1" { v1_counter_columns(h) } else { Vec::new() })
    };
    records(r, source, &mut out.warnings, header, |rec, line, (c, counters), warnings| {
        if let Some(kind) = field(rec, c.kind) {
            if !kind.is_empty() && kind != "KERNEL_DISPATCH" {
                return;
            }
        }
        let (Some(name), Some(start), Some(end)) = (field(rec, Some(c.name)), uint(rec, c.start), uint(rec, c.end)) else {
            skipped += 1;
            if skipped <= 20 {
                warnings.push(format!("{source}:{line}: missing kernel name or timestamps; row skipped"));
            }
            return;
        };
        if end < start {
            skipped += 1;
            if skipped <= 20 {
                warnings.push(format!("{source}:{line}: End_Timestamp before Start_Timestamp; row skipped"));
            }
            return;
        }
        let k = acc.kernel(kernel_name(name));
        c.launch(k, rec);
        k.add_duration((end - start) as f64 / 1000.0);
        for (i, cname) in counters {
            if let Some(v) = num(rec, Some(*i)) {
                k.add_counter(cname, v);
            }
        }
    })?;
    if skipped > 20 {
        out.warnings.push(format!("{source}: {skipped} rows skipped in all"));
    }
    let phase = phase_name(opts);
    out.phases.push(acc.finish(&phase));
    Ok(out)
}

pub fn parse_v3_trace(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    parse_trace(r, source, opts, "rocprofv3-kernel-trace")
}

pub fn parse_v1(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    parse_trace(r, source, opts, "rocprof-v1")
}

/// rocprof v1 puts requested counters as extra columns after the fixed ones.
fn v1_counter_columns(h: &Header) -> Vec<(usize, String)> {
    const FIXED: &[&str] = &[
        "Index",
        "KernelName",
        "gpu-id",
        "queue-id",
        "queue-index",
        "pid",
        "tid",
        "grd",
        "wgr",
        "lds",
        "scr",
        "arch_vgpr",
        "accum_vgpr",
        "vgpr",
        "sgpr",
        "wave_size",
        "sig",
        "obj",
        "fbar",
        "DispatchNs",
        "BeginNs",
        "EndNs",
        "CompleteNs",
        "DurationNs",
    ];
    h.names.iter().enumerate().filter(|(_, n)| !FIXED.contains(&n.as_str()) && !n.is_empty()).map(|(i, n)| (i, n.clone())).collect()
}

/// Counter collection: one row per (dispatch, counter).
pub fn parse_v3_counters(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("rocprofv3-counters", source);
    let mut acc = PhaseAcc::default();
    let mut seen: HashMap<String, HashSet<u64>> = HashMap::new();
    let mut rows = 0u64;
    let header = |_: &Header, c: &V3Cols, line: u64| {
        if c.counter_name.is_none() || c.counter_value.is_none() {
            return Err(ParseError::new(source, Some(line), "no Counter_Name/Counter_Value columns: not a counter collection"));
        }
        Ok(())
    };
    records(r, source, &mut out.warnings, header, |rec, line, (c, ()), warnings| {
        let (Some(name), Some(cname)) = (field(rec, Some(c.name)), field(rec, c.counter_name)) else {
            warnings.push(format!("{source}:{line}: missing kernel or counter name; row skipped"));
            return;
        };
        let Some(value) = num(rec, c.counter_value) else {
            warnings.push(format!("{source}:{line}: key `Counter_Value`: not a number; row skipped"));
            return;
        };
        rows += 1;
        let name = kernel_name(name).to_string();
        let dispatch = uint(rec, c.dispatch).unwrap_or(rows);
        let k = acc.kernel(&name);
        if seen.entry(name).or_default().insert(dispatch) {
            c.launch(k, rec);
            k.add_call();
        }
        k.add_counter(cname, value);
    })?;
    out.phases.push(acc.finish(&phase_name(opts)));
    Ok(out)
}
