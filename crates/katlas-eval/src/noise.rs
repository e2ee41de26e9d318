//! Noise bands calibrated by `katlas eval --aa`, kept in `.katlas/noise.json` by
//! command fingerprint, and the rule for when an A/A may set one.
//!
//! An A/A run of the baseline against itself measures the smallest effect the setup
//! can resolve: the half-width of its interval. That number becomes the noise band of
//! later evals of the same command, so a bad calibration silently hides regressions
//! (a ±31% band turns a true 10% slowdown into `no_change`). An A/A therefore sets a
//! band only when it is trustworthy:
//!
//! - its verdict is `no_change` or `inconclusive` (not `unstable`, not a "change", not
//!   failed runs);
//! - the band is at most `max_band` (default 10%, `[eval] max_band`);
//! - the band is at most `CV_FACTOR` × the larger robust CV of the two sides. With the
//!   default plans the half-width of a trimmed-mean ratio's interval is about
//!   2·√(2/n)·CV (≈ 1.3·CV at n = 10, 2·CV at n = 4), so a band above 3·CV means the
//!   interval was blown up by a few wild runs, not by the steady noise it should measure.
//!
//! Otherwise nothing is stored and the refusal names the measured CV and what to do.

use crate::error::EvalError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Largest band an A/A may store unless `[eval] max_band` says otherwise.
pub const DEFAULT_MAX_BAND: f64 = 0.10;
/// A band above this multiple of the measured CV is implausible (see the module doc).
pub const CV_FACTOR: f64 = 3.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Relative half-width of the A/A interval (0.02 = ±2%).
    pub band: f64,
    /// The larger robust CV of the two A/A sides.
    #[serde(default)]
    pub cv: Option<f64>,
    #[serde(default)]
    pub runs_per_side: Option<u32>,
    #[serde(default)]
    pub eval_id: Option<String>,
    #[serde(default)]
    pub calibrated_at: Option<String>,
}

impl Calibration {
    /// "eval --aa <id> on <date> (CV x%, n runs/side)", for the verdict's reasons.
    pub fn describe(&self) -> String {
        let mut s = "the eval --aa calibration".to_string();
        if let Some(id) = &self.eval_id {
            s.push_str(&format!(" {id}"));
        }
        if let Some(t) = &self.calibrated_at {
            s.push_str(&format!(" of {}", &t[..t.len().min(10)]));
        }
        let mut parts = Vec::new();
        if let Some(cv) = self.cv {
            parts.push(format!("CV {:.2}%", cv * 100.0));
        }
        if let Some(n) = self.runs_per_side {
            parts.push(format!("{n} runs/side"));
        }
        if !parts.is_empty() {
            s.push_str(&format!(" ({})", parts.join(", ")));
        }
        s
    }
}

/// The calibrations in `path`; a missing file is empty. A file or value that cannot be
/// read is an error naming the file and key: a corrupt band must not be ignored silently.
pub fn read(path: &Path) -> Result<BTreeMap<String, Calibration>, EvalError> {
    // A band is judged on: never taken from a file a link points at.
    katlas_fs::check(path).map_err(EvalError::Guard)?;
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => return Err(EvalError::Io { path: path.into(), source }),
    };
    let raw: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| EvalError::Input(format!("{}: {e} (delete it and run `katlas eval --aa` again)", path.display())))?;
    let mut out = BTreeMap::new();
    for (k, v) in raw {
        // Older files stored the bare band.
        let c = match &v {
            serde_json::Value::Number(n) => {
                Calibration { band: n.as_f64().unwrap_or(f64::NAN), cv: None, runs_per_side: None, eval_id: None, calibrated_at: None }
            }
            _ => serde_json::from_value(v.clone()).map_err(|e| EvalError::Input(format!("{}: {k}: {e}", path.display())))?,
        };
        if !(c.band.is_finite() && (0.0..1.0).contains(&c.band)) {
            return Err(EvalError::Input(format!("{}: {k}: band {}: expected a fraction in [0, 1)", path.display(), c.band)));
        }
        out.insert(k, c);
    }
    Ok(out)
}

pub fn write(path: &Path, map: &BTreeMap<String, Calibration>) -> std::io::Result<()> {
    katlas_fs::write_atomic(path, (serde_json::to_string_pretty(map).expect("calibrations serialise") + "\n").as_bytes())
}

