//! Output and profiler parsers, selected by name.
//!
//! Every parser turns one text or file into a [`ParseOutput`]: whole-run
//! metrics, per-phase kernel tables ([`PhaseTable`]), reported route facts and
//! tags. Parsers read through `BufRead` so a large profiler file is never held
//! whole in memory; `.gz` files are decompressed on the fly.
//!
//! Input through [`parse_with`] is bounded ([`input`], docs/collect.md
//! "Input limits"): lines, CSV records and trace events are capped at
//! `KATLAS_MAX_LINE_BYTES`, streams and decompressed `.gz` at
//! `KATLAS_MAX_INPUT_BYTES`, and only regular files are opened. A parser
//! function called directly on a reader of the caller's gets no caps.

use crate::summary::PhaseTable;
use katlas_model::Metric;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, Read};
use std::path::Path;

pub mod csvutil;
pub mod hipfire_bench;
pub mod hipfire_dflash;
pub mod input;
pub mod json_lines;
pub mod json_scan;
pub mod kv;
pub mod ncu;
pub mod ncu_rep;
pub mod proton;
pub mod proton_trace;
pub mod rocpd;
pub mod rocprof;
pub mod rocprof_dir;
pub mod rows;
pub mod shapes;
pub mod timeline;
pub mod torch_trace;
pub mod triton_join;
pub mod triton_launches;

pub mod ttir_access;
pub use input::{Framing, Limits};

pub const PARSE_SCHEMA: &str = "katlas.parse.v1";

/// What one parser extracted from one input (`katlas.parse.v1`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParseOutput {
    /// Always `katlas.parse.v1`.
    pub schema: String,
    pub parser: String,
    /// File or stream the output came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Whole-run metrics (hipfire `SUMMARY`, DFlash BENCH METRICS, kv keys).
    #[serde(default)]
    pub metrics: BTreeMap<String, Metric>,
    /// Per-phase kernel tables and phase-specific metrics.
    #[serde(default)]
    pub phases: Vec<PhaseTable>,
    /// Route facts the output reports (`graph_blob_count`, `kv_mode`, device).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub route: BTreeMap<String, Value>,
    /// Tags for the rows (`BLINDSPOT`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Other structured findings (coverage block, blindspot list).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub artifacts: BTreeMap<String, Value>,
    /// Whole rows a workload printed itself (`katlas-rows`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<katlas_model::Row>,
    /// Lines skipped as malformed, each `source:line: reason`; good records beside them are kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ParseOutput {
    pub fn new(parser: &str, source: &str) -> Self {
        Self { schema: PARSE_SCHEMA.into(), parser: parser.into(), source: Some(source.into()), ..Default::default() }
    }

    pub fn phase(&self, name: &str) -> Option<&PhaseTable> {
        self.phases.iter().find(|p| p.phase == name)
    }

    pub fn phase_mut(&mut self, name: &str) -> &mut PhaseTable {
        if let Some(i) = self.phases.iter().position(|p| p.phase == name) {
            return &mut self.phases[i];
        }
        self.phases.push(PhaseTable::new(name));
        self.phases.last_mut().unwrap()
    }

    pub fn metric(&self, key: &str) -> Option<f64> {
        self.metrics.get(key).map(|m| m.value)
    }

    pub fn tag(&mut self, tag: &str) {
        if !self.tags.iter().any(|t| t == tag) {
            self.tags.push(tag.into());
        }
    }

    /// Merge another parser's output into this one (several parsers on one run).
    pub fn merge(&mut self, other: ParseOutput) {
        self.metrics.extend(other.metrics);
        for p in other.phases {
            let mine = self.phase_mut(&p.phase.clone());
            if mine.kernels.is_empty() {
                let metrics = std::mem::take(&mut mine.metrics);
                *mine = p;
                mine.metrics.extend(metrics);
            } else {
                mine.metrics.extend(p.metrics);
                mine.kernels.extend(p.kernels);
            }
        }
        self.route.extend(other.route);
        for t in other.tags {
            self.tag(&t);
        }
        self.artifacts.extend(other.artifacts);
        self.rows.extend(other.rows);
        self.warnings.extend(other.warnings);
    }
}

