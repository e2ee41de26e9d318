//! A rocprofv3 output directory read as one view: `kernel_trace.csv` (per-dispatch times),
//! `counter_collection.csv` (counters and register/LDS resources) and `agent_info.csv` (the
//! device) joined per dispatch, so each kernel gets time, bytes and the product it ran on.
//!
//! Files of one run share a directory and a name prefix (`238_kernel_trace.csv`,
//! `pmc_1/238_counter_collection.csv` is another pass, hence another run); the walk goes
//! down four levels (`host/pid/pmc_N/`). Dispatches join on `Dispatch_Id` when both files
//! have it, else on `Correlation_Id`. A dispatch in one file and not the other stays in the
//! view (time without counters, or counters without time) and is a warning line naming the
//! file and line; a dispatch whose two files disagree on the kernel keeps its time and its
//! counters are reported, not used. Bytes come from `data/amd_counters.toml`
//! ([`crate::amd_counters`]) for the arch family agent_info names. Given one file of another
//! name, or a stream, the parser reads that CSV alone (a trace, or counters by its header).

use super::csvutil::{self, field, line_of, num, uint, Header};
use super::input::{self, Framing, Limits};
use super::rocprof::{is_header, kernel_name, phase_name, V3Cols};
use super::{ParseError, ParseOutput, ParserOptions};
use crate::amd_counters::{self, Direction, Family};
use crate::summary::{KernelAcc, PhaseAcc, PhaseTable};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

const TRACE: &str = "kernel_trace.csv";
const COUNTERS: &str = "counter_collection.csv";
const AGENTS: &str = "agent_info.csv";
/// Per-dispatch warnings shown before they are only counted.
const SHOWN: u64 = 20;

#[derive(Debug, Default)]
struct Run {
    traces: Vec<PathBuf>,
    counters: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
struct Agent {
    arch: String,
    product: Option<String>,
    file: String,
}

/// One dispatch of a counter collection: its counters summed over the file's rows.
struct CounterDispatch {
    file: usize,
    line: u64,
    dispatch: Option<u64>,
    correlation: Option<u64>,
    name: String,
    agent: Option<u64>,
    counters: BTreeMap<String, f64>,
    rec: csv::ByteRecord,
    joined: bool,
}

/// The join key of a counter dispatch (its Dispatch_Id or its Correlation_Id).
type KeyOf = fn(&CounterDispatch) -> Option<u64>;

#[derive(Default)]
struct Side {
    sum: f64,
    n: u64,
    from: Option<String>,
}

#[derive(Default)]
struct ByteAcc {
    read: Side,
    write: Side,
}

/// Bytes read and written per kernel, from each dispatch's counters through the counter
/// table: per-call means of each direction, so FETCH_SIZE of one pass and WRITE_SIZE of
/// another still make a kernel's bytes. The rocpd parser uses it too.
#[derive(Default)]
pub(super) struct KernelBytes {
    by_kernel: HashMap<String, ByteAcc>,
}

impl KernelBytes {
    /// One dispatch's counters; whether they gave bytes of either direction.
    pub(super) fn add(&mut self, kernel: &str, counters: &BTreeMap<String, f64>, family: Option<&'static Family>) -> bool {
        let t = amd_counters::table();
        let b = self.by_kernel.entry(kernel.to_string()).or_default();
        let mut any = false;
        for (dir, side) in [(Direction::Read, &mut b.read), (Direction::Write, &mut b.write)] {
            if let Some(x) = t.bytes(counters, family, dir) {
                side.sum += x.bytes;
                side.n += 1;
                side.from.get_or_insert(x.from);
                any = true;
            }
        }
        any
    }