/// Whether an A/A with this verdict, band and CV may set a band; the refusal says why
/// and what to do.
pub fn admit(verdict: katlas_model::ledger::Verdict, band: f64, cv: f64, runs: u32, max_band: f64) -> Result<(), String> {
    use katlas_model::ledger::Verdict;
    let remedy = format!(
        "measured robust CV {:.2}% over {runs} runs/side. To calibrate: more runs (-n {}), a settle step between blocks (--settle CMD), pinning the process (taskset -c N, a fixed CPU/GPU clock if you own the machine), or a metric that measures the work (CPU or GPU time instead of wall clock)",
        cv * 100.0,
        (runs * 2).max(10)
    );
    match verdict {
        Verdict::NoChange | Verdict::Inconclusive => {}
        Verdict::Improved | Verdict::Regressed => {
            return Err(format!("the A/A called the baseline different from itself ({verdict}): the runs share state or drift; no band stored; {remedy}"))
        }
        v => return Err(format!("the A/A ended `{v}`: no band stored; {remedy}")),
    }
    if !band.is_finite() || band > max_band {
        return Err(format!("band ±{:.2}% exceeds the {:.2}% cap ([eval] max_band): no band stored; {remedy}", band * 100.0, max_band * 100.0));
    }
    if cv > 0.0 && band > CV_FACTOR * cv {
        return Err(format!(
            "band ±{:.2}% is over {CV_FACTOR}x the measured CV {:.2}%: a few wild runs, not steady noise; no band stored; {remedy}",
            band * 100.0,
            cv * 100.0
        ));
    }
    Ok(())
}

/// What an A/A measured: the half-width of its interval, the larger robust CV of its sides,
/// its runs per side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AaMeasure {
    pub band: f64,
    pub cv: f64,
    pub runs: u32,
}

/// [`admit`] on an A/A's result: what it measured when it may set a band, else why not.
/// The eval asks before it writes the ledger (a refused A/A records no verdict) and the
/// calibration asks again before it stores the band; both get the same answer.
pub fn admit_result(res: &katlas_model::ledger::EvalResult, max_band: f64) -> Result<AaMeasure, String> {
    let band = res.effects.first().map(|e| e.ci[0].abs().max(e.ci[1].abs())).unwrap_or(f64::NAN);
    let cv = res.sides.iter().filter_map(|s| s.summary.cv).fold(0.0f64, f64::max);
    let runs = res.protocol.n_per_side.iter().copied().min().unwrap_or(0);
    admit(res.verdict, band, cv, runs, max_band)?;
    Ok(AaMeasure { band, cv, runs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use katlas_model::ledger::Verdict;

    #[test]
    fn only_a_stable_plausible_aa_sets_a_band() {
        assert!(admit(Verdict::NoChange, 0.02, 0.015, 10, DEFAULT_MAX_BAND).is_ok());
        // The trap of issue 14: inconclusive, ±30.97% stored.
        let e = admit(Verdict::Inconclusive, 0.3097, 0.299, 8, DEFAULT_MAX_BAND).unwrap_err();
        assert!(e.contains("exceeds the 10.00% cap") && e.contains("CV 29.90%"), "{e}");
        assert!(admit(Verdict::Unstable, 0.02, 0.3, 8, DEFAULT_MAX_BAND).is_err());
        assert!(admit(Verdict::NeedsBaseline, 0.0, 0.0, 8, DEFAULT_MAX_BAND).is_err());
        assert!(admit(Verdict::Regressed, 0.02, 0.01, 8, DEFAULT_MAX_BAND).is_err());
        // Implausible against its own CV.
        assert!(admit(Verdict::Inconclusive, 0.08, 0.01, 8, DEFAULT_MAX_BAND).unwrap_err().contains("over 3x"));
        // A user who accepts wide bands says so.
        assert!(admit(Verdict::Inconclusive, 0.25, 0.2, 8, 0.3).is_ok());
    }

    #[test]
    fn corrupt_values_are_errors_and_old_files_still_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("noise.json");
        std::fs::write(&p, r#"{"abc": 0.02}"#).unwrap();
        assert_eq!(read(&p).unwrap()["abc"].band, 0.02);
        std::fs::write(&p, r#"{"abc": "wide"}"#).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("abc"));
        std::fs::write(&p, r#"{"abc": 7.0}"#).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("band 7"));
        std::fs::write(&p, "{not json").unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("noise.json"));
    }

    #[test]
    fn a_band_file_that_cannot_be_read_keeps_its_os_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("noise.json");
        std::fs::create_dir(&p).unwrap();
        let e = read(&p).unwrap_err();
        assert!(matches!(&e, EvalError::Io { source, .. } if source.kind() == std::io::ErrorKind::IsADirectory), "{e:?}");
        // Through the eval's plan too: its error is still the I/O error, not its text.
        let e = crate::plan::calibration(&p, "k").unwrap_err();
        assert!(matches!(&e, crate::plan::PlanError::Eval(EvalError::Io { .. })), "{e:?}");
    }
}
