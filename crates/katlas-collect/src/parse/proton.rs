//! Triton Proton profiles: the hatchet tree Proton writes by default (`data="tree"`,
//! `NAME.hatchet`).
//!
//! The file is what Proton's `TreeData::dumpHatchet` writes (Triton 3.6): a JSON array
//! `[root, devices]`. Every node is `{"frame": {"name", "type"}, "metrics": {…}, "children":
//! […]}`; the root is `ROOT` with zero placeholders. Proton scopes (`proton.scope(name)`) are
//! nodes without kernel metrics; a kernel is a node whose metrics hold `count` (launches) and
//! `time (ns)` (their summed duration), with `device_id` and `device_type`, plus the metrics a
//! kernel's `launch_metadata` or the user added (`bytes`, `flops`, `flops16`, …), summed over
//! the node's launches. The device table maps `CUDA`/`HIP` → id → `arch`, `num_sms`, clocks.
//!
//! Kernels keep the name Proton gives (the mangled symbol of a C++ kernel, the function name of
//! a Triton kernel); `OpRules::classify_all` adds the demangled form, and profile names join
//! other spellings through `katlas_advise::names::match_level`.
//!
//! Phases are scopes: with `phases` given, the innermost enclosing scope of one of those names;
//! with none, the outermost scope. Kernels outside every such scope go to `unannotated` when
//! the profile has one, else to `phase` (default `run`), as in `torch-trace`. Proton's trace
//! output (`data="trace"`, JSON objects where the tree is an array) is read by
//! [`super::proton_trace`], chosen here by the first byte.
//!
//! Hostile input: the tree is walked with an explicit stack (no recursion), nodes nested deeper
//! than [`MAX_DEPTH`] are skipped with a warning, the tree is capped at [`MAX_NODES`] nodes, and
//! each `frame`/`metrics` value at the element cap (`KATLAS_MAX_LINE_BYTES`). Broken JSON
//! structure is an error naming line, byte offset and JSON path; a node whose frame or metrics
//! do not read is skipped with a warning naming them, and the nodes beside it are kept.

use super::json_scan::{show, ScanError, Scanner};
use super::proton_trace::LAUNCH_METADATA_SCOPE;
use super::{ParseError, ParseOutput, ParserOptions};
use crate::summary::PhaseTable;
use katlas_model::{KernelSample, Metric};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead, Read};

/// Nodes nested deeper than this (the root is level 0) are skipped: Python-context call
/// stacks stay far below it, and the walk's memory stays small whatever the nesting.
pub const MAX_DEPTH: usize = 512;
/// Nodes read before the parse stops: a tree aggregates launches per context, so real
/// profiles hold thousands, and the per-node state stays under 100 MB.
pub const MAX_NODES: usize = 2_000_000;
/// Warnings kept one by one; the rest are counted.
const MAX_WARNINGS: u64 = 20;
/// Bytes and FLOPs source: the metrics of the kernel's `launch_metadata` (or the user's
/// `proton` metrics) as Proton recorded them; an estimate its author wrote, not a counter.
pub const PROTON_METRICS: &str = "proton launch metadata";
/// Non-numeric metrics kept per kernel, and the longest array among them.
const MAX_OTHER: usize = 32;
const MAX_ARRAY: usize = 256;

/// Kernel-metric fields Proton writes beside count and time: device facts and time stamps.
const KERNEL_FIELDS: &[&str] = &["count", "device_id", "device_type", "stream_id", "start_time (ns)", "end_time (ns)"];

const NONE: u32 = u32::MAX;

#[derive(Deserialize)]
struct Frame {
    #[serde(default)]
    name: Option<String>,
}

struct Node {
    parent: u32,
    name: u32,
    kernel: bool,
}

/// One kernel node's metrics.
struct KernelNode {
    node: u32,
    calls: u64,
    time_us: f64,
    numeric: Vec<(u32, f64)>,
    other: Vec<(u32, Value)>,
    device: Option<String>,
}

#[derive(Default)]
struct Tree {
    nodes: Vec<Node>,
    names: HashMap<String, u32>,
    name_list: Vec<String>,
    kernels: Vec<KernelNode>,
    /// Numeric metrics of scope nodes (`proton.scope(name, metrics)`), by node.
    scope_metrics: Vec<(u32, Vec<(u32, f64)>)>,
    warnings: Vec<String>,
    bad: u64,
    skipped_deep: u64,
}

