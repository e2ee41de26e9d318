//! katlas's Triton launch records (`data/python/sitecustomize.py`, written to the file
//! `KATLAS_TRITON_LAUNCHES` names): per kernel and argument signature, the tensor arguments
//! (shape, dtype, bytes of the view, whether it aliases an earlier argument), the scalar and
//! constexpr arguments, num_warps, num_stages and shared memory of the compiled kernel, the
//! launch count and, when torch.profiler was recording, the ordinals of the profiled launches;
//! plus one `katlas_triton_autotune` line per autotuner cache entry (its key and best config).
//!
//! A line that is not a record is a warning naming file, line and field; the records beside it
//! are kept. The torch-trace parser joins these records to its kernel events (`torch_trace`).

use super::{for_each_line, ParseError, ParseOutput, ParserOptions};
use katlas_model::Metric;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::BufRead;

/// One tensor argument of a launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TensorArg {
    pub arg: String,
    #[serde(default)]
    pub shape: Vec<u64>,
    #[serde(default)]
    pub dtype: String,
    /// Bytes of the view (numel × element size).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Same data pointer as an earlier argument of this launch (counted once).
    #[serde(default)]
    pub alias: bool,
}

impl TensorArg {
    pub fn numel(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// One kernel and argument signature (`katlas_triton_launch` line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LaunchRecord {
    pub kernel: String,
    #[serde(default)]
    pub function: Option<String>,
    /// The `@triton.jit` function's file and first line.
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub launches: u64,
    #[serde(default)]
    pub tensors: Vec<TensorArg>,
    #[serde(default)]
    pub scalars: BTreeMap<String, Value>,
    #[serde(default)]
    pub num_warps: Option<u32>,
    #[serde(default)]
    pub num_stages: Option<u32>,
    #[serde(default)]
    pub shared: Option<u64>,
    /// Launches made while torch.profiler recorded: `[first, count]` runs of the per-kernel-name
    /// ordinal (the n-th profiled launch of a name is the n-th kernel event of that name).
    #[serde(default)]
    pub profiled: Vec<[u64; 2]>,
}

impl LaunchRecord {
    /// Operand bytes: each distinct tensor argument once (reads and writes alike), a lower
    /// bound of what the kernel moves; `None` when a tensor's size is unknown.
    pub fn operand_bytes(&self) -> Option<u64> {
        // The recorder's overflow record (past its signature cap) keeps no arguments.
        if self.tensors.is_empty() {
            return None;
        }
        self.tensors.iter().filter(|t| !t.alias).map(|t| t.bytes).sum()
    }

    /// Bytes read and bytes written by one launch of `programs` programs, each tensor through
    /// what the compiled kernel does with it: a parameter only loaded is read once, one only
    /// stored is written once, one never touched costs nothing, and a tensor reached only in
    /// tiles outside loops costs at most its tiles × programs. `None` when a tensor is not a
    /// parameter of the kernel or its size is unknown.
    pub fn access_bytes(&self, access: &super::ttir_access::KernelAccess, programs: Option<u64>) -> Option<(u64, u64)> {
        if self.tensors.is_empty() {
            return None;
        }
        let (mut read, mut written) = (0u64, 0u64);
        for t in &self.tensors {
            let p = access.param(&t.arg)?;
            let size = t.bytes?;
            // An alias of an earlier argument is the same memory: its reads are that one's.
            if !t.alias {
                read += p.read.map_or(0, |r| r.bytes(size, programs));
            }
            written += p.write.map_or(0, |r| r.bytes(size, programs));
        }
        Some((read, written))
    }

    /// Whether the `n`-th profiled launch of this kernel name is one of this signature's.
    pub fn has_ordinal(&self, n: u64) -> bool {
        self.profiled.iter().any(|[first, count]| n >= *first && n - first < *count)
    }
}

/// An autotuner's choice (`katlas_triton_autotune` line): the key it tuned for, how many
/// configs it had, the best one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AutotuneRecord {
    #[serde(default)]
    pub function: Option<String>,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u64>,
    #[serde(default)]
    pub key_names: Vec<String>,
    #[serde(default)]
    pub key: Vec<Value>,
    #[serde(default)]
    pub configs: u64,
    #[serde(default)]
    pub best: Value,
}

