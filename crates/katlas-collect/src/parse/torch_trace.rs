//! torch.profiler Chrome traces, streamed event by event (see `json_scan`).
//!
//! GPU kernels are the `cat: "kernel"` events: name, `dur` (us), and from
//! `args` grid, block, registers per thread and shared memory. Phases come
//! from GPU-side `record_function` ranges (`cat: "gpu_user_annotation"`) whose
//! names are listed in the parser's `phases`; a kernel belongs to the range
//! that contains its start. Memory held: the read buffer plus 16 bytes per
//! kernel event (start, duration, name id) and one entry per distinct name.

use super::json_scan::{show, ScanError, Scanner};
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
}

#[derive(Default)]
struct State {
    names: HashMap<String, u32>,
    infos: Vec<KernelInfo>,
    dispatches: Vec<Dispatch>,
    ranges: Vec<(f64, f64, String)>,
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
}

fn scan_err(source: &str, e: ScanError) -> ParseError {
    ParseError::new(source, Some(e.line), format!("{} (byte offset {})", e.message, e.offset))
}

/// Parse with the element cap from `KATLAS_MAX_LINE_BYTES` (default 64 MiB).
pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let limits = super::Limits::from_env().map_err(|e| ParseError::new(source, None, e))?;
    parse_capped(r, source, opts, limits.max_line)
}

