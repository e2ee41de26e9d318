//! Which stored samples this host wrote for this plan. An eval resumes from its own
//! `samples.jsonl`, but that path is also where a team store's pull writes another host's
//! samples: replayed as local measurement they would become a verdict nobody measured here.
//! So every sample this host writes is vouched for first in `own.jsonl` beside it (this host,
//! the plan's digest, the sample line's digest). A pull writes only `samples.jsonl` and
//! `result.json`, never `own.jsonl`, so a line it adds has no voucher. A sample line without
//! one is foreign, and a file holding a foreign line is never resumed or appended to.

use katlas_corpus::{append_jsonl, read_jsonl, Fsync, StoreError};
use katlas_model::digest::md5_hex;
use katlas_model::ledger::{EvalSample, EVAL_SAMPLE_SCHEMA};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One voucher: `host` wrote the sample at `seq` whose line digests to `md5`, under the plan
/// whose `plan.json` digests to `plan`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Voucher {
    seq: u64,
    host: String,
    plan: String,
    md5: String,
}

/// The vouchers of one eval directory, for this host and one plan.
pub struct Own {
    path: PathBuf,
    host: String,
    plan: String,
    vouched: HashMap<u64, String>,
}

/// This host, as far as a file copied from elsewhere cannot claim it: its hostname and, where
/// the system has one, its machine id.
pub fn this_host() -> String {
    let name = katlas_identity::host::host_identity().hostname.unwrap_or_default();
    let machine = std::fs::read_to_string("/etc/machine-id").map(|s| s.trim().to_string()).unwrap_or_default();
    format!("{name}/{machine}")
}

/// Digest of the plan a directory's samples belong to (its `plan.json` bytes).
pub fn plan_digest(dir: &Path) -> Option<String> {
    std::fs::read(dir.join("plan.json")).ok().map(|b| md5_hex(&b))
}

/// The line `append_jsonl` writes for a sample, whose digest the voucher holds.
fn line_md5(s: &EvalSample) -> String {
    md5_hex(&serde_json::to_vec(s).expect("a sample serialises"))
}

impl Own {
    /// The vouchers in `dir` that this host wrote for the plan in `dir/plan.json`. A voucher
    /// line that does not parse vouches for nothing.
    pub fn load(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join("own.jsonl");
        let host = this_host();
        let plan = plan_digest(dir).unwrap_or_default();
        let mut vouched = HashMap::new();
        if path.exists() {
            for l in read_jsonl::<Voucher>(&path, None)?.records {
                let v = l.record;
                if v.host == host && v.plan == plan && !plan.is_empty() {
                    vouched.insert(v.seq, v.md5);
                }
            }
        }
        Ok(Self { path, host, plan, vouched })
    }

    /// Whether this host wrote `s` under this plan.
    pub fn vouches(&self, s: &EvalSample) -> bool {
        self.vouched.get(&s.seq).is_some_and(|m| *m == line_md5(s))
    }

    /// Vouch for `s` before it is appended: a kill between the two leaves a voucher for a
    /// line that was never written, which vouches for nothing.
    pub fn vouch(&mut self, s: &EvalSample) -> Result<(), StoreError> {
        let v = Voucher { seq: s.seq, host: self.host.clone(), plan: self.plan.clone(), md5: line_md5(s) };
        append_jsonl(&self.path, std::slice::from_ref(&v), Fsync::Batch)?;
        self.vouched.insert(v.seq, v.md5);
        Ok(())
    }
}

/// Why the samples stored in `dir` must not be resumed, when some were not written by this
/// host for the directory's plan (pulled from a team store, copied from another machine).
/// Lines that do not parse are not counted: a resume reports and re-measures those.
pub fn foreign(dir: &Path) -> Option<String> {
    let samples = dir.join("samples.jsonl");
    if !samples.exists() {
        return None;
    }
    let own = match Own::load(dir) {
        Ok(o) => o,
        Err(e) => return Some(format!("its sample vouchers cannot be read ({e})")),
    };
    let report = match read_jsonl::<EvalSample>(&samples, Some(EVAL_SAMPLE_SCHEMA)) {
        Ok(r) => r,
        Err(e) => return Some(format!("its samples cannot be read ({e})")),
    };
    let total = report.records.len();
    let alien = report.records.iter().filter(|l| !own.vouches(&l.record)).count();
    (alien > 0).then(|| {
        format!(
            "{alien} of its {total} stored sample(s) were not written by this host for this plan (pulled or copied evidence is another host's, never resumed as local measurement)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn sample(seq: u64, value: f64) -> EvalSample {
        EvalSample {
            schema: EVAL_SAMPLE_SCHEMA.into(),
            eval_id: "e".into(),
            seq,
            side: "A".into(),
            block: 0,
            pass: "measured".into(),
            metric: "tok_s".into(),
            value: Some(value),
            metrics: BTreeMap::from([("tok_s".to_string(), value)]),
            started_at: "2026-01-01T00:00:00Z".into(),
            wall_s: 0.1,
            exit_code: Some(0),
            error: None,
            telemetry: None,
            throttled: false,
            route: None,
            code_objects: Vec::new(),
        }
    }

    #[test]
    fn only_lines_this_host_vouched_for_under_this_plan_are_its_own() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        std::fs::write(dir.join("plan.json"), "{\"plan\":1}").unwrap();
        let mut own = Own::load(dir).unwrap();
        let mine = sample(0, 100.0);
        own.vouch(&mine).unwrap();
        append_jsonl(&dir.join("samples.jsonl"), std::slice::from_ref(&mine), Fsync::Never).unwrap();
        assert_eq!(foreign(dir), None);
        let reloaded = Own::load(dir).unwrap();
        assert!(reloaded.vouches(&mine));
        // The same seq with another value (a forged line) and a seq never vouched for.
        assert!(!reloaded.vouches(&sample(0, 50.0)));
        assert!(!reloaded.vouches(&sample(1, 100.0)));
        append_jsonl(&dir.join("samples.jsonl"), &[sample(1, 100.0)], Fsync::Never).unwrap();
        assert!(foreign(dir).is_some_and(|w| w.starts_with("1 of its 2 stored sample(s)")), "{:?}", foreign(dir));
        // Another plan: nothing this host wrote before counts.
        std::fs::write(dir.join("plan.json"), "{\"plan\":2}").unwrap();
        assert!(!Own::load(dir).unwrap().vouches(&mine));
        // Another host's voucher vouches for nothing here.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("plan.json"), "{\"plan\":1}").unwrap();
        let v = Voucher { seq: 0, host: "elsewhere/0".into(), plan: plan_digest(other.path()).unwrap(), md5: line_md5(&mine) };
        append_jsonl(&other.path().join("own.jsonl"), &[v], Fsync::Never).unwrap();
        assert!(!Own::load(other.path()).unwrap().vouches(&mine));
    }
}
