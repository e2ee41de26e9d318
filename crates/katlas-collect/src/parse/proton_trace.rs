//! Triton Proton's trace output (`proton.start(name, data="trace")`, `NAME.chrome_trace`),
//! read by the `proton` parser when the input is a JSON object rather than the hatchet tree's
//! array.
//!
//! What Proton's `TraceData::dumpChromeTrace` writes (Triton 3.6): one JSON object per CUDA or
//! HIP stream, each on its own line, `{"displayTimeUnit": "us", "traceEvents": [...]}`. Every
//! event is one kernel launch, `{"ph": "X", "cat": "kernel", "name": KERNEL, "ts": us, "dur":
//! us, "tid": STREAM, "args": {"call_stack": ["ROOT", SCOPE..., KERNEL]}}`, its `ts` counted
//! from the first launch of any stream, so the streams share one time base.
//!
//! The call stack's scopes (between `ROOT` and the kernel) map to phases as the hatchet
//! tree's scope nodes do in [`super::proton`]: with `phases` given, the innermost scope of one
//! of those names; with none, the outermost scope; kernels under `__proton_launch_metadata`
//! are the launch hook's and are left out. Unlike the tree, the trace keeps every launch, so
//! kernels get median, min and max, and each phase gets the timeline facts of
//! [`super::timeline`] (busy %, gaps). Names stay Proton's (mangled for C++ kernels), as in
//! the tree; `OpRules::classify_all` adds the demangled form.
//!
//! Hostile input: events are read one at a time through `json_scan` under the element cap
//! (`KATLAS_MAX_LINE_BYTES`), members other than `traceEvents` are skipped by counting
//! brackets, and the parse holds 24 bytes per kernel launch plus one entry per distinct
//! kernel, scope and stream name. Broken JSON structure is an error naming line, byte offset
//! and JSON path; an event whose fields do not read is skipped with a warning naming line and
//! field (`traceEvents[12].dur: not a number`), and the events beside it are kept.

use super::json_scan::{show, Scanner};
use super::{ParseError, ParseOutput, ParserOptions};
use crate::summary::PhaseAcc;
use katlas_model::Metric;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;
use std::collections::{BTreeSet, HashMap};
use std::io::Read;

/// Warnings kept one by one; the rest are counted.
const MAX_WARNINGS: u64 = 20;
/// Longest piece of a bad value quoted in a warning.
const QUOTE: usize = 40;
const NONE: u32 = u32::MAX;
/// The scope Proton's launch hook wraps around a kernel's `launch_metadata` function: kernels
/// it runs are the hook's, not the workload's (Proton's viewer drops it too). The hatchet
/// tree's reader ([`super::proton`]) leaves it out the same way.
pub const LAUNCH_METADATA_SCOPE: &str = "__proton_launch_metadata";

/// An event's fields, each kept raw so a bad one is named alone.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow)]
    ph: Option<&'a RawValue>,
    #[serde(default, borrow)]
    cat: Option<&'a RawValue>,
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    ts: Option<&'a RawValue>,
    #[serde(default, borrow)]
    dur: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tid: Option<&'a RawValue>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Args<'a> {
    #[serde(default, borrow)]
    call_stack: Option<&'a RawValue>,
}

/// One kernel launch: 24 bytes.
struct Launch {
    ts: f64,
    dur: f64,
    name: u32,
    /// Interned phase scope; `NONE` outside every phase scope.
    phase: u32,
}

#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
    list: Vec<String>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.ids.insert(s.to_string(), i);
        self.list.push(s.to_string());
        i
    }
}

#[derive(Default)]
struct State {
    launches: Vec<Launch>,
    kernels: Interner,
    phases: Interner,
    streams: BTreeSet<i64>,
    /// Launches run by the launch hook (under `__proton_launch_metadata`).
    hook: u64,
    /// Events that are not kernel launches (`ph` other than `X`, `cat` other than `kernel`).
    other: u64,
    warnings: Vec<String>,
    bad: u64,
}

impl State {
    fn warn(&mut self, msg: String) {
        self.bad += 1;
        if self.bad <= MAX_WARNINGS {
            self.warnings.push(msg);
        }
    }
}