/// After a member or element: `,` (more follow) or the closing bracket.
fn after_item<R: std::io::Read>(sc: &mut Scanner<R>, close: u8, what: &str) -> Result<bool, ScanError> {
    match sc.peek()? {
        Some(b',') => {
            sc.bump();
            Ok(true)
        }
        Some(b) if b == close => {
            sc.bump();
            Ok(false)
        }
        Some(b) => Err(sc.err(format!("expected `,` or `{}` after {what}, found {}", close as char, show(b)))),
        None => Err(sc.err(format!("truncated: {what} not followed by `,` or `{}` before end of input", close as char))),
    }
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
    let e = |e: ScanError| scan_err(source, e);
    sc.expect(b'{').map_err(e)?;
    let mut more = match sc.peek().map_err(e)? {
        Some(b'}') => {
            sc.bump();
            false
        }
        _ => true,
    };
    while more {
        match sc.peek().map_err(e)? {
            Some(b'"') => {}
            Some(b) => return Err(e(sc.err(format!("expected an object key, found {}", show(b))))),
            None => return Err(e(sc.err("truncated: top-level object not closed"))),
        }
        let (line, offset) = (sc.line(), sc.offset());
        let key: String = serde_json::from_slice(sc.value().map_err(e)?)
            .map_err(|err| ParseError::new(source, Some(line), format!("expected an object key: {err} (byte offset {offset})")))?;
        sc.expect(b':').map_err(e)?;
        if key == "traceEvents" {
            saw_events = true;
            sc.expect(b'[').map_err(e)?;
            let mut more_events = match sc.peek().map_err(e)? {
                Some(b']') => {
                    sc.bump();
                    false
                }
                _ => true,
            };
            while more_events {
                // Skip whitespace first, so line and offset are the element's own.
                sc.peek().map_err(e)?;
                let (line, offset) = (sc.line(), sc.offset());
                let bytes = sc.value().map_err(e)?;
                if let Err(msg) = event(&mut st, bytes, opts) {
                    st.bad += 1;
                    if st.bad <= 20 {
                        out.warnings.push(format!("{source}:{line}: traceEvents element skipped: {msg} (byte offset {offset})"));
                    }
                }
                more_events = after_item(&mut sc, b']', "a traceEvents element").map_err(e)?;
            }
        } else {
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
        }
        more = after_item(&mut sc, b'}', "a top-level value").map_err(e)?;
    }
    if let Some(b) = sc.peek().map_err(e)? {
        return Err(e(sc.err(format!("trailing data after the top-level object: {}", show(b)))));
    }
    if !saw_events {
        return Err(ParseError::new(source, None, "no `traceEvents` array: not a Chrome trace"));
    }
    if st.bad > 20 {
        out.warnings.push(format!("{source}: {} traceEvents elements skipped in all", st.bad));
    }
    finish(&mut out, st, opts);
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
        return host_op(st, bytes);
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
            st.dispatches.push(Dispatch { ts, dur: dur as f32, id, ext: args.ext.unwrap_or(-1) });
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
            if super::timeline::rules().launch_apis.iter().any(|a| a == name) {
                if let (Some(ts), Some(dur)) = (ev.ts, ev.dur) {
                    let tid = ev.tid.map(|t| t.get().to_string()).unwrap_or_default();
                    st.launch_calls.push((tid, ts, dur, cat == "cuda_driver"));
                }
            }
        }
        "gpu_user_annotation" => {
            if let (Some(name), Some(ts), Some(dur)) = (ev.name, ev.ts, ev.dur) {
                if opts.phases.iter().any(|p| p == name.as_ref()) {
                    st.ranges.push((ts, ts + dur, name.into_owned()));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A CPU op or annotation: read leniently (only what the timeline and shapes use), since
/// most of a trace is these and their other fields are never needed.
#[derive(Deserialize)]
struct HostOp<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
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

fn host_op(st: &mut State, bytes: &[u8]) -> Result<(), String> {
    let op: HostOp = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let name = op.name.as_deref().unwrap_or("");
    let tl = super::timeline::rules();
    if name.starts_with(tl.step_annotation_prefix.as_str()) {
        st.step_marks += 1;
    } else if tl.step_ops.iter().any(|o| o == name) {
        *st.step_ops.entry(name.to_string()).or_default() += 1;
    }
    let sr = super::shapes::rules();
    if let (Some(fi), Some(raw)) = (sr.formula_for(name), op.args) {
        // Shapes are optional evidence: args that do not read are no cost, not a bad event.
        if let Ok(a) = serde_json::from_str::<OpArgs>(raw.get()) {
            if let Some(ext) = a.ext {
                let c = if a.dims.is_empty() { None } else { super::shapes::cost(sr, &sr.op[fi], &op_inputs(&a)) };
                st.op_costs.insert(ext, (fi as u16, c));
            }
        }
    }
    Ok(())
}

fn finish(out: &mut ParseOutput, st: State, opts: &ParserOptions) {
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
        match st.op_costs.get(&d.ext) {
            Some((fi, Some(c))) if longest.get(&d.ext) == Some(&di) => acc.add(*fi, c),
            Some((_, Some(_))) => acc.secondary += 1,
            _ => {}
        }
        let info = &st.infos[d.id as usize];
        accs[p].1.kernel(&info.name).add_duration(d.dur as f64);
    }
    let host_launch = host_launches(&st.launch_calls);
    let steps = if st.step_marks > 0 { Some(st.step_marks) } else { super::timeline::rules().step_ops.iter().find_map(|o| st.step_ops.get(o).copied()) };
    let one_phase = accs.len() == 1;
    for (i, (name, acc)) in accs.into_iter().enumerate() {
        let mut t = acc.finish(&name);
        if let Some(b) = intervals.get_mut(i).and_then(|v| super::timeline::busy(v)) {
            let n = intervals[i].len() as u64;
            // Host calls and steps are counted over the whole trace: per phase only when it is the only one.
            let tl = super::timeline::metrics(&b, n, host_launch, if one_phase { steps } else { None });
            t.metrics.extend(tl);
        }
        for k in &mut t.kernels {
            let id = st.names[&k.name] as usize;
            fill(k, &st.infos[id]);
            if let Some(a) = shaped.get(&(i, id as u32)) {
                a.fill(k);
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

/// Bytes and FLOPs from shapes of one kernel's calls.
#[derive(Default)]
struct ShapeAcc {
    calls: u64,
    bytes: f64,
    flops: f64,
    m_max: Option<f64>,
    m1_calls: u64,
    formulas: std::collections::BTreeSet<u16>,
    /// Calls that were not their op's longest kernel (no bytes of their own).
    secondary: u64,
}

impl ShapeAcc {
    fn add(&mut self, fi: u16, c: &super::shapes::Cost) {
        self.calls += 1;
        self.bytes += c.bytes;
        self.flops += c.flops;
        self.formulas.insert(fi);
        if let Some(m) = c.m {
            self.m_max = Some(self.m_max.map_or(m, |x: f64| x.max(m)));
            if m == 1.0 {
                self.m1_calls += 1;
            }
        }
    }

    /// Per-call bytes and FLOPs when every call of the kernel has them; counts otherwise.
    fn fill(&self, k: &mut KernelSample) {
        if self.calls == 0 {
            return;
        }
        let sr = super::shapes::rules();
        let names: Vec<&str> = self.formulas.iter().map(|f| sr.op[*f as usize].name.as_str()).collect();
        k.extra.insert("shapes_formula".into(), json!(names.join("+")));
        k.extra.insert("shapes_calls".into(), json!(self.calls));
        if self.calls == k.calls {
            k.bytes = Some(self.bytes / self.calls as f64);
            k.flops = Some(self.flops / self.calls as f64);
            k.extra.insert("bytes_source".into(), json!("shapes"));
        }
        if let Some(m) = self.m_max {
            k.extra.insert("shapes_m_max".into(), json!(m));
            k.extra.insert("shapes_m1_calls".into(), json!(self.m1_calls));
        }
    }
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
