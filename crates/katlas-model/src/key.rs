//! The experiment key: what an eval measured a change of, the same five words in the eval's
//! metadata, the ledger entry it writes and the history that later matches a suggestion
//! against that entry.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Kernel, arch atom, phase, shape bucket and quant of one experiment; each may be unknown.
/// Records hold it flattened: its fields are the record's own (`kernel`, `arch`, …).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ExperimentKey {
    #[serde(default)]
    pub kernel: Option<String>,
    /// Arch atom (`gfx1100`, `sm_90`).
    #[serde(default)]
    pub arch: Option<String>,
    #[serde(default)]
    pub phase: Option<String>,
    /// Shape bucket.
    #[serde(default)]
    pub shape: Option<String>,
    #[serde(default)]
    pub quant: Option<String>,
}

#[cfg(test)]
mod tests {
    use crate::ledger::{EvalSide, LedgerEntry, Protocol, SampleRef};

    fn entry_json() -> serde_json::Value {
        serde_json::json!({
            "schema": crate::LEDGER_SCHEMA, "id": "l1", "recorded_at": "2026-12-03T10:00:00Z",
            "task_id": null, "eval_id": "e1", "lever": "multirow_gemv",
            "kernel": "gemv_q4", "arch": "gfx1100", "phase": "decode", "shape": "pp128", "quant": "q4",
            "hypothesis": null, "metric": "t_us", "goal": "minimize",
            "baseline": serde_json::to_value(EvalSide::default()).unwrap(),
            "candidate": serde_json::to_value(EvalSide::default()).unwrap(),
            "protocol": serde_json::to_value(Protocol::default()).unwrap(),
            "samples": serde_json::to_value(SampleRef::default()).unwrap(),
            "verdict": "improved", "effect": null, "noise_threshold": 0.01, "cross_host": false,
            "mechanism": null, "disposition": {"kind": "promote"},
        })
    }

    /// The key is the ledger's own five fields, in their old place: a ledger line reads and
    /// writes back byte for byte.
    #[test]
    fn a_ledger_line_keeps_its_fields_and_their_order() {
        let text = serde_json::to_string(&entry_json()).unwrap();
        let e: LedgerEntry = serde_json::from_str(&text).unwrap();
        assert_eq!((e.key.kernel.as_deref(), e.key.arch.as_deref(), e.key.shape.as_deref()), (Some("gemv_q4"), Some("gfx1100"), Some("pp128")));
        assert_eq!(serde_json::to_string(&e).unwrap(), text);
    }

    /// Flattening keeps the ledger strict: a field neither the entry nor the key knows is refused.
    #[test]
    fn an_unknown_field_beside_the_key_is_still_refused() {
        let mut v = entry_json();
        v["kernal"] = "gemv_q4".into();
        let err = serde_json::from_value::<LedgerEntry>(v).unwrap_err().to_string();
        assert!(err.contains("unknown field `kernal`"), "{err}");
    }
}