impl AutotuneRecord {
    /// The best config's kwargs (the constexprs it chose).
    pub fn best_kwargs(&self) -> Option<&serde_json::Map<String, Value>> {
        self.best.get("kwargs").and_then(Value::as_object)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Records {
    pub launches: Vec<LaunchRecord>,
    pub autotune: Vec<AutotuneRecord>,
    /// Lines that were not records, each `source:line: reason`.
    pub warnings: Vec<String>,
}

/// Read the records of one file; bad lines become warnings, never errors.
pub fn read(r: &mut dyn BufRead, source: &str) -> Result<Records, ParseError> {
    let mut out = Records::default();
    for_each_line(r, source, |n, line| {
        let t = line.trim();
        if t.is_empty() {
            return Ok(());
        }
        let v: Value = match serde_json::from_str(t) {
            Ok(v) => v,
            Err(e) => {
                out.warnings.push(format!("{source}:{n}: not JSON: {e}"));
                return Ok(());
            }
        };
        let is = |k: &str| v.get(k).is_some();
        let got = if is("katlas_triton_launch") {
            serde_path_to_error::deserialize::<_, LaunchRecord>(&v).map(|r| out.launches.push(r))
        } else if is("katlas_triton_autotune") {
            serde_path_to_error::deserialize::<_, AutotuneRecord>(&v).map(|r| out.autotune.push(r))
        } else {
            out.warnings.push(format!("{source}:{n}: neither `katlas_triton_launch` nor `katlas_triton_autotune`: not a launch record"));
            return Ok(());
        };
        if let Err(e) = got {
            out.warnings.push(format!("{source}:{n}: field `{}`: {}", e.path(), e.inner()));
        }
        Ok(())
    })?;
    Ok(out)
}

/// Scalar arguments that are constexprs by Triton's naming convention (capitals: `BLOCK_SIZE`,
/// `BT`), plus those an autotuner chose; launch options (`num_warps` …) are not arguments.
pub fn constexprs(rec: &LaunchRecord, tuned: Option<&AutotuneRecord>) -> BTreeMap<String, Value> {
    let chosen = tuned.and_then(AutotuneRecord::best_kwargs);
    rec.scalars
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "num_warps" | "num_stages" | "num_ctas" | "maxnreg"))
        .filter(|(k, _)| {
            chosen.is_some_and(|c| c.contains_key(*k)) || (k.chars().any(|c| c.is_ascii_uppercase()) && !k.chars().any(|c| c.is_ascii_lowercase()))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The `triton-launches` parser: the records as artifacts, bad lines as warnings.
pub fn parse(r: &mut dyn BufRead, source: &str, _opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let recs = read(r, source)?;
    let mut out = ParseOutput::new("triton-launches", source);
    out.metrics.insert("triton_launch_records".into(), Metric::new(recs.launches.len() as f64, None));
    out.metrics.insert("triton_launches".into(), Metric::new(recs.launches.iter().map(|r| r.launches as f64).sum(), Some("launches")));
    out.artifacts.insert("triton_launches".into(), json!(recs.launches));
    if !recs.autotune.is_empty() {
        out.artifacts.insert("triton_autotune".into(), json!(recs.autotune));
    }
    if recs.launches.is_empty() && recs.warnings.is_empty() {
        out.warnings.push(format!("{source}: no Triton launch records (was the hook on PYTHONPATH and Triton imported?)"));
    }
    out.warnings.extend(recs.warnings);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_warnings_with_file_line_and_field_and_good_ones_stay() {
        let text = concat!(
            r#"{"katlas_triton_launch": 1, "kernel": "k", "launches": 2, "tensors": [{"arg": "x", "shape": [4, 8], "dtype": "bfloat16", "bytes": 64, "alias": false}, {"arg": "y", "shape": [4, 8], "dtype": "bfloat16", "bytes": 64, "alias": true}], "scalars": {"BLOCK": 32, "n": 8, "num_warps": 4}, "num_warps": 4, "shared": 0, "profiled": [[0, 2]]}"#,
            "\n{broken\n",
            r#"{"katlas_triton_launch": 1, "kernel": "k2", "num_warps": "four"}"#,
            "\n",
            r#"{"other": 1}"#,
            "\n",
            r#"{"katlas_triton_autotune": 1, "function": "k", "key_names": ["n"], "key": [8], "configs": 3, "best": {"kwargs": {"n": 8}}}"#,
            "\n"
        );
        let r = read(&mut text.as_bytes(), "l.jsonl").unwrap();
        assert_eq!(r.launches.len(), 1);
        assert_eq!(r.autotune.len(), 1);
        assert_eq!(r.launches[0].operand_bytes(), Some(64), "the alias is counted once");
        assert!(r.launches[0].has_ordinal(1) && !r.launches[0].has_ordinal(2));
        assert_eq!(r.warnings.len(), 3, "{:?}", r.warnings);
        assert!(r.warnings[0].starts_with("l.jsonl:2: not JSON"), "{:?}", r.warnings);
        assert!(r.warnings[1].starts_with("l.jsonl:3: field `num_warps`"), "{:?}", r.warnings);
        assert!(r.warnings[2].starts_with("l.jsonl:4:"), "{:?}", r.warnings);
        let c = constexprs(&r.launches[0], Some(&r.autotune[0]));
        assert_eq!(c.keys().collect::<Vec<_>>(), ["BLOCK", "n"], "capitals and the tuned `n`; never num_warps");
    }
}