    /// Bytes, bandwidth and where they came from, on the table's kernels.
    pub(super) fn apply(&self, table: &mut PhaseTable) {
        for k in &mut table.kernels {
            let Some(b) = self.by_kernel.get(&k.name) else { continue };
            let mean = |s: &Side| (s.n > 0).then(|| s.sum / s.n as f64);
            if let Some(r) = mean(&b.read) {
                k.extra.insert("bytes_read".into(), json!(r));
            }
            if let Some(w) = mean(&b.write) {
                k.extra.insert("bytes_write".into(), json!(w));
            }
            if let (Some(r), Some(w)) = (mean(&b.read), mean(&b.write)) {
                k.bytes = Some(r + w);
                k.achieved_gbps = k.avg_us.filter(|a| *a > 0.0).map(|a| (r + w) / a / 1000.0);
                k.extra.insert("bytes_source".into(), json!("counters"));
                let from = [&b.read.from, &b.write.from].iter().filter_map(|f| f.as_deref()).collect::<Vec<_>>().join(" + ");
                k.extra.insert("bytes_counters".into(), json!(from));
            }
        }
    }
}

/// The warning for counters of which none gave bytes: what was collected, and what to collect.
pub(super) fn no_bytes_warning(shown: &str, names: &std::collections::BTreeSet<String>, family: Option<&Family>) -> String {
    let t = amd_counters::table();
    let has = |n: &str| names.contains(n);
    let why = match family {
        Some(f) if t.knows_any(&has) => format!("the {} counters are incomplete (missing {})", f.name, f.missing(&has).join(", ")),
        _ => format!("collected: {}", names.iter().cloned().collect::<Vec<_>>().join(", ")),
    };
    format!("{shown}: no counters give bytes ({why}): collect FETCH_SIZE and WRITE_SIZE for bytes and bandwidth")
}

struct View<'a> {
    out: ParseOutput,
    acc: PhaseAcc,
    bytes: KernelBytes,
    agents: &'a BTreeMap<u64, Agent>,
    agent_calls: BTreeMap<u64, u64>,
    unknown_agents: BTreeMap<u64, String>,
    any_bytes: bool,
}

/// Parse a rocprofv3 output directory (or the directory of one of its files).
pub fn parse(path: &Path, opts: &ParserOptions, limits: &Limits) -> Result<ParseOutput, ParseError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| ParseError::new(&shown, None, e.to_string()))?;
    if !meta.is_dir() {
        // A device or FIFO is refused like every parser's input; a rocprofv3 file stands for
        // its directory, any other file is read alone.
        katlas_corpus::input::open_regular(path).map_err(|e| ParseError::new(&shown, None, e.to_string()))?;
        let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if ![TRACE, COUNTERS, AGENTS].iter().any(|s| name.ends_with(s)) {
            let mut r = input::open_file(path, Framing::Csv, limits).map_err(|e| ParseError::new(&shown, None, e.to_string()))?;
            return parse_stream(&mut *r, &shown, opts);
        }
    }
    let dir = if meta.is_dir() { path.to_path_buf() } else { path.parent().map(Path::to_path_buf).unwrap_or_default() };
    let (runs, agent_files) = find(&dir);
    if runs.values().all(|r| r.traces.is_empty() && r.counters.is_empty()) {
        return Err(ParseError::new(&shown, None, format!("no rocprofv3 *{TRACE} or *{COUNTERS} in this directory or below")));
    }
    let mut out = ParseOutput::new("rocprofv3", &shown);
    let mut agents: BTreeMap<u64, Agent> = BTreeMap::new();
    for f in &agent_files {
        read_agents(f, limits, &mut agents, &mut out.warnings)?;
    }
    let mut v = View {
        out,
        acc: PhaseAcc::default(),
        bytes: KernelBytes::default(),
        agents: &agents,
        agent_calls: BTreeMap::new(),
        unknown_agents: BTreeMap::new(),
        any_bytes: false,
    };
    let mut joins = Vec::new();
    for ((rdir, prefix), run) in &runs {
        if run.traces.is_empty() && run.counters.is_empty() {
            continue;
        }
        joins.push(join_run(&mut v, rdir, prefix, run, limits)?);
    }
    let View { mut out, acc, bytes, agent_calls, unknown_agents, .. } = v;
    for (id, file) in &unknown_agents {
        out.warnings.push(format!("{file}: Agent_Id {id} is not a GPU of agent_info.csv{}", if agents.is_empty() { " (no agent_info.csv found)" } else { "" }));
    }
    let mut table = acc.finish(&phase_name(opts));
    bytes.apply(&mut table);
    out.phases.push(table);
    // The device: the agent most dispatches ran on.
    if let Some((id, n)) = agent_calls.iter().max_by_key(|(_, n)| **n) {
        if let Some(a) = agents.get(id) {
            out.route.insert("arch".into(), json!(a.arch));
            if let Some(p) = &a.product {
                out.route.insert("device".into(), json!(p));
            }
            let others: Vec<String> =
                agent_calls.keys().filter(|o| *o != id).filter_map(|o| agents.get(o)).map(|o| o.product.clone().unwrap_or(o.arch.clone())).collect();
            if !others.is_empty() {
                out.warnings.push(format!(
                    "dispatches ran on {} agents; the view names agent {id} ({}, {n} dispatches) from {} (also: {})",
                    others.len() + 1,
                    a.product.as_deref().unwrap_or(&a.arch),
                    a.file,
                    others.join(", ")
                ));
            }
        }
    }
    out.artifacts.insert("rocprofv3_join".into(), json!(joins));
    Ok(out)
}