impl Tree {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.names.get(s) {
            return i;
        }
        let i = self.name_list.len() as u32;
        self.names.insert(s.to_string(), i);
        self.name_list.push(s.to_string());
        i
    }

    fn name(&self, node: u32) -> Option<&str> {
        let n = self.nodes[node as usize].name;
        (n != NONE).then(|| self.name_list[n as usize].as_str())
    }

    fn warn(&mut self, msg: String) {
        self.bad += 1;
        if self.bad <= MAX_WARNINGS {
            self.warnings.push(msg);
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum St {
    /// After `{`: a key or `}`.
    ObjFirst,
    /// After `,` in an object: a key.
    ObjKey,
    /// After a member: `,` or `}`.
    ObjNext,
    /// After the `[` of `children`: a node or `]`.
    ArrFirst,
    /// After `,` in `children`: a node.
    ArrElem,
    /// After a child: `,` or `]`.
    ArrNext,
}

/// A node whose object is open.
struct Open {
    node: u32,
    st: St,
    /// Elements of its `children` seen so far.
    children: usize,
    /// Its place in its parent's `children`.
    index: usize,
    line: u64,
    name: Option<String>,
    metrics: Option<Map<String, Value>>,
}

/// The JSON path of the innermost open node: `[0].children[2].children[0]`.
fn path(stack: &[Open]) -> String {
    let mut p = String::from("[0]");
    for o in stack.iter().skip(1) {
        p.push_str(&format!(".children[{}]", o.index));
    }
    p
}

/// Parse with the element cap from `KATLAS_MAX_LINE_BYTES` (default 64 MiB).
pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let limits = super::Limits::from_env().map_err(|e| ParseError::new(source, None, e))?;
    parse_capped(r, source, opts, limits.max_line)
}

/// Parse a hatchet tree whose `frame` and `metrics` values are at most `max_element` bytes each.
pub fn parse_capped(r: &mut dyn BufRead, source: &str, opts: &ParserOptions, max_element: usize) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("proton", source);
    let mut sc = Scanner::with_limit(r, max_element);
    let mut tree = Tree::default();
    let top = |e: ScanError| e.into_parse(source, "top level");
    match sc.peek().map_err(top)? {
        Some(b'[') => sc.bump(),
        // Proton's trace output (`data="trace"`): one JSON object per stream.
        Some(b'{') => return super::proton_trace::parse_scanner(&mut sc, source, opts),
        // MessagePack's fixarray and array headers: the binary tree later Proton versions write.
        Some(0x90..=0x9f | 0xdc | 0xdd) => {
            return Err(ParseError::new(
                source,
                Some(1),
                "MessagePack, not JSON: a binary hatchet tree is not read; write the JSON tree (Proton's default in Triton 3.6)",
            ))
        }
        Some(b) => return Err(top(sc.err(format!("expected `[` (Proton's hatchet tree is a JSON array), found {}", show(b))))),
        None => return Err(ParseError::new(source, None, "empty input: no Proton hatchet tree")),
    }
    let mut index = 0usize;
    let mut more = match sc.peek().map_err(top)? {
        Some(b']') => {
            sc.bump();
            false
        }
        _ => true,
    };
    let mut devices: Option<Map<String, Value>> = None;
    while more {
        let at = format!("[{index}]");
        let e = |err: ScanError| err.into_parse(source, &at);
        let b = sc.peek().map_err(e)?;
        let (line, offset) = (sc.line(), sc.offset());
        match (index, b) {
            (0, Some(b'{')) => read_tree(&mut sc, &mut tree, source)?,
            (0, Some(b)) => return Err(e(sc.err(format!("expected the tree's root node (an object), found {}", show(b))))),
            (1, _) => match serde_json::from_slice::<Map<String, Value>>(sc.value().map_err(e)?) {
                Ok(m) => devices = Some(m),
                Err(err) => tree.warn(format!("{source}:{line}: [1]: device table not read: {err} (byte offset {offset})")),
            },
            _ => {
                sc.value().map_err(e)?;
                tree.warn(format!("{source}:{line}: [{index}]: not part of Proton's `[tree, devices]`; ignored (byte offset {offset})"));
            }
        }
        index += 1;
        more = sc.next_or_close(b']', &format!("element [{}]", index - 1)).map_err(top)?;
    }
    if index == 0 {
        return Err(ParseError::new(source, Some(sc.line()), "an empty array: no Proton hatchet tree"));
    }
    if let Some(b) = sc.peek().map_err(top)? {
        return Err(top(sc.err(format!("trailing data after the top-level array: {}", show(b)))));
    }
    if tree.skipped_deep > 0 {
        tree.warnings.push(format!("{source}: {} subtrees nested deeper than {MAX_DEPTH} levels skipped", tree.skipped_deep));
    }
    if tree.bad > MAX_WARNINGS {
        tree.warnings.push(format!("{source}: {} nodes or values skipped in all", tree.bad));
    }
    if tree.kernels.is_empty() {
        tree.warnings.push(format!("{source}: no kernel node (a node with `count` and `time (ns)` metrics): nothing was profiled"));
    }
    out.warnings.append(&mut tree.warnings);
    if let Some(d) = devices {
        device_facts(&mut out, d);
    }
    finish(&mut out, tree, opts);
    Ok(out)
}