/// Options a workload spec may give a parser.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParserOptions {
    /// `kv`: the keys to take (all numeric keys when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// `json-lines`: only objects carrying this key are records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marker: Option<String>,
    /// Phase name for tables that carry no phase of their own (profiler files); for a torch
    /// trace with no `phases`, the `record_function` range of this name is the phase (kernels
    /// outside it are `unannotated`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `torch-trace`: GPU annotation (`record_function`) names that delimit phases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<String>,
    /// `ncu-csv`: extra metric-name prefixes to drop from counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop_counters: Vec<String>,
    /// `torch-trace`: katlas's Triton launch records to join to the trace's kernels (default:
    /// `triton-launches.jsonl` or `launches.jsonl` beside a trace file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton_launches: Option<String>,
    /// `torch-trace`: the Triton cache whose entries name the kernels' launch facts (default:
    /// `triton-cache/` beside a trace file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triton_cache: Option<String>,
}

impl ParserOptions {
    /// A trace file's Triton launch records and cache, when the options name none and they lie
    /// beside it (as `katlas collect` and the fixtures keep them).
    pub fn with_triton_beside(&self, trace: &Path) -> ParserOptions {
        let mut o = self.clone();
        let dir = trace.parent().unwrap_or(Path::new("."));
        if o.triton_launches.is_none() {
            o.triton_launches = ["triton-launches.jsonl", "launches.jsonl"].iter().map(|n| dir.join(n)).find(|p| p.is_file()).map(|p| p.display().to_string());
        }
        if o.triton_cache.is_none() {
            let c = dir.join("triton-cache");
            o.triton_cache = c.is_dir().then(|| c.display().to_string());
        }
        o
    }
}

/// A parse failure naming source, line and key where known.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub source: String,
    pub line: Option<u64>,
    pub key: Option<String>,
    pub message: String,
    /// The input may be fine: a tool it needs is missing here (exit 3, not bad input).
    pub missing_env: bool,
}

impl katlas_fs::class::Classify for ParseError {
    fn class(&self) -> katlas_fs::class::Class {
        if self.missing_env {
            katlas_fs::class::Class::Environment
        } else {
            katlas_fs::class::Class::Input
        }
    }
}