/// One CSV on a stream (no directory to join in): a counter collection when its header
/// has `Counter_Name`, else a kernel trace.
pub fn parse_stream(r: &mut dyn std::io::BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let head = r.fill_buf().map_err(|e| ParseError::new(source, Some(1), e.to_string()))?;
    let first = &head[..memchr::memchr(b'\n', head).unwrap_or(head.len())];
    let mut out = if memchr::memmem::find(first, b"Counter_Name").is_some() {
        super::rocprof::parse_v3_counters(r, source, opts)?
    } else {
        super::rocprof::parse_v3_trace(r, source, opts)?
    };
    out.parser = "rocprofv3".into();
    Ok(out)
}

/// Runs keyed by (directory, file-name prefix), and every agent_info file.
fn find(dir: &Path) -> (BTreeMap<(PathBuf, String), Run>, Vec<PathBuf>) {
    let mut runs: BTreeMap<(PathBuf, String), Run> = BTreeMap::new();
    let mut agents = Vec::new();
    for e in walkdir::WalkDir::new(dir).max_depth(4).follow_links(false).sort_by_file_name().into_iter().filter_map(|e| e.ok()) {
        if !e.file_type().is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_string();
        let parent = e.path().parent().map(Path::to_path_buf).unwrap_or_default();
        if let Some(p) = name.strip_suffix(TRACE) {
            runs.entry((parent, p.to_string())).or_default().traces.push(e.path().to_path_buf());
        } else if let Some(p) = name.strip_suffix(COUNTERS) {
            runs.entry((parent, p.to_string())).or_default().counters.push(e.path().to_path_buf());
        } else if name.ends_with(AGENTS) {
            agents.push(e.path().to_path_buf());
        }
    }
    (runs, agents)
}

fn open(path: &Path, limits: &Limits) -> Result<csv::Reader<Box<dyn std::io::BufRead>>, ParseError> {
    let r = input::open_file(path, Framing::Csv, limits).map_err(|e| ParseError::new(&path.display().to_string(), None, e.to_string()))?;
    Ok(csvutil::reader(r))
}

/// GPU agents of an agent_info.csv by `Node_Id` (the `Agent_Id` of the other files).
fn read_agents(path: &Path, limits: &Limits, agents: &mut BTreeMap<u64, Agent>, warnings: &mut Vec<String>) -> Result<(), ParseError> {
    let source = path.display().to_string();
    let mut rd = open(path, limits)?;
    let mut rec = csv::ByteRecord::new();
    if !csvutil::next_record(&mut rd, &mut rec, &source, 0, warnings)? {
        return Err(ParseError::new(&source, None, "empty input: no CSV header"));
    }
    let h = Header::new(&rec);
    let node = h.require(&["Node_Id"], &source, 1).map_err(|e| ParseError::key(&source, 1, "Node_Id", e.message))?;
    let name = h.require(&["Name"], &source, 1).map_err(|e| ParseError::key(&source, 1, "Name", e.message))?;
    let kind = h.col(&["Agent_Type"]);
    let product = h.col(&["Product_Name", "Marketing_Name"]);
    while csvutil::next_record(&mut rd, &mut rec, &source, 0, warnings)? {
        let line = line_of(&rec);
        if field(&rec, kind).is_some_and(|k| k != "GPU") {
            continue;
        }
        let Some(id) = uint(&rec, Some(node)) else {
            warnings.push(format!("{source}:{line}: key `Node_Id`: not a number; agent skipped"));
            continue;
        };
        let arch = field(&rec, Some(name)).unwrap_or("").to_string();
        if !arch.starts_with("gfx") {
            warnings.push(format!("{source}:{line}: key `Name`: `{arch}` is not a gfx target; agent {id} skipped"));
            continue;
        }
        let product = field(&rec, product).filter(|p| !p.is_empty()).map(str::to_string);
        let a = Agent { arch, product, file: source.clone() };
        if let Some(old) = agents.get(&id) {
            if old.arch != a.arch || old.product != a.product {
                warnings.push(format!("{source}:{line}: agent {id} is {} here and {} in {}; keeping the first", a.arch, old.arch, old.file));
            }
            continue;
        }
        agents.insert(id, a);
    }
    Ok(())
}