/// Walk the tree whose root object starts at the cursor, keeping what each node holds.
fn read_tree<R: Read>(sc: &mut Scanner<R>, t: &mut Tree, source: &str) -> Result<(), ParseError> {
    let mut stack: Vec<Open> = Vec::new();
    let line = sc.line();
    sc.bump();
    t.nodes.push(Node { parent: NONE, name: NONE, kernel: false });
    stack.push(Open { node: 0, st: St::ObjFirst, children: 0, index: 0, line, name: None, metrics: None });
    while let Some(top) = stack.last() {
        let st = top.st;
        let at = || path(&stack);
        let b = sc.peek().map_err(|e| e.into_parse(source, &at()))?;
        match (st, b) {
            (St::ObjFirst, Some(b'}')) | (St::ObjNext, Some(b'}')) => {
                sc.bump();
                let open = stack.pop().expect("a node is open");
                close(t, open, &stack, source);
            }
            (St::ObjNext, Some(b',')) => {
                sc.bump();
                stack.last_mut().expect("a node is open").st = St::ObjKey;
            }
            (St::ObjFirst | St::ObjKey, Some(b'"')) => {
                let (line, offset) = (sc.line(), sc.offset());
                let key: String = serde_json::from_slice(sc.value().map_err(|e| e.into_parse(source, &at()))?)
                    .map_err(|err| ParseError::new(source, Some(line), format!("{}: an object key that does not read: {err} (byte offset {offset})", at())))?;
                sc.expect(b':').map_err(|e| e.into_parse(source, &format!("{}.{key}", at())))?;
                member(sc, t, &mut stack, &key, source)?;
            }
            (St::ArrFirst, Some(b']')) | (St::ArrNext, Some(b']')) => {
                sc.bump();
                stack.last_mut().expect("a node is open").st = St::ObjNext;
            }
            (St::ArrNext, Some(b',')) => {
                sc.bump();
                stack.last_mut().expect("a node is open").st = St::ArrElem;
            }
            (St::ArrFirst | St::ArrElem, Some(b)) => {
                let (line, offset) = (sc.line(), sc.offset());
                let (index, parent) = (top.children, top.node);
                // Paths are built only for messages: a walk stays linear in the nodes.
                let child = || format!("{}.children[{index}]", path(&stack));
                let descend = b == b'{' && stack.len() <= MAX_DEPTH;
                if b != b'{' {
                    sc.skip().map_err(|e| e.into_parse(source, &child()))?;
                    t.warn(format!("{source}:{line}: {}: not a node (an object); skipped (byte offset {offset})", child()));
                } else if !descend {
                    sc.skip().map_err(|e| e.into_parse(source, &child()))?;
                    t.skipped_deep += 1;
                    if t.skipped_deep == 1 {
                        t.warn(format!("{source}:{line}: {}: nested deeper than {MAX_DEPTH} levels; the subtree is skipped (byte offset {offset})", child()));
                    }
                } else if t.nodes.len() >= MAX_NODES {
                    let msg = format!("{}: the tree has more than {MAX_NODES} nodes; stopped (byte offset {offset})", child());
                    return Err(ParseError::new(source, Some(line), msg));
                }
                let top = stack.last_mut().expect("a node is open");
                top.children += 1;
                top.st = St::ArrNext;
                if descend {
                    sc.bump();
                    let node = t.nodes.len() as u32;
                    t.nodes.push(Node { parent, name: NONE, kernel: false });
                    stack.push(Open { node, st: St::ObjFirst, children: 0, index, line, name: None, metrics: None });
                }
            }
            (_, Some(b)) => {
                let want = match st {
                    St::ObjFirst => "an object key or `}`",
                    St::ObjKey => "an object key",
                    St::ObjNext => "`,` or `}` after a member",
                    _ => "`,` or `]` after a node",
                };
                return Err(sc.err(format!("expected {want}, found {}", show(b))).into_parse(source, &at()));
            }
            (_, None) => return Err(sc.err("truncated: the node is not closed before end of input").into_parse(source, &at())),
        }
    }
    Ok(())
}

/// One member of the innermost open node, its key read.
fn member<R: Read>(sc: &mut Scanner<R>, t: &mut Tree, stack: &mut [Open], key: &str, source: &str) -> Result<(), ParseError> {
    // Paths are built only for messages: a walk stays linear in the nodes.
    let at = |stack: &[Open]| format!("{}.{key}", path(stack));
    sc.peek().map_err(|e| e.into_parse(source, &at(stack)))?;
    let (line, offset) = (sc.line(), sc.offset());
    let mut st = St::ObjNext;
    let (mut name, mut metrics) = (None, None);
    match key {
        "children" => {
            if sc.peek().map_err(|e| e.into_parse(source, &at(stack)))? == Some(b'[') {
                sc.bump();
                st = St::ArrFirst;
            } else {
                sc.skip().map_err(|e| e.into_parse(source, &at(stack)))?;
                t.warn(format!("{source}:{line}: {}: not an array; skipped (byte offset {offset})", at(stack)));
            }
        }
        "frame" => match serde_json::from_slice::<Frame>(sc.value().map_err(|e| e.into_parse(source, &at(stack)))?) {
            Ok(f) => name = Some(f.name),
            Err(err) => t.warn(format!("{source}:{line}: {}: {err}; the node's name is unknown (byte offset {offset})", at(stack))),
        },
        "metrics" => match serde_json::from_slice::<Map<String, Value>>(sc.value().map_err(|e| e.into_parse(source, &at(stack)))?) {
            Ok(m) => metrics = Some(m),
            Err(err) => t.warn(format!("{source}:{line}: {}: {err}; the node's metrics are skipped (byte offset {offset})", at(stack))),
        },
        _ => sc.skip().map_err(|e| e.into_parse(source, &at(stack)))?,
    }
    let top = stack.last_mut().expect("a node is open");
    top.st = st;
    if let Some(n) = name {
        top.name = n;
    }
    if metrics.is_some() {
        top.metrics = metrics;
    }
    Ok(())
}

