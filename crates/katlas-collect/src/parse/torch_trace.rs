//! torch.profiler Chrome traces, streamed event by event (see `json_scan`).
//!
//! GPU kernels are the `cat: "kernel"` events: name, `dur` (us), and from
//! `args` grid, block, registers per thread and shared memory. Phases come
//! from GPU-side `record_function` ranges (`cat: "gpu_user_annotation"`) whose
//! names are listed in the parser's `phases`; a kernel belongs to the range
//! that contains its start. Memory held: the read buffer plus 16 bytes per
//! kernel event (start, duration, name id) and one entry per distinct name.

use super::json_scan::{show, ScanError, Scanner};
use super::triton_join::{self, Join};
use super::triton_launches::{self, Records};
use super::{ParseError, ParseOutput, ParserOptions};
use crate::summary::PhaseAcc;
use katlas_model::{KernelSample, Metric};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::BufRead;

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    ph: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cat: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tid: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct KernelArgs {
    #[serde(default)]
    grid: Option<[u32; 3]>,
    #[serde(default)]
    block: Option<[u32; 3]>,
    #[serde(default, rename = "registers per thread")]
    registers: Option<u32>,
    #[serde(default, rename = "shared memory")]
    shared: Option<u64>,
    #[serde(default)]
    device: Option<u32>,
    #[serde(default)]
    stream: Option<i64>,
    #[serde(default, rename = "External id")]
    ext: Option<i64>,
    #[serde(default)]
    correlation: Option<i64>,
}

struct KernelInfo {
    name: String,
    grid: Option<[u32; 3]>,
    block: Option<[u32; 3]>,
    registers: Option<u32>,
    shared: Option<u64>,
    varies: bool,
}

struct Dispatch {
    ts: f64,
    dur: f32,
    id: u32,
    /// The launching CPU op's `External id` (-1: none).
    ext: i64,
    /// The launch call's correlation id (-1: none): a graph launch's replays its kernels.
    corr: i64,
    /// This dispatch's own block x and dynamic shared memory (the Triton join reads them).
    block: Option<u32>,
    shared: Option<u64>,
    /// Programs (blocks) of the grid.
    programs: Option<u64>,
}

/// A CPU op's tensor inputs: (elements, bytes per element), for operand bytes.
struct OpInputs {
    name: u32,
    tensors: Vec<(u64, f64)>,
    /// Not an `aten::` op (a custom op or an autograd.Function): aten ops' bytes come from the
    /// shape formulas, which know their outputs (a gather reads rows, not its whole table).
    custom: bool,
}

impl OpInputs {
    /// Inputs read once and one output the size of the first input: a lower bound.
    fn bytes(&self) -> f64 {
        let inputs: f64 = self.tensors.iter().map(|(n, b)| *n as f64 * b).sum();
        inputs + self.tensors.first().map_or(0.0, |(n, b)| *n as f64 * b)
    }
}

#[derive(Default)]
struct State {
    names: HashMap<String, u32>,
    infos: Vec<KernelInfo>,
    dispatches: Vec<Dispatch>,
    ranges: Vec<(f64, f64, String)>,
    /// The same phases' ranges on the host (`user_annotation`), where the launch calls are.
    host_ranges: Vec<(f64, f64, String)>,
    memcpy_us: f64,
    memcpy_n: u64,
    memset_us: f64,
    memset_n: u64,
    events: u64,
    bad: u64,
    devices: Vec<String>,
    streams: std::collections::BTreeSet<i64>,
    /// Host launch API calls: (thread, start, duration, driver-level).
    launch_calls: Vec<(String, f64, f64, bool)>,
    /// `ProfilerStep#N` ranges seen.
    step_marks: u64,
    /// Calls of the step ops (`data/timeline.toml`), by op name.
    step_ops: HashMap<String, u64>,
    /// Cost from shapes of the CPU ops with a formula (`data/shapes.toml`), by `External id`:
    /// (formula index, cost; `None` when an input could not be read).
    op_costs: HashMap<i64, (u16, Option<super::shapes::Cost>)>,
    /// The trace says `record_shapes` was on.
    record_shapes: bool,
    /// Tensor inputs of the CPU ops that record shapes, by `External id`.
    op_inputs: HashMap<i64, OpInputs>,
    op_names: HashMap<String, u32>,
    /// Correlation ids of graph launches (`cudaGraphLaunch`, `hipGraphLaunch`).
    graph_launches: std::collections::HashSet<i64>,
}

