//! Joining a trace's Triton kernel events to katlas's launch records and to the Triton cache.
//!
//! A kernel event has a name, a block (num_warps × 32 threads), dynamic shared memory and the
//! launching op's `External id`; a launch record has the same name, num_warps and shared plus
//! the tensors it was handed. With the hook's `profiled` ordinals the n-th kernel event of a
//! name is the n-th profiled launch; without them (older records, or a trace cut short) a
//! record is picked by name, block and shared memory and, when the op launched only this
//! kernel, by tensors whose sizes contain the op's inputs. A record is never guessed: two
//! candidates that disagree on the bytes leave the event unjoined.

use super::triton_launches::{constexprs, AutotuneRecord, LaunchRecord, Records};
use super::ttir_access::{self, KernelAccess};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

/// A Triton kernel's launch facts as fit shows them (`extra.triton` of a kernel sample).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TritonFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_warps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_stages: Option<u32>,
    /// Dynamic shared memory per block, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<u64>,
    /// Constexpr arguments (block sizes): capital names and whatever an autotuner chose.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub constexprs: BTreeMap<String, Value>,
    /// The autotuner's choice for this kernel's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autotune: Option<AutotuneFacts>,
    /// The `@triton.jit` function's file and line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The Triton cache entry (`<hash>/<name>.json`) with this name, num_warps and shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_entry: Option<String>,
    /// Argument signatures (launch records) joined to this kernel's calls; the facts are those
    /// of the one joined most often.
    #[serde(default)]
    pub signatures: u32,
    /// `launch records`, `triton cache` or both.
    pub source: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AutotuneFacts {
    /// The tuning key, by key name.
    pub key: BTreeMap<String, Value>,
    /// Configs the autotuner had to choose from.
    pub configs: u64,
    /// The winning config (`kwargs`, `num_warps`, `num_stages`).
    pub best: Value,
}

/// One `<hash>/<name>.json` of a Triton cache.
#[derive(Debug, Clone)]
pub struct CacheEntry {
    pub path: String,
    pub block: u32,
    pub num_warps: u32,
    pub num_stages: Option<u32>,
    pub shared: u64,
    /// What the compiled kernel reads and writes, from the TTIR beside the metadata.
    pub access: Option<KernelAccess>,
}

#[derive(Deserialize)]
struct CacheJson {
    num_warps: u32,
    #[serde(default)]
    warp_size: Option<u32>,
    #[serde(default)]
    num_stages: Option<u32>,
    #[serde(default)]
    shared: u64,
}

/// Directories of a cache looked into at most: a cache is one directory per compiled kernel.
const MAX_CACHE_DIRS: usize = 200_000;
/// A launch metadata file is a few KB; anything far larger is not one.
const MAX_CACHE_JSON: u64 = 1 << 20;

/// The cache entries of the named kernels (only `<name>.json` of those names is read).
pub fn read_cache(dir: &Path, names: &HashSet<&str>, warnings: &mut Vec<String>) -> HashMap<String, Vec<CacheEntry>> {
    let mut out: HashMap<String, Vec<CacheEntry>> = HashMap::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        warnings.push(format!("{}: Triton cache not readable: no cache entries joined", dir.display()));
        return out;
    };
    for e in rd.flatten().take(MAX_CACHE_DIRS) {
        // Entries are plain directories; a link could lead anywhere.
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(e.path()) else { continue };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().to_string();
            let Some(stem) = name.strip_suffix(".json") else { continue };
            if !names.contains(stem) || !f.file_type().is_ok_and(|t| t.is_file()) || f.metadata().map_or(true, |m| m.len() > MAX_CACHE_JSON) {
                continue;
            }
            let path = f.path();
            match std::fs::read(&path).map_err(|e| e.to_string()).and_then(|b| serde_json::from_slice::<CacheJson>(&b).map_err(|e| e.to_string())) {
                Ok(j) => out.entry(stem.to_string()).or_default().push(CacheEntry {
                    path: path.display().to_string(),
                    block: j.num_warps.saturating_mul(j.warp_size.unwrap_or(32)),
                    num_warps: j.num_warps,
                    num_stages: j.num_stages,
                    shared: j.shared,
                    access: read_access(&e.path(), stem, warnings),
                }),
                Err(e) => warnings.push(format!("{}: not Triton launch metadata: {e}", path.display())),
            }
        }
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| a.path.cmp(&b.path));
    }
    out
}