/// Keep a closed node (`stack`: the nodes still open above it): its name, and its metrics as a
/// kernel's or a scope's.
fn close(t: &mut Tree, open: Open, stack: &[Open], source: &str) {
    let line = open.line;
    let at = || if stack.is_empty() { "[0]".to_string() } else { format!("{}.children[{}]", path(stack), open.index) };
    if let Some(n) = &open.name {
        let id = t.intern(n);
        t.nodes[open.node as usize].name = id;
    }
    // The root's metrics are zero placeholders for hatchet's inclusive columns.
    let Some(m) = open.metrics.as_ref().filter(|_| !stack.is_empty()) else { return };
    match kernel_metrics(m) {
        Ok(Some(mut k)) => {
            if open.name.as_deref().is_none_or(str::is_empty) {
                t.warn(format!("{source}:{line}: {}: a kernel node (`count`, `time`) without `frame.name`; skipped", at()));
                return;
            }
            k.node = open.node;
            t.nodes[open.node as usize].kernel = true;
            k.numeric = metric_values(t, m, &mut k.other);
            t.kernels.push(k);
        }
        Ok(None) => {
            let mut other = Vec::new();
            let numeric = metric_values(t, m, &mut other);
            if !numeric.is_empty() {
                t.scope_metrics.push((open.node, numeric));
            }
        }
        Err(why) => t.warn(format!("{source}:{line}: {}.metrics: {why}; the node's metrics are skipped", at())),
    }
}

/// `name (unit)` → (`name`, `unit`).
fn split_unit(key: &str) -> (&str, Option<&str>) {
    match key.strip_suffix(')').and_then(|k| k.rsplit_once(" (")) {
        Some((name, unit)) => (name, Some(unit)),
        None => (key, None),
    }
}

/// Microseconds per unit of a time metric.
fn us_per(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1e-3,
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        _ => return None,
    })
}

/// The kernel metric of a node (`count` and `time (ns)`), `None` when it has none.
fn kernel_metrics(m: &Map<String, Value>) -> Result<Option<KernelNode>, String> {
    let time = m.iter().find(|(k, _)| split_unit(k).0 == "time");
    let count = m.get("count");
    let (count, (time_key, time)) = match (count, time) {
        (None, None) => return Ok(None),
        (Some(_), None) => return Err("`count` without `time (ns)`".into()),
        (None, Some((k, _))) => return Err(format!("`{k}` without `count`")),
        (Some(c), Some(t)) => (c, t),
    };
    let calls = match count.as_u64().or_else(|| count.as_f64().filter(|v| *v >= 0.0 && v.fract() == 0.0 && *v < 1.8e19).map(|v| v as u64)) {
        Some(c) => c,
        None => return Err(format!("`count` is not a launch count: {count}")),
    };
    let factor = match split_unit(time_key).1 {
        Some(u) => us_per(u).ok_or_else(|| format!("`{time_key}`: unknown time unit `{u}`"))?,
        None => return Err(format!("`{time_key}` names no unit")),
    };
    let time_us = match time.as_f64().filter(|v| v.is_finite() && *v >= 0.0) {
        Some(v) => v * factor,
        None => return Err(format!("`{time_key}` is not a duration: {time}")),
    };
    if calls == 0 {
        return if time_us == 0.0 { Ok(None) } else { Err(format!("`count` is 0 with `{time_key}` {time}")) };
    }
    let device = match (m.get("device_type").and_then(Value::as_str), m.get("device_id")) {
        (Some(ty), Some(Value::String(id))) => Some(format!("{ty}:{id}")),
        (Some(ty), Some(Value::Number(id))) => Some(format!("{ty}:{id}")),
        _ => None,
    };
    Ok(Some(KernelNode { node: NONE, calls, time_us, numeric: Vec::new(), other: Vec::new(), device }))
}