/// A raw value for a message, cut short.
fn quote(raw: &RawValue) -> String {
    let s = raw.get();
    match s.char_indices().nth(QUOTE) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Why an event is skipped: the field (`.dur`; empty for the whole event) and what is wrong.
type Bad = (&'static str, String);

/// A JSON number that is finite.
fn number(raw: Option<&RawValue>, field: &'static str) -> Result<f64, Bad> {
    let raw = raw.ok_or((field, "missing or null".to_string()))?;
    match serde_json::from_str::<f64>(raw.get()) {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err((field, format!("not a number: {}", quote(raw)))),
    }
}

/// serde's message without its position, which is inside the element, not the file.
fn inner(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn is_str(raw: Option<&RawValue>, want: &str) -> bool {
    raw.and_then(|r| serde_json::from_str::<std::borrow::Cow<str>>(r.get()).ok()).is_some_and(|s| s == want)
}

/// Read one `traceEvents` element; `Err` is the field that does not read and why.
fn event(st: &mut State, bytes: &[u8], opts: &ParserOptions) -> Result<(), Bad> {
    let ev: Event = serde_json::from_slice(bytes).map_err(|e| ("", format!("not an event: {}", inner(&e))))?;
    if !is_str(ev.ph, "X") || !is_str(ev.cat, "kernel") {
        st.other += 1;
        return Ok(());
    }
    let name = match ev.name.map(|r| serde_json::from_str::<String>(r.get())) {
        Some(Ok(n)) if !n.is_empty() => n,
        Some(Ok(_)) => return Err((".name", "empty".into())),
        Some(Err(_)) => return Err((".name", format!("not a string: {}", ev.name.map(quote).unwrap_or_default()))),
        None => return Err((".name", "missing".into())),
    };
    let ts = number(ev.ts, ".ts")?;
    let dur = number(ev.dur, ".dur")?;
    if dur < 0.0 {
        return Err((".dur", format!("negative: {dur}")));
    }
    let stack: Vec<String> = match ev.args {
        None => Vec::new(),
        Some(raw) => {
            let args: Args = serde_json::from_str(raw.get()).map_err(|e| (".args", format!("not an object with a `call_stack`: {}", inner(&e))))?;
            match args.call_stack {
                None => Vec::new(),
                Some(cs) => serde_json::from_str(cs.get()).map_err(|_| (".args.call_stack", format!("not an array of strings: {}", quote(cs))))?,
            }
        }
    };
    // Proton writes ROOT first and the kernel last; the scopes lie between.
    let mut scopes: &[String] = &stack;
    if scopes.first().is_some_and(|s| s == "ROOT") {
        scopes = &scopes[1..];
    }
    if scopes.last().is_some_and(|s| *s == name) {
        scopes = &scopes[..scopes.len() - 1];
    }
    if scopes.iter().any(|s| s == LAUNCH_METADATA_SCOPE) {
        st.hook += 1;
        return Ok(());
    }
    let named = |s: &&String| !s.is_empty();
    let phase = if opts.phases.is_empty() { scopes.iter().find(named) } else { scopes.iter().rev().find(|s| opts.phases.contains(s)) };
    // A stream is an integer; anything else is not one, and costs the event nothing.
    if let Some(t) = ev.tid.and_then(|t| serde_json::from_str::<i64>(t.get()).ok()) {
        st.streams.insert(t);
    }
    let phase = phase.map_or(NONE, |p| st.phases.id(p));
    let name = st.kernels.id(&name);
    st.launches.push(Launch { ts, dur, name, phase });
    Ok(())
}

/// Parse Proton trace output whose first byte (`{`) is at the cursor.
pub(super) fn parse_scanner<R: Read>(sc: &mut Scanner<R>, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("proton", source);
    let mut st = State::default();
    let (mut docs, mut with_events) = (0usize, 0usize);
    while let Some(b) = sc.peek().map_err(|e| e.into_parse(source, "top level"))? {
        if b != b'{' {
            let e = sc.err(format!("expected `{{` (Proton's trace output is one JSON object per stream) or end of input, found {}", show(b)));
            return Err(e.into_parse(source, "top level"));
        }
        let line = sc.line();
        if document(sc, &mut st, source, opts)? {
            with_events += 1;
        } else {
            st.warn(format!("{source}:{line}: a JSON object without `traceEvents`; ignored"));
        }
        docs += 1;
    }
    if with_events == 0 {
        let what = if docs == 0 { "empty input" } else { "no `traceEvents` array" };
        return Err(ParseError::new(
            source,
            None,
            format!("{what}: neither Proton's hatchet tree (a JSON array) nor its trace output (objects with `traceEvents`)"),
        ));
    }
    if st.bad > MAX_WARNINGS {
        st.warnings.push(format!("{source}: {} events or values skipped in all", st.bad));
    }
    if st.launches.is_empty() && st.hook == 0 {
        let other = if st.other > 0 { format!(" ({} other events: Proton's instrumentation trace is not read)", st.other) } else { String::new() };
        st.warnings.push(format!("{source}: no kernel event (`ph: X`, `cat: kernel`){other}: nothing was profiled"));
    }
    out.warnings.append(&mut st.warnings);
    finish(&mut out, st, opts);
    Ok(out)
}

/// One top-level object (one stream's events); false when it has no `traceEvents`.
fn document<R: Read>(sc: &mut Scanner<R>, st: &mut State, source: &str, opts: &ParserOptions) -> Result<bool, ParseError> {
    sc.bump();
    let mut saw = false;
    sc.members(
        "a top-level member",
        |e| e.into_parse(source, "top level"),
        |sc, key| {
            if key == "traceEvents" {
                saw = true;
                events(sc, st, source, opts)
            } else {
                sc.skip().map_err(|e| e.into_parse(source, &key))
            }
        },
    )?;
    Ok(saw)
}

/// The `traceEvents` array at the cursor, element by element.
fn events<R: Read>(sc: &mut Scanner<R>, st: &mut State, source: &str, opts: &ParserOptions) -> Result<(), ParseError> {
    let at = |i: Option<usize>| i.map_or_else(|| "traceEvents".to_string(), |i| format!("traceEvents[{i}]"));
    sc.elements(
        "a traceEvents element",
        |i, e| e.into_parse(source, &at(i)),
        |i, line, offset, bytes| {
            if let Err((field, why)) = event(st, bytes, opts) {
                st.warn(format!("{source}:{line}: {}{field}: {why}; the event is skipped (byte offset {offset})", at(Some(i))));
            }
            Ok(())
        },
    )
}

fn finish(out: &mut ParseOutput, st: State, opts: &ParserOptions) {
    let default_phase = opts.phase.clone().unwrap_or_else(|| "run".into());
    let unphased = if st.launches.iter().any(|l| l.phase != NONE) { "unannotated".to_string() } else { default_phase };
    // Phases in the order their first launch appears in the file.
    let mut order: Vec<u32> = Vec::new();
    let mut slot: HashMap<u32, usize> = HashMap::new();
    let mut accs: Vec<(PhaseAcc, Vec<(f64, f64)>)> = Vec::new();
    let mut gpu_us = 0.0;
    for l in &st.launches {
        let p = *slot.entry(l.phase).or_insert_with(|| {
            order.push(l.phase);
            accs.push(Default::default());
            accs.len() - 1
        });
        let (acc, intervals) = &mut accs[p];
        acc.kernel(&st.kernels.list[l.name as usize]).add_duration(l.dur);
        intervals.push((l.ts, l.dur));
        gpu_us += l.dur;
    }
    for (phase, (acc, mut intervals)) in order.into_iter().zip(accs) {
        let name = if phase == NONE { unphased.as_str() } else { st.phases.list[phase as usize].as_str() };
        let mut t = acc.finish(name);
        if let Some(b) = super::timeline::busy(&mut intervals) {
            // Host launch calls and step markers are not in Proton's trace.
            t.metrics.extend(super::timeline::metrics(&b, intervals.len() as u64, None, None));
        }
        out.phases.push(t);
    }
    out.metrics.insert("kernel_dispatches".into(), Metric::new(st.launches.len() as f64, Some("dispatches")));
    out.metrics.insert("gpu_kernel_us".into(), Metric::new(gpu_us, Some("us")));
    out.artifacts.insert("proton_data".into(), json!("trace"));
    if st.hook > 0 {
        out.artifacts.insert("proton_launch_metadata_dispatches".into(), json!(st.hook));
    }
    if !st.streams.is_empty() {
        out.route.insert("streams".into(), json!(st.streams));
    }
}

#[cfg(test)]
mod tests {
    use super::super::proton::parse_capped;
    use super::*;

    fn run(text: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
        parse_capped(&mut text.as_bytes(), "t.chrome_trace", opts, 1 << 20)
    }

    fn ev(name: &str, ts: f64, dur: f64, stack: &[&str]) -> String {
        let mut cs: Vec<&str> = vec!["ROOT"];
        cs.extend(stack);
        cs.push(name);
        format!(
            r#"{{"args": {{"call_stack": {}}}, "cat": "kernel", "dur": {dur}, "name": "{name}", "ph": "X", "tid": 7, "ts": {ts}}}"#,
            serde_json::to_string(&cs).unwrap()
        )
    }

    fn doc(events: &[String]) -> String {
        format!(r#"{{"displayTimeUnit": "us", "traceEvents": [{}]}}"#, events.join(",\n"))
    }

    fn metric(o: &ParseOutput, phase: &str, key: &str) -> f64 {
        o.phase(phase).unwrap().metrics[key].value
    }

    #[test]
    fn scopes_become_phases_with_each_launch_and_the_timeline() {
        let text = doc(&[
            ev("k", 0.0, 2.0, &["prefill"]),
            ev("k", 5.0, 4.0, &["prefill", "layer"]),
            ev("k", 10.0, 1.0, &["decode"]),
            ev("m", 11.0, 3.0, &["decode"]),
            ev("m", 20.0, 1.0, &["decode"]),
            ev("outside", 30.0, 1.0, &[]),
        ]);
        let o = run(&text, &ParserOptions::default()).unwrap();
        let names: Vec<&str> = o.phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(names, ["prefill", "decode", "unannotated"]);
        let k = o.phase("prefill").unwrap().kernel("k").unwrap();
        assert_eq!((k.calls, k.total_us, k.min_us, k.max_us, k.median_us), (2, 6.0, Some(2.0), Some(4.0), Some(3.0)));
        let d = o.phase("decode").unwrap();
        assert_eq!(d.kernels[0].name, "m", "hottest first");
        assert_eq!(d.launches, Some(3));
        // decode: busy 1 + 3 + 1 of a 10..21 window; gaps 0 and 6.
        assert_eq!(metric(&o, "decode", "gpu_busy_us"), 5.0);
        assert_eq!(metric(&o, "decode", "timeline_window_us"), 11.0);
        assert!((metric(&o, "decode", "gpu_busy_pct") - 500.0 / 11.0).abs() < 1e-9);
        assert_eq!(metric(&o, "decode", "gap_p90_us"), 6.0);
        assert_eq!(metric(&o, "decode", "launches"), 3.0);
        assert_eq!(o.metric("kernel_dispatches"), Some(6.0));
        assert_eq!(o.metric("gpu_kernel_us"), Some(12.0));
        assert_eq!(o.route["streams"], json!([7]));
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
        // Named phases: the innermost scope of one of those names.
        let o = run(&text, &ParserOptions { phases: vec!["layer".into()], ..Default::default() }).unwrap();
        assert_eq!(o.phase("layer").unwrap().launches, Some(1));
        assert_eq!(o.phase("unannotated").unwrap().launches, Some(5));
        // No scope at all: the default phase.
        let o = run(&doc(&[ev("k", 0.0, 1.0, &[])]), &ParserOptions { phase: Some("decode".into()), ..Default::default() }).unwrap();
        assert_eq!(o.phases.len(), 1);
        assert_eq!(o.phase("decode").unwrap().launches, Some(1));
    }

    #[test]
    fn one_object_per_stream_share_one_time_base() {
        let text = format!("{}\n{}\n", doc(&[ev("a", 0.0, 10.0, &["decode"])]), doc(&[ev("b", 5.0, 10.0, &["decode"])]).replace("\"tid\": 7", "\"tid\": 9"));
        let o = run(&text, &ParserOptions::default()).unwrap();
        assert_eq!(o.phase("decode").unwrap().launches, Some(2));
        // Overlapping streams count once.
        assert_eq!(metric(&o, "decode", "gpu_busy_us"), 15.0);
        assert_eq!(o.route["streams"], json!([7, 9]));
    }

    #[test]
    fn the_launch_hooks_kernels_are_left_out() {
        let text = doc(&[ev("k", 0.0, 1.0, &["decode"]), ev("sum", 2.0, 1.0, &["decode", LAUNCH_METADATA_SCOPE])]);
        let o = run(&text, &ParserOptions::default()).unwrap();
        assert!(o.phase("decode").unwrap().kernel("sum").is_none());
        assert_eq!(o.artifacts["proton_launch_metadata_dispatches"], 1);
        assert_eq!(o.metric("kernel_dispatches"), Some(1.0));
    }

    #[test]
    fn bad_events_are_warnings_naming_line_and_field_and_the_rest_is_kept() {
        let text = doc(&[
            ev("good", 0.0, 1.0, &["decode"]),
            ev("k", 1.0, 1.0, &["decode"]).replace("\"dur\": 1", "\"dur\": \"x\""),
            ev("k", 1.0, 1.0, &["decode"]).replace("\"ts\": 1", "\"ts\": null"),
            ev("k", 1.0, -1.0, &["decode"]),
            ev("k", 1.0, 1.0, &["decode"]).replace("\"name\": \"k\"", "\"name\": 5"),
            r#"{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"call_stack": "ROOT"}}"#.into(),
            "42".into(),
            r#"{"ph": "M", "name": "process_name"}"#.into(),
            ev("kept", 3.0, 1.0, &["decode"]),
        ]);
        let o = run(&text, &ParserOptions::default()).unwrap();
        let names: Vec<&str> = o.phase("decode").unwrap().kernels.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["good", "kept"]);
        let w = o.warnings.join("\n");
        assert!(w.contains("t.chrome_trace:2: traceEvents[1].dur: not a number: \"x\"; the event is skipped (byte offset"), "{w}");
        assert!(w.contains("t.chrome_trace:3: traceEvents[2].ts: missing or null"), "{w}");
        assert!(w.contains("traceEvents[3].dur: negative: -1"), "{w}");
        assert!(w.contains("traceEvents[4].name: not a string: 5"), "{w}");
        assert!(w.contains("traceEvents[5].args.call_stack: not an array of strings: \"ROOT\""), "{w}");
        assert!(w.contains("traceEvents[6]: not an event: invalid type: integer `42`, expected struct Event; the event is skipped"), "{w}");
        assert_eq!(o.warnings.len(), 6, "a metadata event is no warning: {w}");
    }

    #[test]
    fn broken_structure_is_an_error_naming_line_offset_and_path() {
        let text = doc(&[ev("k", 0.0, 1.0, &[]), ev("k", 1.0, 1.0, &[])]);
        let e = run(&text.replacen(",\n", "\n", 1), &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.starts_with("t.chrome_trace:2: traceEvents[0]: expected `,` or `]` after a traceEvents element, found `{`"), "{e}");
        let e = run(&text[..text.len() - 30], &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("traceEvents[1]: truncated"), "{e}");
        let e = run(r#"{"traceEvents": 5}"#, &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("traceEvents: expected an array, found `5`"), "{e}");
        let e = run(r#"{"displayTimeUnit": "us"}"#, &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("no `traceEvents` array"), "{e}");
        let e = run(&format!("{text} x"), &ParserOptions::default()).unwrap_err().to_string();
        assert!(e.contains("top level: expected `{` (Proton's trace output is one JSON object per stream) or end of input, found `x`"), "{e}");
        // Nothing but metadata: a warning, not an error.
        let o = run(r#"{"traceEvents": [{"ph": "X", "cat": "cycle", "name": "s"}]}"#, &ParserOptions::default()).unwrap();
        assert!(o.warnings[0].contains("no kernel event") && o.warnings[0].contains("1 other events"), "{:?}", o.warnings);
    }

    #[test]
    fn past_the_warning_cap_bad_events_are_counted() {
        let bad: Vec<String> = (0..50).map(|i| ev("k", i as f64, 1.0, &[]).replace("\"dur\": 1", "\"dur\": []")).collect();
        let o = run(&doc(&bad), &ParserOptions::default()).unwrap();
        assert_eq!(o.warnings.len() as u64, MAX_WARNINGS + 2, "{:?}", o.warnings);
        assert!(o.warnings.iter().any(|w| w.ends_with("50 events or values skipped in all")), "{:?}", o.warnings);
    }
}