/// The accesses of the kernel's TTIR (`<name>.source` in Triton 3, `<name>.ttir` before).
fn read_access(dir: &Path, name: &str, warnings: &mut Vec<String>) -> Option<KernelAccess> {
    // A plain file only: a link in a cache entry could lead anywhere.
    let path = ["source", "ttir"].iter().map(|x| dir.join(format!("{name}.{x}"))).find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))?;
    let text = (|| {
        use std::io::Read;
        let f = std::fs::File::open(&path).map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        f.take(ttir_access::MAX_TTIR_BYTES as u64 + 1).read_to_end(&mut buf).map_err(|e| e.to_string())?;
        String::from_utf8(buf).map_err(|_| "not UTF-8".to_string())
    })();
    match text.and_then(|t| ttir_access::analyze(&t, name)) {
        Ok(a) => Some(a),
        Err(e) => {
            warnings.push(format!("{}: TTIR not read ({e}): this kernel's bytes count each tensor once", path.display()));
            None
        }
    }
}

/// What a kernel event looks like to the join.
pub struct Event<'a> {
    pub name: &'a str,
    /// This event's place among the events of its name, in time order.
    pub ordinal: u64,
    pub block: Option<u32>,
    pub shared: Option<u64>,
    /// Element counts of the launching op's tensor inputs, when that op launched only this kernel.
    pub op_numels: Option<&'a [u64]>,
}

pub struct Join {
    pub records: Records,
    by_name: HashMap<String, Vec<usize>>,
    pub cache: HashMap<String, Vec<CacheEntry>>,
    /// Per launch record, what the compiled kernel it launched reads and writes.
    compiled: Vec<Option<KernelAccess>>,
}