/// Resources the counter file has and the kernel trace lacks (VGPR/SGPR counts, scratch).
fn fill_resources(c: &V3Cols, k: &mut KernelAcc, rec: &csv::ByteRecord) {
    let s = &mut k.sample;
    if s.registers.is_none() {
        s.registers = uint(rec, c.vgpr).map(|v| v as u32);
    }
    for (key, col) in [("sgpr", c.sgpr), ("accum_vgpr", c.agpr), ("scratch_bytes", c.scratch)] {
        if let Some(x) = uint(rec, col) {
            s.extra.entry(key.to_string()).or_insert(json!(x));
        }
    }
    if s.shared_bytes.is_none() {
        s.shared_bytes = uint(rec, c.lds);
    }
}

fn warn_capped(warnings: &mut Vec<String>, count: &mut u64, msg: impl FnOnce() -> String) {
    *count += 1;
    if *count <= SHOWN {
        warnings.push(msg());
    }
}

/// Read every counter file of a run into dispatches.
fn read_counters(files: &[PathBuf], limits: &Limits, warnings: &mut Vec<String>) -> Result<(Vec<V3Cols>, Vec<CounterDispatch>), ParseError> {
    let mut cols_of = Vec::new();
    let mut out: Vec<CounterDispatch> = Vec::new();
    for (fi, path) in files.iter().enumerate() {
        let source = path.display().to_string();
        let mut rd = open(path, limits)?;
        let mut rec = csv::ByteRecord::new();
        let mut cols: Option<V3Cols> = None;
        let mut index: HashMap<u64, usize> = HashMap::new();
        while csvutil::next_record(&mut rd, &mut rec, &source, 0, warnings)? {
            let line = line_of(&rec);
            if is_header(&rec) {
                let h = Header::new(&rec);
                let c = V3Cols::new(&h, &source, line)?;
                for (col, key) in [(c.counter_name, "Counter_Name"), (c.counter_value, "Counter_Value")] {
                    if col.is_none() {
                        return Err(ParseError::key(&source, line, key, "missing: not a counter collection"));
                    }
                }
                if c.dispatch.is_none() && c.correlation.is_none() {
                    return Err(ParseError::key(&source, line, "Dispatch_Id", "missing (and no Correlation_Id): dispatches cannot be told apart or joined"));
                }
                cols = Some(c);
                index.clear();
                continue;
            }
            let Some(c) = &cols else {
                return Err(ParseError::new(&source, Some(line), "no header line with a Kernel_Name column before the first record"));
            };
            let (key_col, key_name) = if c.dispatch.is_some() { (c.dispatch, "Dispatch_Id") } else { (c.correlation, "Correlation_Id") };
            let Some(key) = uint(&rec, key_col) else {
                warnings.push(format!("{source}:{line}: key `{key_name}`: not a number; row skipped"));
                continue;
            };
            let (Some(name), Some(cname)) = (field(&rec, Some(c.name)).filter(|n| !n.is_empty()), field(&rec, c.counter_name).filter(|n| !n.is_empty())) else {
                warnings.push(format!("{source}:{line}: missing kernel or counter name; row skipped"));
                continue;
            };
            let Some(value) = num(&rec, c.counter_value) else {
                warnings.push(format!("{source}:{line}: key `Counter_Value`: not a number; row skipped"));
                continue;
            };
            let i = *index.entry(key).or_insert_with(|| {
                out.push(CounterDispatch {
                    file: fi,
                    line,
                    dispatch: uint(&rec, c.dispatch),
                    correlation: uint(&rec, c.correlation),
                    name: kernel_name(name).to_string(),
                    agent: uint(&rec, c.agent),
                    counters: BTreeMap::new(),
                    rec: rec.clone(),
                    joined: false,
                });
                out.len() - 1
            });
            *out[i].counters.entry(cname.to_string()).or_insert(0.0) += value;
        }
        match cols {
            Some(c) => cols_of.push(c),
            None => return Err(ParseError::new(&source, None, "empty input: no CSV header")),
        }
    }
    Ok((cols_of, out))
}