/// A node's metrics other than the kernel metric: numbers by interned name; strings and short
/// arrays (Proton's vector metrics) into `other`.
fn metric_values(t: &mut Tree, m: &Map<String, Value>, other: &mut Vec<(u32, Value)>) -> Vec<(u32, f64)> {
    let mut numeric = Vec::new();
    for (k, v) in m {
        if KERNEL_FIELDS.contains(&k.as_str()) || split_unit(k).0 == "time" {
            continue;
        }
        match v {
            Value::Number(n) => {
                if let Some(x) = n.as_f64().filter(|x| x.is_finite()) {
                    numeric.push((t.intern(k), x));
                }
            }
            Value::String(_) | Value::Bool(_) if other.len() < MAX_OTHER => other.push((t.intern(k), v.clone())),
            Value::Array(a) if a.len() <= MAX_ARRAY && other.len() < MAX_OTHER => other.push((t.intern(k), v.clone())),
            _ => {}
        }
    }
    numeric
}

/// `arch` and the device table from Proton's `{"CUDA": {"0": {"arch": "90", …}}}`.
fn device_facts(out: &mut ParseOutput, devices: Map<String, Value>) {
    let mut archs = BTreeSet::new();
    for (ty, ids) in &devices {
        let Some(ids) = ids.as_object() else { continue };
        for d in ids.values() {
            let arch = match d.get("arch") {
                Some(Value::String(a)) => a.clone(),
                Some(Value::Number(a)) => a.to_string(),
                _ => continue,
            };
            // CUDA devices give the compute capability (`90`), HIP ones the target (`gfx942`).
            archs.insert(if ty == "CUDA" && arch.bytes().all(|b| b.is_ascii_digit()) { format!("sm_{arch}") } else { arch });
        }
    }
    if archs.len() == 1 {
        out.route.insert("arch".into(), json!(archs.pop_first()));
    }
    out.artifacts.insert("proton_devices".into(), Value::Object(devices));
}

/// One kernel name's nodes in one phase.
#[derive(Default)]
struct Agg {
    calls: u64,
    time_us: f64,
    nodes: u64,
    /// Numeric metrics: (sum, calls of the nodes that have it).
    sums: BTreeMap<u32, (f64, u64)>,
    other: BTreeMap<u32, Value>,
    devices: BTreeSet<String>,
}

/// One phase's kernels: name, its kernels by name id, and their places.
type PhaseAgg = (String, Vec<(u32, Agg)>, HashMap<u32, usize>);

/// Flexible metrics the launch hook reads (`triton.profiler.hooks.launch.LaunchHook.metrics`).
const FLOPS_WIDTHS: &[&str] = &["flops8", "flops16", "flops32", "flops64"];

fn finish(out: &mut ParseOutput, t: Tree, opts: &ParserOptions) {
    let default_phase = opts.phase.clone().unwrap_or_else(|| "run".into());
    let n = t.nodes.len();
    // Parents come before children (ids are given as nodes open), so one forward pass resolves
    // each node's innermost named phase scope, its outermost scope, and the hook's own scope.
    let mut known: Vec<u32> = vec![NONE; n];
    let mut outer: Vec<u32> = vec![NONE; n];
    let mut hook: Vec<bool> = vec![false; n];
    for i in 1..n {
        let node = &t.nodes[i];
        let p = node.parent as usize;
        let name = t.name(i as u32);
        hook[i] = hook[p] || name == Some(LAUNCH_METADATA_SCOPE);
        let scope = !node.kernel && name.is_some_and(|s| !s.is_empty()) && !hook[i];
        known[i] = if scope && opts.phases.iter().any(|ph| Some(ph.as_str()) == name) { node.name } else { known[p] };
        outer[i] = if outer[p] != NONE {
            outer[p]
        } else if scope {
            node.name
        } else {
            NONE
        };
    }
    let phase_of = if opts.phases.is_empty() { &outer } else { &known };
    let unphased = if phase_of.iter().any(|&p| p != NONE) { "unannotated".to_string() } else { default_phase };
    let mut phases: Vec<PhaseAgg> = Vec::new();
    let mut slot = |name: &str| -> usize {
        match phases.iter().position(|p| p.0 == name) {
            Some(i) => i,
            None => {
                phases.push((name.to_string(), Vec::new(), HashMap::new()));
                phases.len() - 1
            }
        }
    };
    let (mut dispatches, mut gpu_us, mut hook_calls) = (0u64, 0.0f64, 0u64);
    let all_devices: BTreeSet<&str> = t.kernels.iter().filter_map(|k| k.device.as_deref()).collect();
    let mut placed = Vec::with_capacity(t.kernels.len());
    for k in &t.kernels {
        let parent = t.nodes[k.node as usize].parent as usize;
        if hook[parent] {
            hook_calls += k.calls;
            continue;
        }
        let ph = phase_of[parent];
        let phase = if ph == NONE { unphased.as_str() } else { &t.name_list[ph as usize] };
        placed.push((slot(phase), k));
    }
    for (p, k) in placed {
        let name = t.nodes[k.node as usize].name;
        let (_, aggs, index) = &mut phases[p];
        let i = *index.entry(name).or_insert_with(|| {
            aggs.push((name, Agg::default()));
            aggs.len() - 1
        });
        let a = &mut aggs[i].1;
        a.calls += k.calls;
        a.time_us += k.time_us;
        a.nodes += 1;
        for (m, v) in &k.numeric {
            let e = a.sums.entry(*m).or_default();
            e.0 += v;
            e.1 += k.calls;
        }
        for (m, v) in &k.other {
            a.other.entry(*m).or_insert_with(|| v.clone());
        }
        a.devices.extend(k.device.clone());
        dispatches += k.calls;
        gpu_us += k.time_us;
    }
    let id = |s: &str| t.names.get(s).copied();
    for (phase, aggs, _) in phases {
        let mut table = PhaseTable::new(&phase);
        for (name, a) in aggs {
            table.kernels.push(sample(&t, id, &t.name_list[name as usize], a, all_devices.len() > 1));
        }
        table.kernels.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| b.calls.cmp(&a.calls)));
        table.launches = Some(table.kernels.iter().map(|k| k.calls).sum());
        table.finish();
        out.phases.push(table);
    }
    // A scope's own metrics (`proton.scope(name, metrics)`) belong to the phase it is in.
    for (node, metrics) in &t.scope_metrics {
        let i = *node as usize;
        if hook[i] {
            continue;
        }
        let ph = if phase_of[i] == NONE { unphased.clone() } else { t.name_list[phase_of[i] as usize].clone() };
        let table = out.phase_mut(&ph);
        for (m, v) in metrics {
            let key = &t.name_list[*m as usize];
            let (base, unit) = split_unit(key);
            let e = table.metrics.entry(format!("proton.{base}")).or_insert_with(|| Metric::new(0.0, unit));
            e.value += v;
        }
    }
    out.metrics.insert("kernel_dispatches".into(), Metric::new(dispatches as f64, Some("dispatches")));
    out.metrics.insert("gpu_kernel_us".into(), Metric::new(gpu_us, Some("us")));
    if hook_calls > 0 {
        out.artifacts.insert("proton_launch_metadata_dispatches".into(), json!(hook_calls));
    }
    let types: BTreeSet<&str> = all_devices.iter().filter_map(|d| d.split(':').next()).collect();
    if types.len() == 1 {
        out.route.insert("device_type".into(), json!(types.first()));
    }
    if all_devices.len() > 1 {
        out.route.insert("devices".into(), json!(all_devices));
    }
}