impl Join {
    pub fn new(records: Records, cache: HashMap<String, Vec<CacheEntry>>) -> Self {
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, r) in records.launches.iter().enumerate() {
            by_name.entry(r.kernel.clone()).or_default().push(i);
        }
        let compiled = records.launches.iter().map(|r| compiled_access(r, &cache)).collect();
        Self { records, by_name, cache, compiled }
    }

    /// What the kernel a launch record launched reads and writes, when its cache entry is known.
    pub fn access(&self, rec: usize) -> Option<&KernelAccess> {
        self.compiled.get(rec)?.as_ref()
    }

    /// Whether the join knows this kernel name as a Triton kernel.
    pub fn knows(&self, name: &str) -> bool {
        self.by_name.contains_key(name) || self.cache.contains_key(name)
    }

    /// The launch record of one kernel event, if exactly one fits.
    pub fn record(&self, ev: &Event) -> Option<usize> {
        let all = self.by_name.get(ev.name)?;
        if let Some(&i) = all.iter().find(|&&i| self.records.launches[i].has_ordinal(ev.ordinal)) {
            return Some(i);
        }
        let fits =
            |r: &LaunchRecord| ev.block.zip(r.num_warps).is_none_or(|(b, w)| b == w.saturating_mul(32)) && ev.shared.zip(r.shared).is_none_or(|(a, b)| a == b);
        let cands: Vec<usize> = all.iter().copied().filter(|&i| fits(&self.records.launches[i])).collect();
        // The records that share the most tensor sizes with the op's inputs (an op may also
        // hand its kernel's caller a weight the kernel never sees, so not all need match).
        let score = |i: usize| ev.op_numels.map_or(0, |need| shared_sizes(&self.records.launches[i], need));
        let best = cands.iter().map(|&i| score(i)).max().unwrap_or(0);
        let pool: Vec<usize> = cands.into_iter().filter(|&i| score(i) == best).collect();
        let first = *pool.first()?;
        let bytes = self.records.launches[first].operand_bytes();
        pool.iter().all(|&i| self.records.launches[i].operand_bytes() == bytes).then_some(first)
    }

    /// The cache entry with this name, block and shared memory.
    pub fn cache_entry(&self, name: &str, block: Option<u32>, shared: Option<u64>) -> Option<&CacheEntry> {
        let v = self.cache.get(name)?;
        let fit: Vec<&CacheEntry> = v.iter().filter(|c| block.is_none_or(|b| b == c.block) && shared.is_none_or(|s| s == c.shared)).collect();
        // Two entries with one launch configuration differ in constexprs the trace cannot see:
        // the first is named, its launch facts are the same.
        fit.first().copied()
    }

    /// The autotuner entry that chose this record's configuration.
    fn autotune(&self, rec: &LaunchRecord) -> Option<&AutotuneRecord> {
        let func = rec.function.as_deref().unwrap_or(&rec.kernel);
        let mine: Vec<&AutotuneRecord> =
            self.records.autotune.iter().filter(|a| a.function.as_deref() == Some(func) && (a.file.is_none() || a.file == rec.file)).collect();
        let keyed = |a: &&AutotuneRecord| a.key_names.iter().zip(&a.key).all(|(n, v)| rec.scalars.get(n).is_none_or(|s| s == v));
        let best = |a: &&AutotuneRecord| a.best_kwargs().is_none_or(|kw| kw.iter().all(|(k, v)| rec.scalars.get(k).is_none_or(|s| s == v)));
        let hits: Vec<&&AutotuneRecord> = mine.iter().filter(|a| keyed(a) && best(a)).collect();
        hits.first().map(|a| **a)
    }

    /// The facts of a kernel from its most joined record and its cache entry.
    pub fn facts(&self, rec: Option<usize>, signatures: u32, cache: Option<&CacheEntry>) -> Option<TritonFacts> {
        let r = rec.map(|i| &self.records.launches[i]);
        if r.is_none() && cache.is_none() {
            return None;
        }
        let tuned = r.and_then(|r| self.autotune(r));
        let source = match (r.is_some(), cache.is_some()) {
            (true, true) => "launch records + triton cache",
            (true, false) => "launch records",
            _ => "triton cache",
        };
        Some(TritonFacts {
            num_warps: r.and_then(|r| r.num_warps).or(cache.map(|c| c.num_warps)),
            num_stages: r.and_then(|r| r.num_stages).or(cache.and_then(|c| c.num_stages)),
            shared: r.and_then(|r| r.shared).or(cache.map(|c| c.shared)),
            constexprs: r.map(|r| constexprs(r, tuned)).unwrap_or_default(),
            autotune: tuned.map(|a| AutotuneFacts {
                key: a.key_names.iter().cloned().zip(a.key.iter().cloned()).collect(),
                configs: a.configs,
                best: a.best.clone(),
            }),
            file: r.and_then(|r| r.file.clone()),
            line: r.and_then(|r| r.line),
            cache_entry: cache.map(|c| c.path.clone()),
            signatures,
            source: source.into(),
        })
    }
}

/// What the kernel a record launched reads and writes: the cache entries with its name, block
/// and shared memory whose TTIR parameters are exactly the record's tensors (an argument passed
/// as `None` is not a parameter of the specialization). Entries that differ only in constexprs
/// the record cannot be tied to (block sizes) are merged: a parameter any of them reads or
/// writes is read or written, through the largest tile, so the bytes are never below the
/// launched one's.
fn compiled_access(r: &LaunchRecord, cache: &HashMap<String, Vec<CacheEntry>>) -> Option<KernelAccess> {
    if r.tensors.is_empty() {
        return None;
    }
    let mut want: Vec<&str> = r.tensors.iter().map(|t| t.arg.as_str()).collect();
    want.sort_unstable();
    let fits = |c: &CacheEntry| {
        let Some(a) = &c.access else { return false };
        let mut have: Vec<&str> = a.pointers().collect();
        have.sort_unstable();
        r.num_warps.is_none_or(|w| w == c.num_warps) && r.shared.is_none_or(|s| s == c.shared) && have == want
    };
    let mut hits = cache.get(&r.kernel)?.iter().filter(|c| fits(c)).filter_map(|c| c.access.as_ref());
    let mut merged = hits.next()?.clone();
    for a in hits {
        merged.merge(a);
    }
    Some(merged)
}

/// How many of `need` the record's tensor sizes hold (as a multiset).
fn shared_sizes(r: &LaunchRecord, need: &[u64]) -> usize {
    let mut have: Vec<u64> = r.tensors.iter().map(|t| t.numel()).collect();
    need.iter()
        .filter(|n| match have.iter().position(|h| h == *n) {
            Some(i) => {
                have.swap_remove(i);
                true
            }
            None => false,
        })
        .count()
}