impl View<'_> {
    fn family(&self, agent: Option<u64>, fallback: Option<&'static Family>) -> Option<&'static Family> {
        let t = amd_counters::table();
        agent.and_then(|a| self.agents.get(&a)).and_then(|a| t.family_for_arch(&a.arch)).or(fallback)
    }

    fn note_agent(&mut self, agent: Option<u64>, file: &str) {
        if let Some(a) = agent {
            *self.agent_calls.entry(a).or_default() += 1;
            if !self.agents.contains_key(&a) {
                self.unknown_agents.entry(a).or_insert_with(|| file.to_string());
            }
        }
    }

    fn add_counters(&mut self, name: &str, counters: &BTreeMap<String, f64>, family: Option<&'static Family>) {
        let k = self.acc.kernel(name);
        for (n, v) in counters {
            k.add_counter(n, *v);
        }
        if self.bytes.add(name, counters, family) {
            self.any_bytes = true;
        }
    }
}

fn join_run(v: &mut View<'_>, dir: &Path, prefix: &str, run: &Run, limits: &Limits) -> Result<serde_json::Value, ParseError> {
    let (ccols, mut cds) = read_counters(&run.counters, limits, &mut v.out.warnings)?;
    v.any_bytes = false;
    let counters_shown = run.counters.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" + ");
    let names: std::collections::BTreeSet<String> = cds.iter().flat_map(|d| d.counters.keys().cloned()).collect();
    let has = |n: &str| names.contains(n);
    let t = amd_counters::table();
    // With no agent info for a dispatch, the one family whose counters are all there.
    let fallback = t.family_by_counters(&has);
    let (mut matched, mut trace_only, mut mismatched, mut trace_rows) = (0u64, 0u64, 0u64, 0u64);
    let mut key_used = None;
    for path in &run.traces {
        let source = path.display().to_string();
        let mut rd = open(path, limits)?;
        let mut rec = csv::ByteRecord::new();
        let mut cols: Option<V3Cols> = None;
        let mut index: HashMap<u64, usize> = HashMap::new();
        let mut key_col = None;
        while csvutil::next_record(&mut rd, &mut rec, &source, 0, &mut v.out.warnings)? {
            let line = line_of(&rec);
            if is_header(&rec) {
                let h = Header::new(&rec);
                let c = V3Cols::new(&h, &source, line)?;
                for (col, key) in [(c.start, "Start_Timestamp"), (c.end, "End_Timestamp")] {
                    if col.is_none() {
                        return Err(ParseError::key(&source, line, key, "missing: not a kernel trace"));
                    }
                }
                if !cds.is_empty() {
                    let both = |f: fn(&V3Cols) -> Option<usize>| f(&c).is_some() && ccols.iter().all(|cc| f(cc).is_some());
                    let (col, name, pick): (Option<usize>, &str, KeyOf) = if both(|c| c.dispatch) {
                        (c.dispatch, "Dispatch_Id", |d| d.dispatch)
                    } else if both(|c| c.correlation) {
                        (c.correlation, "Correlation_Id", |d| d.correlation)
                    } else {
                        return Err(ParseError::key(
                            &source,
                            line,
                            "Dispatch_Id",
                            format!("missing here or in {counters_shown} (and no Correlation_Id in both): the two files cannot be joined"),
                        ));
                    };
                    key_col = col;
                    key_used = Some(name);
                    index = cds.iter().enumerate().filter_map(|(i, d)| pick(d).map(|k| (k, i))).collect();
                }
                cols = Some(c);
                continue;
            }
            let Some(c) = &cols else {
                return Err(ParseError::new(&source, Some(line), "no header line with a Kernel_Name column before the first record"));
            };
            if field(&rec, c.kind).is_some_and(|k| !k.is_empty() && k != "KERNEL_DISPATCH") {
                continue;
            }
            let (Some(name), Some(start), Some(end)) = (field(&rec, Some(c.name)).filter(|n| !n.is_empty()), uint(&rec, c.start), uint(&rec, c.end)) else {
                v.out.warnings.push(format!("{source}:{line}: missing kernel name or timestamps; row skipped"));
                continue;
            };
            if end < start {
                v.out.warnings.push(format!("{source}:{line}: key `End_Timestamp`: before Start_Timestamp; row skipped"));
                continue;
            }
            trace_rows += 1;
            let name = kernel_name(name).to_string();
            let agent = uint(&rec, c.agent);
            v.note_agent(agent, &source);
            let k = v.acc.kernel(&name);
            c.launch(k, &rec);
            k.add_duration((end - start) as f64 / 1000.0);
            if cds.is_empty() {
                continue;
            }
            let key = uint(&rec, key_col);
            match key.and_then(|x| index.get(&x).copied()) {
                Some(i) if cds[i].joined => {
                    let first = &cds[i];
                    warn_capped(&mut v.out.warnings, &mut mismatched, || {
                        format!(
                            "{source}:{line}: {} {} appears twice in the trace; its counters ({}:{}) joined the first",
                            key_used.unwrap_or(""),
                            key.unwrap_or(0),
                            run.counters[first.file].display(),
                            first.line
                        )
                    });
                }
                Some(i) if cds[i].name != name => {
                    cds[i].joined = true;
                    let d = &cds[i];
                    warn_capped(&mut v.out.warnings, &mut mismatched, || {
                        format!(
                            "{source}:{line}: {} {}: kernel `{name}` here but `{}` in {}:{}; the counters are not used",
                            key_used.unwrap_or(""),
                            key.unwrap_or(0),
                            d.name,
                            run.counters[d.file].display(),
                            d.line
                        )
                    });
                }
                Some(i) => {
                    cds[i].joined = true;
                    matched += 1;
                    let k = v.acc.kernel(&name);
                    fill_resources(&ccols[cds[i].file], k, &cds[i].rec);
                    let family = v.family(agent.or(cds[i].agent), fallback);
                    let counters = std::mem::take(&mut cds[i].counters);
                    v.add_counters(&name, &counters, family);
                }
                None => warn_capped(&mut v.out.warnings, &mut trace_only, || {
                    format!(
                        "{source}:{line}: dispatch {} (`{name}`) has no counters in {counters_shown}: it keeps its time, no counters",
                        key.map(|k| k.to_string()).unwrap_or("?".into())
                    )
                }),
            }
        }
        if cols.is_none() {
            return Err(ParseError::new(&source, None, "empty input: no CSV header"));
        }
    }
    // Counter dispatches the trace does not have: in the view with counters and no time.
    let mut counters_only = 0u64;
    let traced = !run.traces.is_empty();
    for d in cds.iter_mut() {
        if d.joined {
            continue;
        }
        if traced {
            warn_capped(&mut v.out.warnings, &mut counters_only, || {
                format!(
                    "{}:{}: {} {} (`{}`) is not in the kernel trace: its counters count, it has no time",
                    run.counters[d.file].display(),
                    d.line,
                    key_used.unwrap_or("dispatch"),
                    key_used.map_or(d.dispatch, |k| if k == "Dispatch_Id" { d.dispatch } else { d.correlation }).unwrap_or(0),
                    d.name
                )
            });
        } else {
            counters_only += 1;
        }
        if !traced {
            v.note_agent(d.agent, &run.counters[d.file].display().to_string());
        }
        let k = v.acc.kernel(&d.name);
        if k.sample.calls == 0 {
            ccols[d.file].launch(k, &d.rec);
        }
        fill_resources(&ccols[d.file], k, &d.rec);
        k.add_call();
        if traced {
            let n = k.sample.extra.get("untimed_calls").and_then(|x| x.as_u64()).unwrap_or(0);
            k.sample.extra.insert("untimed_calls".into(), json!(n + 1));
        }
        let family = v.family(d.agent, fallback);
        let counters = std::mem::take(&mut d.counters);
        v.add_counters(&d.name, &counters, family);
    }
    let here = format!("{}/{prefix}*", dir.display());
    for (n, what) in [
        (trace_only, "trace dispatches without counters"),
        (counters_only, "counter dispatches not in the trace"),
        (mismatched, "dispatches the two files disagree on"),
    ] {
        if n > SHOWN && traced && !cds.is_empty() {
            v.out.warnings.push(format!("{here}: {n} {what} in all"));
        }
    }
    if !traced && !cds.is_empty() {
        v.out
            .warnings
            .push(format!("{counters_shown}: no {TRACE} beside it: kernels have counters and calls, no time (add --kernel-trace to the rocprofv3 run)"));
    }
    if !cds.is_empty() && !v.any_bytes {
        let family = fallback.or_else(|| cds.iter().find_map(|d| v.family(d.agent, None)));
        v.out.warnings.push(no_bytes_warning(&counters_shown, &names, family));
    }
    Ok(json!({
        "directory": dir.display().to_string(),
        "prefix": prefix,
        "kernel_trace": run.traces.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "counter_collection": run.counters.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "key": key_used,
        "trace_dispatches": trace_rows,
        "joined": matched,
        "trace_only": trace_only,
        "counters_only": counters_only,
        "mismatched": mismatched,
    }))
}