/// A kernel's sample: calls and time as Proton summed them, its other metrics per launch.
fn sample(t: &Tree, id: impl Fn(&str) -> Option<u32>, name: &str, a: Agg, devices: bool) -> KernelSample {
    let mut k = KernelSample { name: name.to_string(), calls: a.calls, total_us: a.time_us, ..Default::default() };
    let per_call = |m: Option<u32>| m.and_then(|m| a.sums.get(&m)).filter(|(_, calls)| *calls == a.calls).map(|(sum, _)| sum / a.calls as f64);
    // Bytes and FLOPs only when every launch carried them.
    if let Some(b) = per_call(id("bytes")) {
        k.bytes = Some(b);
        k.extra.insert("bytes_source".into(), json!(PROTON_METRICS));
        if a.time_us > 0.0 {
            // bytes / us = MB/s; / 1000 = GB/s (decimal).
            k.achieved_gbps = Some(b * a.calls as f64 / a.time_us / 1000.0);
        }
    }
    let widths: Vec<(&str, f64)> = FLOPS_WIDTHS.iter().filter_map(|w| per_call(id(w)).map(|v| (*w, v))).collect();
    let flops = match per_call(id("flops")) {
        Some(f) => Some((f, "flops".to_string())),
        None if !widths.is_empty() => Some((widths.iter().map(|w| w.1).sum(), widths.iter().map(|w| w.0).collect::<Vec<_>>().join("+"))),
        None => None,
    };
    if let Some((f, from)) = flops {
        k.flops = Some(f);
        k.extra.insert("flops_source".into(), json!(format!("{PROTON_METRICS} ({from})")));
    }
    for (m, (sum, calls)) in &a.sums {
        if *calls > 0 {
            k.counters.insert(t.name_list[*m as usize].clone(), sum / *calls as f64);
        }
    }
    if !k.counters.is_empty() {
        k.extra.insert("counter_units".into(), json!("per-launch mean: Proton's sum over the launches divided by their count"));
    }
    if !a.other.is_empty() {
        let other: Map<String, Value> = a.other.into_iter().map(|(m, v)| (t.name_list[m as usize].clone(), v)).collect();
        k.extra.insert("proton_metrics".into(), Value::Object(other));
    }
    if a.nodes > 1 {
        // Several contexts (sub-scopes, Python call paths) launched it.
        k.extra.insert("proton_nodes".into(), json!(a.nodes));
    }
    if devices && !a.devices.is_empty() {
        k.extra.insert("devices".into(), json!(a.devices));
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
        run_bytes(text.as_bytes(), opts)
    }

    fn run_bytes(mut bytes: &[u8], opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
        parse_capped(&mut bytes, "t.hatchet", opts, 1 << 20)
    }

    fn node(name: &str, metrics: &str, children: &[String]) -> String {
        format!(r#"{{"children": [{}], "frame": {{"name": "{name}", "type": "function"}}, "metrics": {{{metrics}}}}}"#, children.join(","))
    }

    fn kernel(name: &str, count: u64, ns: u64, more: &str) -> String {
        node(name, &format!(r#""count": {count}, "device_id": "0", "device_type": "CUDA", "time (ns)": {ns}{more}"#), &[])
    }

    fn doc(children: &[String]) -> String {
        format!(r#"[{}, {{"CUDA": {{"0": {{"arch": "90", "num_sms": 132}}}}}}]"#, node("ROOT", r#""count": 0, "time (ns)": 0"#, children))
    }

    #[test]
    fn scopes_become_phases_and_kernels_outside_are_unannotated() {
        let text = doc(&[
            node("decode", "", &[kernel("k", 4, 8000, ""), node("layer", "", &[kernel("k", 2, 2000, "")])]),
            node("prefill", "", &[kernel("k", 1, 5000, "")]),
            kernel("outside", 1, 1000, ""),
        ]);
        let o = run(&text, &ParserOptions::default()).unwrap();
        let d = o.phase("decode").unwrap();
        let k = d.kernel("k").unwrap();
        assert_eq!((k.calls, k.total_us, k.avg_us), (6, 10.0, Some(10.0 / 6.0)));
        assert_eq!(k.extra["proton_nodes"], 2);
        assert_eq!(o.phase("prefill").unwrap().kernel("k").unwrap().calls, 1);
        assert_eq!(o.phase("unannotated").unwrap().kernel("outside").unwrap().calls, 1);
        assert_eq!(o.route["arch"], "sm_90");
        assert_eq!(o.metric("kernel_dispatches"), Some(8.0));
        // Named phases: the innermost scope of one of those names; other kernels unannotated.
        let o = run(&text, &ParserOptions { phases: vec!["layer".into()], ..Default::default() }).unwrap();
        assert_eq!(o.phase("layer").unwrap().kernel("k").unwrap().calls, 2);
        assert_eq!(o.phase("unannotated").unwrap().kernel("k").unwrap().calls, 5);
        // No scope at all: the default phase, as torch-trace.
        let o = run(&doc(&[kernel("k", 3, 3000, "")]), &ParserOptions { phase: Some("decode".into()), ..Default::default() }).unwrap();
        assert_eq!(o.phases.len(), 1);
        assert_eq!(o.phase("decode").unwrap().kernel("k").unwrap().calls, 3);
    }

    #[test]
    fn launch_metadata_bytes_and_flops_are_per_launch_and_say_their_source() {
        let text = doc(&[node(
            "decode",
            r#""flops": 100"#,
            &[kernel("matmul", 4, 4000, r#", "bytes": 4000000, "flops16": 800, "tag": "x""#), kernel("copy", 2, 1000, "")],
        )]);
        let o = run(&text, &ParserOptions::default()).unwrap();
        let p = o.phase("decode").unwrap();
        let m = p.kernel("matmul").unwrap();
        assert_eq!(m.bytes, Some(1e6));
        assert_eq!(m.extra["bytes_source"], PROTON_METRICS);
        // 4 MB over 4 us: 1000 GB/s.
        assert!((m.achieved_gbps.unwrap() - 1000.0).abs() < 1e-9);
        assert_eq!(m.flops, Some(200.0));
        assert_eq!(m.counters["flops16"], 200.0);
        assert_eq!(m.extra["proton_metrics"]["tag"], "x");
        let c = p.kernel("copy").unwrap();
        assert_eq!((c.bytes, c.flops), (None, None));
        assert!(c.counters.is_empty());
        assert_eq!(p.metrics["proton.flops"].value, 100.0);
    }

    #[test]
    fn bytes_only_when_every_launch_has_them() {
        let text = doc(&[node("decode", "", &[kernel("k", 1, 1000, r#", "bytes": 10"#), node("s", "", &[kernel("k", 1, 1000, "")])])]);
        let k = run(&text, &ParserOptions::default()).unwrap().phase("decode").unwrap().kernel("k").unwrap().clone();
        assert_eq!(k.bytes, None);
        assert_eq!(k.counters["bytes"], 10.0, "the mean over the launches that had it");
    }

    #[test]
    fn the_launch_hooks_own_scope_is_left_out() {
        let text = doc(&[node("decode", "", &[kernel("k", 1, 1000, ""), node(LAUNCH_METADATA_SCOPE, "", &[kernel("sum", 1, 500, "")])])]);
        let o = run(&text, &ParserOptions::default()).unwrap();
        assert_eq!(o.phases.len(), 1);
        assert!(o.phase("decode").unwrap().kernel("sum").is_none());
        assert_eq!(o.artifacts["proton_launch_metadata_dispatches"], 1);
    }

    #[test]
    fn keys_in_any_order_and_minified() {
        let text = r#"[{"frame":{"name":"ROOT"},"metrics":{},"children":[{"metrics":{"time (ns)":2000,"count":2},"frame":{"name":"k"}}]}]"#;
        let o = run(text, &ParserOptions::default()).unwrap();
        assert_eq!(o.phase("run").unwrap().kernel("k").unwrap().total_us, 2.0);
        assert!(!o.route.contains_key("arch"));
    }

    #[test]
    fn bad_nodes_are_warnings_naming_line_and_path_and_the_rest_is_kept() {
        let text = doc(&[node(
            "decode",
            "",
            &[
                kernel("good", 1, 1000, ""),
                node("no_count", r#""time (ns)": 5"#, &[]),
                node("neg", r#""count": 1, "time (ns)": -5"#, &[]),
                node("unit", r#""count": 1, "time (parsec)": 5"#, &[]),
                r#"{"frame": 7, "metrics": {"count": 1, "time (ns)": 1}}"#.to_string(),
                "42".to_string(),
                node("inner", "", &[kernel("kept", 1, 1000, "")]),
            ],
        )]);
        let o = run(&text, &ParserOptions::default()).unwrap();
        let p = o.phase("decode").unwrap();
        let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains(&"good") && names.contains(&"kept"));
        let w = o.warnings.join("\n");
        assert!(w.contains("t.hatchet:1: [0].children[0].children[1].metrics: `time (ns)` without `count`"), "{w}");
        assert!(w.contains("[0].children[0].children[2].metrics: `time (ns)` is not a duration: -5"), "{w}");
        assert!(w.contains("unknown time unit `parsec`"), "{w}");
        assert!(w.contains("[0].children[0].children[4].frame: invalid type: integer `7`"), "{w}");
        assert!(w.contains("[0].children[0].children[5]: not a node (an object); skipped"), "{w}");
    }

    #[test]
    fn broken_structure_is_an_error_naming_line_offset_and_path() {
        let text = doc(&[node("decode", "", &[kernel("k", 1, 1000, "")])])
            .replace(r#""type": "function"}, "metrics": {"count""#, r#""type": "function"} "metrics": {"count""#);
        let e = run(&text, &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with("t.hatchet:1: [0].children[0].children[0]: expected `,` or `}` after a member, found `\"`"), "{e}");
        assert!(e.contains("byte offset"), "{e}");
        let e = run(&doc(&[])[..40], &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        // An object is Proton's trace output, read by `proton_trace`.
        let o = run(r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]}"#, &ParserOptions::default()).unwrap();
        assert_eq!((o.parser.as_str(), &o.artifacts["proton_data"]), ("proton", &json!("trace")));
        assert_eq!(o.phase("run").unwrap().kernel("k").unwrap().total_us, 2.0);
        let e = run_bytes(b"\x92\x83\xa5frame", &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("MessagePack, not JSON"), "{e}");
        let e = run("[1, {}]", &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("[0]: expected the tree's root node (an object), found `1`"), "{e}");
        let e = run("[]", &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("an empty array"), "{e}");
        let e = run(&format!("{} x", doc(&[])), &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("trailing data"), "{e}");
    }

    #[test]
    fn deep_nests_are_skipped_without_recursion() {
        // 100,000 levels of scopes: far past the depth cap, and past any stack a recursive walk has.
        let depth = 100_000;
        let mut text = String::from(r#"[{"frame": {"name": "ROOT"}, "children": ["#);
        text += &kernel("top", 1, 1000, "");
        text += ", ";
        for _ in 0..depth {
            text += r#"{"frame": {"name": "s"}, "children": ["#;
        }
        for _ in 0..depth {
            text += "]}";
        }
        text += "]}]";
        let o = run(&text, &ParserOptions::default()).unwrap();
        assert_eq!(o.phases[0].kernels[0].name, "top");
        let w = o.warnings.join("\n");
        assert!(w.contains(&format!("nested deeper than {MAX_DEPTH} levels; the subtree is skipped")), "{w}");
        // Kernels down to the cap are kept.
        let mut text = String::from(r#"[{"frame": {"name": "ROOT"}, "children": ["#);
        for _ in 0..MAX_DEPTH - 1 {
            text += r#"{"frame": {"name": "s"}, "children": ["#;
        }
        text += &kernel("deep", 1, 1000, "");
        for _ in 0..MAX_DEPTH - 1 {
            text += "]}";
        }
        text += "]}]";
        let o = run(&text, &ParserOptions::default()).unwrap();
        assert_eq!(o.phase("s").unwrap().kernels[0].name, "deep");
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
    }

    #[test]
    fn a_value_past_the_element_cap_is_an_error() {
        let text = doc(&[kernel(&"k".repeat(2 << 20), 1, 1000, "")]);
        let e = run(&text, &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("[0].children[0].frame: value starting here is longer than the 1048576-byte limit (KATLAS_MAX_LINE_BYTES)"), "{e}");
    }
}