/// Parse with the element cap from `KATLAS_MAX_LINE_BYTES` (default 64 MiB).
pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let limits = super::Limits::from_env().map_err(|e| ParseError::new(source, None, e))?;
    parse_capped(r, source, opts, limits.max_line)
}

/// Parse a Chrome trace whose elements (trace events, top-level values) are
/// at most `max_element` bytes each. Malformed JSON structure is an error
/// naming line and byte offset; an element that is well delimited but not a
/// valid event is skipped with a warning.
pub fn parse_capped(r: &mut dyn BufRead, source: &str, opts: &ParserOptions, max_element: usize) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("torch-trace", source);
    let mut st = State::default();
    let mut sc = Scanner::with_limit(r, max_element);
    let mut saw_events = false;
    let e = |e: ScanError| e.into_parse(source, "");
    sc.expect(b'{').map_err(e)?;
    sc.members("a top-level value", e, |sc, key| {
        if key == "traceEvents" {
            saw_events = true;
            return sc.elements(
                "a traceEvents element",
                |_, err| e(err),
                |_, line, offset, bytes| {
                    if let Err(msg) = event(&mut st, bytes, opts) {
                        st.bad += 1;
                        if st.bad <= 20 {
                            out.warnings.push(format!("{source}:{line}: traceEvents element skipped: {msg} (byte offset {offset})"));
                        }
                    }
                    Ok(())
                },
            );
        }
        let bytes = sc.value().map_err(e)?;
        if key == "deviceProperties" {
            if let Ok(Value::Array(devs)) = serde_json::from_slice::<Value>(bytes) {
                for d in devs {
                    if let Some(n) = d.get("name").and_then(Value::as_str) {
                        st.devices.push(n.to_string());
                    }
                    if let (Some(a), Some(b)) = (d.get("computeMajor").and_then(Value::as_u64), d.get("computeMinor").and_then(Value::as_u64)) {
                        out.route.entry("arch".into()).or_insert(json!(format!("sm_{a}{b}")));
                    }
                }
            }
        } else if key == "record_shapes" {
            st.record_shapes = serde_json::from_slice::<Value>(bytes).ok().is_some_and(|v| v.as_i64() == Some(1) || v.as_bool() == Some(true));
        } else if matches!(key.as_str(), "cuda_runtime_version" | "cuda_driver_version" | "cupti_version" | "roctracer_version") {
            if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
                out.artifacts.insert(key, v);
            }
        }
        Ok(())
    })?;
    if let Some(b) = sc.peek().map_err(e)? {
        return Err(e(sc.err(format!("trailing data after the top-level object: {}", show(b)))));
    }
    if !saw_events {
        return Err(ParseError::new(source, None, "no `traceEvents` array: not a Chrome trace"));
    }
    if st.bad > 20 {
        out.warnings.push(format!("{source}: {} traceEvents elements skipped in all", st.bad));
    }
    let join = triton_join(&st, opts, &mut out.warnings);
    finish(&mut out, st, opts, join.as_ref());
    Ok(out)
}

/// Categories never used here; events of these are counted, not deserialised
/// (most of a trace is CPU ops with large argument lists).
const SKIP_CATS: &[&[u8]] = &[b"python_function", b"ac2g", b"overhead", b"fwdbwd", b"Trace", b"cpu_instant_event"];

/// The value of the first `"cat"` key, when it is a plain string.
fn quick_cat(bytes: &[u8]) -> Option<&[u8]> {
    let i = memchr::memmem::find(bytes, b"\"cat\"")? + 5;
    let rest = &bytes[i..];
    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    if rest[colon] != b':' {
        return None;
    }
    let rest = &rest[colon + 1..];
    let q = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    if rest[q] != b'"' {
        return None;
    }
    let rest = &rest[q + 1..];
    let end = memchr::memchr2(b'"', b'\\', rest)?;
    (rest[end] == b'"').then(|| &rest[..end])
}