impl ParseError {
    pub fn new(source: &str, line: Option<u64>, message: impl Into<String>) -> Self {
        Self { source: source.into(), line, key: None, message: message.into(), missing_env: false }
    }
    pub fn key(source: &str, line: u64, key: &str, message: impl Into<String>) -> Self {
        Self { source: source.into(), line: Some(line), key: Some(key.into()), message: message.into(), missing_env: false }
    }
    pub fn missing_env(source: &str, message: impl Into<String>) -> Self {
        Self { missing_env: true, ..Self::new(source, None, message) }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(k) = &self.key {
            write!(f, ": key `{k}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ParseError {}

/// What to parse: text already in memory, a file (streamed; `.gz` by magic
/// bytes; regular files only), or a stream such as stdin (`.gz` by magic
/// bytes too, capped at `KATLAS_MAX_INPUT_BYTES`).
pub enum Input<'a> {
    Text { text: &'a str, source: &'a str },
    File(&'a Path),
    Reader { reader: &'a mut dyn Read, source: &'a str },
}

type ParseFn = fn(&mut dyn BufRead, &str, &ParserOptions) -> Result<ParseOutput, ParseError>;

/// The registry: name, one-line description, function.
pub const PARSERS: &[(&str, &str, ParseFn)] = &[
    ("hipfire-bench", "hipfire AR bench stdout: SUMMARY/PREFILL_SUMMARY, PROFILE tables, rocprof coverage, hipGraph blobs", hipfire_bench::parse),
    ("hipfire-dflash", "hipfire DFlash demo stdout: BENCH METRICS block, emitted: and cycles:/accepted:/tau lines", hipfire_dflash::parse),
    ("kv", "`key=value` and `key: value` lines (keys chosen with `keys`)", kv::parse),
    ("json-lines", "JSON objects, one a line, carrying the `marker` key", json_lines::parse),
    ("rocprofv3-kernel-trace", "rocprofv3 kernel_trace.csv (2024 and 2026 column sets)", rocprof::parse_v3_trace),
    ("rocprofv3-counters", "rocprofv3 counter_collection.csv", rocprof::parse_v3_counters),
    (
        "rocprofv3",
        "rocprofv3 output directory (or a file in one): kernel_trace.csv + counter_collection.csv (+ agent_info.csv) joined per dispatch, bytes from counters",
        rocprof_dir::parse_stream,
    ),
    (
        "rocpd",
        "rocprofv3 rocpd SQLite database(s) (the default output since ROCm 7), or a directory of them: dispatches, kernel symbols, agents, counters (bytes as rocprofv3), marker ranges",
        rocpd::parse_stream,
    ),
    ("rocprof-v1", "rocprof (v1) results.csv with BeginNs/EndNs and counter columns", rocprof::parse_v1),
    ("ncu-csv", "Nsight Compute `--csv --page raw` output", ncu::parse),
    (
        "ncu-rep",
        "Nsight Compute report (.ncu-rep) through NVIDIA's ncu_report reader (the ncu-report wheel or an Nsight Compute install): what ncu-csv gives, plus top source lines when the report has source counters",
        ncu_rep::parse_stream,
    ),
    ("torch-trace", "torch.profiler Chrome trace JSON (optionally .gz), streamed", torch_trace::parse),
    (
        "proton",
        "Triton Proton's hatchet tree (data=\"tree\", NAME.hatchet: count, time and every metric per kernel) or trace output (data=\"trace\", NAME.chrome_trace: every launch, the timeline), told apart by the first byte; scopes as phases",
        proton::parse,
    ),
    (
        "triton-launches",
        "katlas's Triton launch records (data/python): tensor arguments, constexprs, num_warps, num_stages, shared, autotune choices",
        triton_launches::parse,
    ),
    ("katlas-rows", "katlas.row.v1 JSON lines printed by the workload itself (the lab binary)", rows::parse),
];

pub fn parser_names() -> Vec<&'static str> {
    PARSERS.iter().map(|p| p.0).collect()
}

fn lookup(name: &str) -> Result<ParseFn, ParseError> {
    PARSERS
        .iter()
        .find(|p| p.0 == name)
        .map(|p| p.2)
        .ok_or_else(|| ParseError::new(name, None, format!("unknown parser; known parsers: {}", parser_names().join(", "))))
}

/// How a parser's input splits into records, for the record cap.
pub fn framing(name: &str) -> Framing {
    match name {
        "rocprofv3-kernel-trace" | "rocprofv3-counters" | "rocprofv3" | "rocprof-v1" | "ncu-csv" => Framing::Csv,
        "torch-trace" | "proton" => Framing::Json,
        _ => Framing::Lines,
    }
}

/// Parse with default options.
pub fn parse(name: &str, input: Input<'_>) -> Result<ParseOutput, ParseError> {
    parse_with(name, input, &ParserOptions::default())
}

/// Parse under the limits from `KATLAS_MAX_LINE_BYTES` and `KATLAS_MAX_INPUT_BYTES`.
pub fn parse_with(name: &str, input: Input<'_>, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let limits = Limits::from_env().map_err(|e| ParseError::new(&source_of(&input), None, e))?;
    parse_limited(name, input, opts, &limits)
}

fn source_of(input: &Input<'_>) -> String {
    match input {
        Input::Text { source, .. } | Input::Reader { source, .. } => source.to_string(),
        Input::File(p) => p.display().to_string(),
    }
}

/// Parse under the given limits. Metric names that are not names (a JSON
/// fragment such as `{"katlas"`, a quoted word, text with spaces) are dropped
/// here, each with a warning, so no caller's rows ever carry one.
pub fn parse_limited(name: &str, input: Input<'_>, opts: &ParserOptions, limits: &Limits) -> Result<ParseOutput, ParseError> {
    let source = source_of(&input);
    let text = match &input {
        Input::Text { text, .. } => Rescan::Text(text),
        Input::File(p) => Rescan::File(p),
        Input::Reader { .. } => Rescan::Gone,
    };
    let mut out = parse_unscreened(name, input, opts, limits)?;
    screen_metric_names(&mut out, name, &source, framing(name), text, limits);
    Ok(out)
}

/// The longest metric name kept; longer is a line, not a name.
pub const MAX_METRIC_NAME: usize = 200;

/// Whether `k` can name a metric: non-empty, bounded, and free of what only text
/// around a name carries (whitespace, control characters, quotes, braces,
/// brackets, backslashes, `=`, `,`, `;`). Parsers' own names (`kernel_time_us`,
/// `decode.tok_s`, `tok/s`, `sm__throughput.avg.pct`) all pass.
pub fn is_metric_name(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= MAX_METRIC_NAME
        && k.chars().all(|c| !c.is_whitespace() && !c.is_control() && !matches!(c, '"' | '\'' | '`' | '{' | '}' | '[' | ']' | '\\' | '=' | ',' | ';'))
}

/// Where the parsed text can be read again to locate a dropped name's line.
enum Rescan<'a> {
    Text(&'a str),
    File(&'a Path),
    Gone,
}

fn screen_metric_names(out: &mut ParseOutput, parser: &str, source: &str, framing: Framing, text: Rescan<'_>, limits: &Limits) {
    let mut dropped: Vec<String> = Vec::new();
    let mut screen = |m: &mut BTreeMap<String, Metric>| {
        m.retain(|k, _| {
            let ok = is_metric_name(k);
            if !ok && !dropped.contains(k) {
                dropped.push(k.clone());
            }
            ok
        })
    };
    screen(&mut out.metrics);
    for p in &mut out.phases {
        screen(&mut p.metrics);
    }
    for r in &mut out.rows {
        screen(&mut r.metrics);
    }
    if dropped.is_empty() {
        return;
    }
    let lines = if framing == Framing::Lines { first_lines_with(&dropped, text, limits) } else { vec![None; dropped.len()] };
    for (k, line) in dropped.iter().zip(lines) {
        let at = line.map(|l| format!(":{l}")).unwrap_or_default();
        let shown: String = k.chars().take(60).collect();
        let more = if shown.len() < k.len() { "…" } else { "" };
        out.warnings.push(format!("{source}{at}: parser `{parser}`: metric name {shown:?}{more} is not a name; dropped"));
    }
}

/// The 1-based line each name first occurs on, read again under the same limits;
/// `None` where the input cannot be read again (stdin) or the name is not there verbatim.
fn first_lines_with(names: &[String], text: Rescan<'_>, limits: &Limits) -> Vec<Option<u64>> {
    let mut found = vec![None; names.len()];
    let mut r = match text {
        Rescan::Text(t) => input::open_text(t, Framing::Lines, limits),
        Rescan::File(p) => match input::open_file(p, Framing::Lines, limits) {
            Ok(r) => r,
            Err(_) => return found,
        },
        Rescan::Gone => return found,
    };
    // A json-lines name is a dotted path of JSON keys: its last key, as JSON spells it, is in the line.
    let needles: Vec<[String; 2]> = names
        .iter()
        .map(|k| {
            let leaf = k.rsplit('.').next().unwrap_or(k);
            let quoted = serde_json::to_string(leaf).unwrap_or_default();
            [k.clone(), quoted]
        })
        .collect();
    let _ = for_each_line(&mut *r, "", |n, line| {
        for (i, ks) in needles.iter().enumerate() {
            if found[i].is_none() && ks.iter().any(|k| !k.is_empty() && line.contains(k.as_str())) {
                found[i] = Some(n);
            }
        }
        // Stop reading once every name is placed.
        if found.iter().all(Option::is_some) {
            return Err(ParseError::new("", None, ""));
        }
        Ok(())
    });
    found
}

fn parse_unscreened(name: &str, input: Input<'_>, opts: &ParserOptions, limits: &Limits) -> Result<ParseOutput, ParseError> {
    let f = lookup(name)?;
    let framing = framing(name);
    let source = source_of(&input);
    if name == "rocprofv3" {
        return match input {
            Input::File(path) => rocprof_dir::parse(path, opts, limits),
            Input::Text { text, .. } => rocprof_dir::parse_stream(&mut *input::open_text(text, framing, limits), &source, opts),
            Input::Reader { reader, .. } => {
                let mut r = input::open_reader(reader, framing, limits).map_err(|e| ParseError::new(&source, None, e.to_string()))?;
                rocprof_dir::parse_stream(&mut *r, &source, opts)
            }
        };
    }
    if name == "rocpd" {
        return match input {
            Input::File(path) => rocpd::parse(path, opts, limits),
            _ => rocpd::parse_stream(&mut std::io::empty(), &source, opts),
        };
    }
    if name == "ncu-rep" {
        return match input {
            Input::File(path) => ncu_rep::parse(path, opts, limits),
            _ => ncu_rep::parse_stream(&mut std::io::empty(), &source, opts),
        };
    }
    let beside = match &input {
        Input::File(p) if name == "torch-trace" => opts.with_triton_beside(p),
        _ => opts.clone(),
    };
    let mut reader: Box<dyn BufRead + '_> = match input {
        Input::Text { text, .. } => input::open_text(text, framing, limits),
        Input::File(path) => input::open_file(path, framing, limits).map_err(|e| ParseError::new(&source, None, e.to_string()))?,
        Input::Reader { reader, .. } => input::open_reader(reader, framing, limits).map_err(|e| ParseError::new(&source, None, e.to_string()))?,
    };
    if name == "torch-trace" {
        return torch_trace::parse_capped(&mut *reader, &source, &beside, limits.max_line);
    }
    if name == "proton" {
        return proton::parse_capped(&mut *reader, &source, opts, limits.max_line);
    }
    f(&mut *reader, &source, opts)
}

/// Open a file for buffered reading, decompressing gzip when the file starts
/// with its magic. Regular files only; decompressed bytes are capped at
/// `KATLAS_MAX_INPUT_BYTES`. Lines are not capped (see [`input::open_file`]).
pub fn open_maybe_gz(path: &Path) -> std::io::Result<Box<dyn BufRead>> {
    let limits = Limits::from_env().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    input::open_file(path, Framing::Json, &limits)
}

/// Iterate lines of a reader with 1-based numbers; invalid UTF-8 is replaced, never fatal.
pub(crate) fn for_each_line(r: &mut dyn BufRead, source: &str, mut f: impl FnMut(u64, &str) -> Result<(), ParseError>) -> Result<(), ParseError> {
    let mut buf = Vec::with_capacity(256);
    let mut n = 0u64;
    loop {
        buf.clear();
        let got = r.read_until(b'\n', &mut buf).map_err(|e| ParseError::new(source, Some(n + 1), e.to_string()))?;
        if got == 0 {
            return Ok(());
        }
        n += 1;
        let line = String::from_utf8_lossy(&buf);
        f(n, line.trim_end_matches(['\n', '\r']))?;
    }
}

/// Parse a number as printed by tools: optional sign, decimals, exponents,
/// thousands separators (`1,234.5`). `None` when it is not a number.
pub fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    if let Ok(v) = t.parse::<f64>() {
        return v.is_finite().then_some(v);
    }
    if t.contains(',') && valid_thousands(t) {
        let cleaned: String = t.chars().filter(|c| *c != ',').collect();
        return cleaned.parse::<f64>().ok().filter(|v| v.is_finite());
    }
    None
}

/// `1,234,567.8` style: groups of three digits after the first comma.
fn valid_thousands(t: &str) -> bool {
    let body = t.strip_prefix(['-', '+']).unwrap_or(t);
    let int = body.split(['.', 'e', 'E']).next().unwrap_or("");
    let mut groups = int.split(',');
    let first = groups.next().unwrap_or("");
    if first.is_empty() || first.len() > 3 || !first.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    groups.all(|g| g.len() == 3 && g.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(parse_number("-3.41"), Some(-3.41));
        assert_eq!(parse_number("1.5e-3"), Some(0.0015));
        assert_eq!(parse_number("11,008"), Some(11008.0));
        assert_eq!(parse_number("590,680,286"), Some(590680286.0));
        assert_eq!(parse_number("1,24"), None);
        assert_eq!(parse_number("abc"), None);
        assert_eq!(parse_number("nan"), None);
    }

    #[test]
    fn names_that_are_not_names_never_leave_a_parser() {
        let text = "noise\n{\"katlas\": 1, \"tok s\": 2, \"ok\": {\"x\\\"y\": 3, \"fine\": 4}}\n";
        let o = parse_with("json-lines", Input::Text { text, source: "out" }, &ParserOptions::default()).unwrap();
        let names: Vec<&str> = o.metrics.keys().map(String::as_str).collect();
        assert_eq!(names, ["ok.fine"]);
        assert_eq!(
            o.warnings,
            [
                "out:2: parser `json-lines`: metric name \"ok.x\\\"y\" is not a name; dropped",
                "out:2: parser `json-lines`: metric name \"tok s\" is not a name; dropped",
            ]
        );
        for good in ["tok_s", "decode.tok_s", "tok/s", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "a:b", "p50-ms"] {
            assert!(is_metric_name(good), "{good}");
        }
        for bad in ["", "{\"katlas\"", "\"calls\"", "'w'", "a b", "x\u{1b}[2J", "k=v", "[0]", &"x".repeat(MAX_METRIC_NAME + 1)] {
            assert!(!is_metric_name(bad), "{bad}");
        }
    }

    #[test]
    fn unknown_parser_lists_known() {
        let e = parse("nope", Input::Text { text: "", source: "x" }).unwrap_err().to_string();
        assert!(e.contains("unknown parser") && e.contains("torch-trace"), "{e}");
    }
}