fn event(st: &mut State, bytes: &[u8], opts: &ParserOptions) -> Result<(), String> {
    st.events += 1;
    if quick_cat(bytes).is_some_and(|c| SKIP_CATS.contains(&c)) {
        return Ok(());
    }
    if quick_cat(bytes).is_some_and(|c| c == b"cpu_op" || c == b"user_annotation") {
        return host_op(st, bytes, quick_cat(bytes) == Some(b"user_annotation".as_slice()), opts);
    }
    let ev: Event = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let cat = ev.cat.as_deref().unwrap_or("");
    if ev.ph.as_deref() != Some("X") {
        return Ok(());
    }
    match cat {
        "kernel" => {
            let name = ev.name.ok_or("kernel event without `name`")?;
            let dur = ev.dur.ok_or("kernel event without `dur`")?;
            let ts = ev.ts.ok_or("kernel event without `ts`")?;
            let args: KernelArgs = match ev.args {
                Some(raw) => serde_json::from_str(raw.get()).map_err(|e| format!("kernel args: {e}"))?,
                None => KernelArgs::default(),
            };
            if let Some(s) = args.stream {
                st.streams.insert(s);
            }
            let _ = args.device;
            let id = match st.names.get(name.as_ref()) {
                Some(&id) => {
                    let info = &mut st.infos[id as usize];
                    if info.grid != args.grid || info.block != args.block {
                        info.varies = true;
                    }
                    id
                }
                None => {
                    let id = st.infos.len() as u32;
                    st.names.insert(name.to_string(), id);
                    st.infos.push(KernelInfo {
                        name: name.into_owned(),
                        grid: args.grid,
                        block: args.block,
                        registers: args.registers,
                        shared: args.shared,
                        varies: false,
                    });
                    id
                }
            };
            st.dispatches.push(Dispatch {
                ts,
                dur: dur as f32,
                id,
                ext: args.ext.unwrap_or(-1),
                corr: args.correlation.unwrap_or(-1),
                block: args.block.map(|b| b[0]),
                shared: args.shared,
                programs: args.grid.map(|g| g.iter().map(|&x| x as u64).product()),
            });
        }
        "gpu_memcpy" => {
            st.memcpy_us += ev.dur.unwrap_or(0.0);
            st.memcpy_n += 1;
        }
        "gpu_memset" => {
            st.memset_us += ev.dur.unwrap_or(0.0);
            st.memset_n += 1;
        }
        "cuda_runtime" | "cuda_driver" | "hip_runtime" | "hip_api" => {
            let name = ev.name.as_deref().unwrap_or("");
            if name.ends_with("GraphLaunch") {
                let corr = ev.args.and_then(|raw| serde_json::from_str::<KernelArgs>(raw.get()).ok()).and_then(|a| a.correlation);
                st.graph_launches.extend(corr);
            }
            if super::timeline::rules().launch_apis.iter().any(|a| a == name) {
                if let (Some(ts), Some(dur)) = (ev.ts, ev.dur) {
                    let tid = ev.tid.map(|t| t.get().to_string()).unwrap_or_default();
                    st.launch_calls.push((tid, ts, dur, cat == "cuda_driver"));
                }
            }
        }
        "gpu_user_annotation" => {
            if let (Some(name), Some(ts), Some(dur)) = (ev.name, ev.ts, ev.dur) {
                if delimits(opts, &name) {
                    st.ranges.push((ts, ts + dur, name.into_owned()));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether a `record_function` range of this name is a phase: one of `phases`, else the
/// `phase` asked for. A table named `decode` must hold the decode range's kernels, never the
/// whole trace's (prefill included) when the trace marks where decode is.
fn delimits(opts: &ParserOptions, name: &str) -> bool {
    if opts.phases.is_empty() {
        opts.phase.as_deref() == Some(name)
    } else {
        opts.phases.iter().any(|p| p == name)
    }
}

/// A CPU op or annotation: read leniently (only what the timeline and shapes use), since
/// most of a trace is these and their other fields are never needed.
#[derive(Deserialize)]
struct HostOp<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    // Lenient: a host op's times matter only for phase ranges; a bad one must not cost its shapes.
    #[serde(default, borrow)]
    ts: Option<&'a RawValue>,
    #[serde(default, borrow)]
    dur: Option<&'a RawValue>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct OpArgs {
    #[serde(default, rename = "External id")]
    ext: Option<i64>,
    #[serde(default, rename = "Input Dims")]
    dims: Vec<Value>,
    #[serde(default, rename = "Input type")]
    types: Vec<String>,
}

/// The op's inputs as shapes reads them: a tensor list (nested dims) has no dims here.
fn op_inputs(a: &OpArgs) -> Vec<super::shapes::Input> {
    a.dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let dims = d.as_array().and_then(|v| v.iter().map(|x| x.as_f64()).collect::<Option<Vec<f64>>>());
            super::shapes::Input { dims, ty: a.types.get(i).cloned().unwrap_or_default() }
        })
        .collect()
}

fn host_op(st: &mut State, bytes: &[u8], annotation: bool, opts: &ParserOptions) -> Result<(), String> {
    let op: HostOp = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let name = op.name.as_deref().unwrap_or("");
    // The host side of a phase (`record_function`): the launch calls made inside it are its.
    if annotation && delimits(opts, name) {
        let num = |r: Option<&RawValue>| r.and_then(|r| r.get().parse::<f64>().ok());
        if let (Some(ts), Some(dur)) = (num(op.ts), num(op.dur)) {
            st.host_ranges.push((ts, ts + dur, name.to_string()));
        }
    }
    let tl = super::timeline::rules();
    if name.starts_with(tl.step_annotation_prefix.as_str()) {
        st.step_marks += 1;
    } else if tl.step_ops.iter().any(|o| o == name) {
        *st.step_ops.entry(name.to_string()).or_default() += 1;
    }
    let sr = super::shapes::rules();
    let Some(raw) = op.args else { return Ok(()) };
    let formula = sr.formula_for(name);
    if formula.is_none() && !raw.get().contains("Input Dims") {
        return Ok(());
    }
    // Shapes are optional evidence: args that do not read are no cost, not a bad event.
    let Ok(a) = serde_json::from_str::<OpArgs>(raw.get()) else { return Ok(()) };
    let Some(ext) = a.ext else { return Ok(()) };
    let inputs = op_inputs(&a);
    if let Some(fi) = formula {
        let c = if a.dims.is_empty() { None } else { super::shapes::cost(sr, &sr.op[fi], &inputs) };
        st.op_costs.insert(ext, (fi as u16, c));
    }
    let tensors: Vec<(u64, f64)> = inputs
        .iter()
        .filter_map(|x| {
            let size = *sr.dtype_bytes.get(&x.ty)?;
            let numel = x.dims.as_ref()?.iter().product::<f64>();
            (numel.is_finite() && numel >= 0.0).then_some((numel as u64, size))
        })
        .collect();
    if !tensors.is_empty() {
        let next = st.op_names.len() as u32;
        let id = *st.op_names.entry(name.to_string()).or_insert(next);
        st.op_inputs.insert(ext, OpInputs { name: id, tensors, custom: !name.starts_with("aten::") });
    }
    Ok(())
}

/// The Triton launch records and cache the options name, read for this trace's kernel names.
fn triton_join(st: &State, opts: &ParserOptions, warnings: &mut Vec<String>) -> Option<Join> {
    if opts.triton_launches.is_none() && opts.triton_cache.is_none() {
        return None;
    }
    let mut records = Records::default();
    if let Some(path) = &opts.triton_launches {
        let got = super::Limits::from_env()
            .map_err(|e| e.to_string())
            .and_then(|l| super::input::open_file(std::path::Path::new(path), super::Framing::Lines, &l).map_err(|e| e.to_string()))
            .and_then(|mut r| triton_launches::read(&mut *r, path).map_err(|e| e.to_string()));
        match got {
            Ok(r) => records = r,
            Err(e) => warnings.push(format!("{path}: Triton launch records not read: {e}")),
        }
        warnings.append(&mut records.warnings);
    }
    let cache = match &opts.triton_cache {
        Some(dir) => {
            let names: std::collections::HashSet<&str> = st.names.keys().map(String::as_str).collect();
            triton_join::read_cache(std::path::Path::new(dir), &names, warnings)
        }
        None => HashMap::new(),
    };
    Some(Join::new(records, cache))
}

fn finish(out: &mut ParseOutput, st: State, opts: &ParserOptions, join: Option<&Join>) {
    let default_phase = opts.phase.clone().unwrap_or_else(|| "run".into());
    let mut ranges = st.ranges;
    ranges.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut accs: Vec<(String, PhaseAcc)> = Vec::new();
    let slot = |name: &str, accs: &mut Vec<(String, PhaseAcc)>| -> usize {
        match accs.iter().position(|(n, _)| n == name) {
            Some(i) => i,
            None => {
                accs.push((name.to_string(), PhaseAcc::default()));
                accs.len() - 1
            }
        }
    };
    let unphased = if ranges.is_empty() { default_phase.clone() } else { "unannotated".to_string() };
    let mut intervals: Vec<Vec<(f64, f64)>> = Vec::new();
    // One op's bytes and FLOPs go to its longest kernel (split-K GEMM + reduce is one op).
    let mut longest: HashMap<i64, usize> = HashMap::new();
    for (i, d) in st.dispatches.iter().enumerate() {
        if d.ext >= 0 && st.op_costs.contains_key(&d.ext) {
            let e = longest.entry(d.ext).or_insert(i);
            if st.dispatches[*e].dur < d.dur {
                *e = i;
            }
        }
    }
    // Kernels per op call: an op's operand bytes belong to it only when it launched one.
    let mut per_op: HashMap<i64, u32> = HashMap::new();
    for d in &st.dispatches {
        if d.ext >= 0 {
            *per_op.entry(d.ext).or_default() += 1;
        }
    }
    // Each dispatch's place among its name's, in time order (the hook's ordinals); graph
    // replays never pass through Python, so the hook never numbered them.
    let replayed = |d: &Dispatch| d.corr >= 0 && st.graph_launches.contains(&d.corr);
    let mut order: Vec<usize> = (0..st.dispatches.len()).filter(|&i| !replayed(&st.dispatches[i])).collect();
    order.sort_by(|&a, &b| st.dispatches[a].ts.total_cmp(&st.dispatches[b].ts));
    let mut ordinal = vec![0u64; st.dispatches.len()];
    let mut seen = vec![0u64; st.infos.len()];
    for i in order {
        let id = st.dispatches[i].id as usize;
        ordinal[i] = seen[id];
        seen[id] += 1;
    }
    let l2 = l2_resident(st.devices.first().map(String::as_str));
    let mut shaped: HashMap<(usize, u32), ShapeAcc> = HashMap::new();
    for (di, d) in st.dispatches.iter().enumerate() {
        // Last range starting at or before the kernel, if it still covers it.
        let i = ranges.partition_point(|r| r.0 <= d.ts);
        let phase = if i > 0 && d.ts <= ranges[i - 1].1 { ranges[i - 1].2.as_str() } else { unphased.as_str() };
        let p = slot(phase, &mut accs);
        if intervals.len() <= p {
            intervals.resize(p + 1, Vec::new());
        }
        intervals[p].push((d.ts, d.dur as f64));
        let acc = shaped.entry((p, d.id)).or_default();
        let info = &st.infos[d.id as usize];
        let kernels_of_op = per_op.get(&d.ext).copied().unwrap_or(0);
        let op = st.op_inputs.get(&d.ext).filter(|_| d.ext >= 0);
        let record = join.filter(|_| !replayed(d)).and_then(|j| {
            let numels: Option<Vec<u64>> = op.map(|o| o.tensors.iter().map(|t| t.0).collect());
            let ev = triton_join::Event { name: &info.name, ordinal: ordinal[di], block: d.block, shared: d.shared, op_numels: numels.as_deref() };
            j.record(&ev)
        });
        if let Some(r) = record {
            *acc.records.entry(r).or_default() += 1;
        }
        // Through the compiled kernel's loads and stores when its TTIR is known, else each tensor once.
        let launch_bytes = record.zip(join).and_then(|(r, j)| {
            let rec = &j.records.launches[r];
            match j.access(r).and_then(|a| rec.access_bytes(a, d.programs)) {
                Some((read, written)) => {
                    let held = held_in_l2(read, written, l2);
                    acc.read_write.0 += read as f64;
                    acc.read_write.1 += written as f64;
                    acc.read_write.2 += held as f64;
                    Some((LAUNCH_ACCESS, read + written - held))
                }
                None => rec.operand_bytes().map(|b| (LAUNCH_OPERANDS, b)),
            }
        });
        match st.op_costs.get(&d.ext) {
            Some((fi, Some(c))) if longest.get(&d.ext) == Some(&di) => {
                acc.add(*fi, c);
                match launch_bytes {
                    Some((src, b)) => acc.bytes_from(src, b as f64),
                    None => acc.bytes_from("shapes", c.bytes),
                }
            }
            Some((_, Some(_))) if launch_bytes.is_none() => acc.secondary += 1,
            _ => match (launch_bytes, op) {
                (Some((src, b)), _) => acc.bytes_from(src, b as f64),
                // Inputs read once and one output the size of the first input: a lower bound.
                (None, _) if replayed(d) => acc.graph_replays += 1,
                (None, Some(o)) if kernels_of_op == 1 && o.custom && o.bytes() > 0.0 => acc.bytes_from(OP_OPERANDS, o.bytes()),
                (None, Some(o)) if kernels_of_op > 1 => acc.multi_kernel_op = Some((o.name, kernels_of_op)),
                (None, Some(_)) => {}
                (None, None) if d.ext < 0 => acc.outside_ops += 1,
                (None, None) => {}
            },
        }
        accs[p].1.kernel(&info.name).add_duration(d.dur as f64);
    }
    let mut op_name_list = vec![String::new(); st.op_names.len()];
    for (n, i) in &st.op_names {
        op_name_list[*i as usize] = n.clone();
    }
    let host_launch = host_launches(&st.launch_calls);
    // Launches the host issued in each phase: kernels it launched one by one, plus one per graph
    // launch whose kernels the phase replayed (a replayed graph's kernels are not launches).
    let mut issued: HashMap<usize, (u64, std::collections::HashSet<i64>)> = HashMap::new();
    for d in &st.dispatches {
        let i = ranges.partition_point(|r| r.0 <= d.ts);
        let phase = if i > 0 && d.ts <= ranges[i - 1].1 { ranges[i - 1].2.as_str() } else { unphased.as_str() };
        let Some(p) = accs.iter().position(|(n, _)| n == phase) else { continue };
        let e = issued.entry(p).or_default();
        if replayed(d) {
            e.1.insert(d.corr);
        } else {
            e.0 += 1;
        }
    }
    let steps = if st.step_marks > 0 { Some(st.step_marks) } else { super::timeline::rules().step_ops.iter().find_map(|o| st.step_ops.get(o).copied()) };
    let one_phase = accs.len() == 1;
    for (i, (name, acc)) in accs.into_iter().enumerate() {
        let mut t = acc.finish(&name);
        if let Some(b) = intervals.get_mut(i).and_then(|v| super::timeline::busy(v)) {
            let n = issued.get(&i).map_or(intervals[i].len() as u64, |(one, graphs)| one + graphs.len() as u64);
            // Host launch calls per phase from the phase's host range; without one, only the
            // only phase has them. Steps are counted over the whole trace, as the only phase's.
            let host = if !st.host_ranges.is_empty() {
                let mine: Vec<(String, f64, f64, bool)> =
                    st.launch_calls.iter().filter(|c| st.host_ranges.iter().any(|r| r.2 == name && r.0 <= c.1 && c.1 <= r.1)).cloned().collect();
                host_launches(&mine)
            } else if one_phase {
                host_launch
            } else {
                None
            };
            let mut tl = super::timeline::metrics(&b, n, host, if one_phase { steps } else { None });
            // Per kernel, not per launch: a graph launch replays hundreds of kernels.
            let kernels = intervals[i].len();
            if kernels > 0 {
                tl.insert("kernel_avg_us".into(), Metric::new(b.busy_us / kernels as f64, Some("us")));
            }
            if let Some((_, graphs)) = issued.get(&i).filter(|(_, g)| !g.is_empty()) {
                let replayed_kernels = intervals[i].len() as u64 - issued[&i].0;
                tl.insert("graph_launches".into(), Metric::new(graphs.len() as f64, Some("launches")));
                tl.insert("graph_replayed_kernels".into(), Metric::new(replayed_kernels as f64, Some("kernels")));
            }
            t.metrics.extend(tl);
        }
        for k in &mut t.kernels {
            let id = st.names[&k.name] as usize;
            fill(k, &st.infos[id]);
            if let Some(a) = shaped.get(&(i, id as u32)) {
                a.fill(k, &op_name_list);
                triton_facts(k, a, &st.infos[id], join);
            }
        }
        out.phases.push(t);
    }
    out.metrics.insert("kernel_dispatches".into(), Metric::new(st.dispatches.len() as f64, Some("dispatches")));
    out.metrics.insert("gpu_kernel_us".into(), Metric::new(st.dispatches.iter().map(|d| d.dur as f64).sum(), Some("us")));
    out.metrics.insert("gpu_memcpy_us".into(), Metric::new(st.memcpy_us, Some("us")));
    out.metrics.insert("gpu_memcpy_count".into(), Metric::new(st.memcpy_n as f64, None));
    out.metrics.insert("gpu_memset_us".into(), Metric::new(st.memset_us, Some("us")));
    out.metrics.insert("trace_events".into(), Metric::new(st.events as f64, Some("events")));
    if let Some(d) = st.devices.first() {
        out.route.insert("device".into(), json!(d));
    }
    if !st.streams.is_empty() {
        out.route.insert("streams".into(), json!(st.streams));
    }
    out.artifacts.insert("record_shapes".into(), json!(st.record_shapes));
}

/// Bytes source: the tensors katlas's Triton hook saw handed to the kernel, each once.
pub const LAUNCH_OPERANDS: &str = "launch operands";
/// Bytes source: the tensors katlas's Triton hook saw handed to the kernel, through what the
/// compiled kernel (its TTIR) loads and stores: reads once, writes once less what the L2 holds.
pub const LAUNCH_ACCESS: &str = "launch operands by loads/stores";
/// Bytes source: the launching op's tensor inputs once plus one output the size of the first.
pub const OP_OPERANDS: &str = "op operands";

/// The command that gets DRAM counters for kernels the trace cannot give bytes for.
pub const COUNTERS_COMMAND: &str = "katlas collect WORKLOAD --profile with an ncu-csv profile (ncu --csv --page raw --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum)";

/// How ncu counts a replayed graph's kernels (Nsight Compute CLI, `--graph-profiling`).
pub const GRAPH_NODES: &str = "ncu profiles each kernel node of a replayed graph as its own kernel: --graph-profiling node, the default";

/// Bytes and FLOPs from shapes of one kernel's calls.
#[derive(Default)]
struct ShapeAcc {
    /// Calls with bytes, by source: (calls, bytes).
    bytes_src: std::collections::BTreeMap<&'static str, (u64, f64)>,
    /// Launch records joined to the calls: record index, calls.
    records: HashMap<usize, u64>,
    /// An op (name id) that launched several kernels per call, and how many: its bytes are not this kernel's.
    multi_kernel_op: Option<(u32, u32)>,
    /// Calls replayed from a CUDA graph, and calls launched outside any recorded op.
    graph_replays: u64,
    outside_ops: u64,
    calls: u64,
    flops: f64,
    m_max: Option<f64>,
    m1_calls: u64,
    formulas: std::collections::BTreeSet<u16>,
    /// Calls that were not their op's longest kernel (no bytes of their own).
    secondary: u64,
    /// Bytes by loads/stores of the calls that have them: read, written, written but held in L2.
    read_write: (f64, f64, f64),
}

impl ShapeAcc {
    fn add(&mut self, fi: u16, c: &super::shapes::Cost) {
        self.calls += 1;
        self.flops += c.flops;
        self.formulas.insert(fi);
        if let Some(m) = c.m {
            self.m_max = Some(self.m_max.map_or(m, |x: f64| x.max(m)));
            if m == 1.0 {
                self.m1_calls += 1;
            }
        }
    }

    fn bytes_from(&mut self, source: &'static str, bytes: f64) {
        let e = self.bytes_src.entry(source).or_default();
        e.0 += 1;
        e.1 += bytes;
    }

    /// Per-call bytes when every call has them (their sources named), and why not otherwise;
    /// then the shape formulas' FLOPs.
    fn fill(&self, k: &mut KernelSample, op_names: &[String]) {
        let with_bytes: u64 = self.bytes_src.values().map(|v| v.0).sum();
        if with_bytes > 0 && with_bytes == k.calls {
            k.bytes = Some(self.bytes_src.values().map(|v| v.1).sum::<f64>() / with_bytes as f64);
            let names: Vec<&str> = self.bytes_src.keys().copied().collect();
            k.extra.insert("bytes_source".into(), json!(names.join("+")));
            if let Some((n, _)) = self.bytes_src.get(LAUNCH_ACCESS) {
                let (r, w, h) = self.read_write;
                let per = |x: f64| (x / *n as f64).round();
                k.extra.insert("bytes_split".into(), json!({"read": per(r), "written": per(w), "written_held_in_l2": per(h), "calls": n}));
            }
        } else if self.graph_replays > 0 {
            k.extra.insert(
                "bytes_note".into(),
                json!(format!(
                    "no op in the trace (CUDA graph replay, {} of {} calls): no op shapes, so no bytes from shapes; {COUNTERS_COMMAND} gets DRAM bytes ({GRAPH_NODES})",
                    self.graph_replays, k.calls
                )),
            );
        } else if self.outside_ops > 0 {
            k.extra.insert(
                "bytes_note".into(),
                json!(format!(
                    "no op in the trace (launched outside any recorded op, {} of {} calls) and no launch record: {COUNTERS_COMMAND} gets DRAM bytes",
                    self.outside_ops, k.calls
                )),
            );
        } else if let Some((op, n)) = self.multi_kernel_op {
            let op = op_names.get(op as usize).map_or("?", String::as_str);
            k.extra.insert(
                "bytes_note".into(),
                json!(format!("op `{op}` launched {n} kernels per call: its operand bytes are not any one kernel's; a Triton launch record or {COUNTERS_COMMAND} gives them")),
            );
        }
        if self.graph_replays > 0 {
            k.extra.insert("graph_replayed_calls".into(), json!(self.graph_replays));
        }
        if self.calls == 0 {
            return;
        }
        let sr = super::shapes::rules();
        let names: Vec<&str> = self.formulas.iter().map(|f| sr.op[*f as usize].name.as_str()).collect();
        k.extra.insert("shapes_formula".into(), json!(names.join("+")));
        k.extra.insert("shapes_calls".into(), json!(self.calls));
        if self.calls == k.calls {
            k.flops = Some(self.flops / self.calls as f64);
        }
        if let Some(m) = self.m_max {
            k.extra.insert("shapes_m_max".into(), json!(m));
            k.extra.insert("shapes_m1_calls".into(), json!(self.m1_calls));
        }
    }
}

/// Bytes of the device's L2 that hold a kernel's latest traffic when it ends (the arch
/// database's `l2_resident_mib`); 0 where none was measured: then every write counts.
fn l2_resident(device: Option<&str>) -> u64 {
    device.and_then(|d| katlas_arch::ArchDb::builtin().product(d)).and_then(|p| p.l2_resident_mib.as_ref()).map_or(0, |h| (h.value * 1024.0 * 1024.0) as u64)
}

/// Written bytes still dirty in a write-back L2 when the kernel ends, so not DRAM traffic
/// during it: the L2 then holds the kernel's last `l2` bytes moved, written ones among them in
/// proportion (all of them when everything moved fits).
fn held_in_l2(read: u64, written: u64, l2: u64) -> u64 {
    let moved = read.saturating_add(written);
    if moved <= l2 {
        return written;
    }
    (written as f64 * l2 as f64 / moved as f64) as u64
}

/// Total host time and count of launch calls; a driver call inside a runtime call on the
/// same thread is the same launch.
fn host_launches(calls: &[(String, f64, f64, bool)]) -> Option<(f64, u64)> {
    if calls.is_empty() {
        return None;
    }
    let mut runtime: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
    for (tid, ts, dur, driver) in calls {
        if !driver {
            runtime.entry(tid.as_str()).or_default().push((*ts, ts + dur));
        }
    }
    for v in runtime.values_mut() {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let nested = |tid: &str, ts: f64| {
        runtime.get(tid).is_some_and(|v| {
            let i = v.partition_point(|r| r.0 <= ts);
            i > 0 && ts <= v[i - 1].1
        })
    };
    let (mut total, mut n) = (0.0, 0u64);
    for (tid, ts, dur, driver) in calls {
        if *driver && nested(tid, *ts) {
            continue;
        }
        total += dur;
        n += 1;
    }
    Some((total, n))
}

/// A Triton kernel's launch facts: the record joined to most of its calls, and the cache entry
/// with its name, block and shared memory.
fn triton_facts(k: &mut KernelSample, acc: &ShapeAcc, info: &KernelInfo, join: Option<&Join>) {
    let Some(j) = join else { return };
    if !j.knows(&info.name) {
        return;
    }
    let rec = acc.records.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(r, _)| *r);
    let (block, shared) = match rec.map(|r| &j.records.launches[r]) {
        Some(r) => (r.num_warps.map(|w| w.saturating_mul(32)), r.shared),
        None => (info.block.map(|b| b[0]), info.shared),
    };
    let cache = j.cache_entry(&info.name, block, shared);
    if let Some(f) = j.facts(rec, acc.records.len() as u32, cache) {
        k.extra.insert("triton".into(), json!(f));
    }
}

fn fill(k: &mut KernelSample, info: &KernelInfo) {
    k.grid = info.grid;
    k.block = info.block;
    k.registers = info.registers;
    k.shared_bytes = info.shared;
    if info.varies {
        k.extra.insert("launch_config_varies".into(), json!(true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_launch_inside_a_runtime_launch_is_one_launch() {
        let t = |s: &str| s.to_string();
        let calls = vec![(t("1"), 0.0, 10.0, false), (t("1"), 2.0, 5.0, true), (t("1"), 20.0, 4.0, true), (t("2"), 3.0, 6.0, true)];
        // The driver call at 2.0 is inside the runtime call on thread 1; the others are their own.
        assert_eq!(host_launches(&calls), Some((20.0, 3)));
        assert_eq!(host_launches(&[]), None);
    }

    #[test]
    fn skip_only_by_the_top_level_category() {
        assert_eq!(quick_cat(br#"{"ph": "X", "cat" : "cpu_op", "name": "aten::mm"}"#), Some(&b"cpu_op"[..]));
        assert_eq!(quick_cat(br#"{"ph": "X", "cat": "kernel", "args": {"cat": "cpu_op"}}"#), Some(&b"kernel"[..]));
        assert_eq!(quick_cat(br#"{"ph": "M", "name": "process_name"}"#), None);
        assert_eq!(quick_cat(br#"{"cat": "a\"b"}"#), None, "escaped values go through serde");
        let mut st = State::default();
        event(&mut st, br#"{"ph": "X", "cat": "cpu_op", "name": "x", "ts": "not a number"}"#, &ParserOptions::default()).unwrap();
        event(&mut st, br#"{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"grid": [1,1,1]}}"#, &ParserOptions::default()).unwrap();
        assert_eq!((st.events, st.dispatches.len()), (2, 1));
    }
}
