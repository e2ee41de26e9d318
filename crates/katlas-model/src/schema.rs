//! JSON Schemas generated from the record types.
//!
//! `docs/schema/<name>.json` holds the committed copy of each; the test in
//! `tests/it/schema_drift.rs` fails when code and committed files disagree, and
//! `katlas schema --write docs/schema` regenerates them.

use serde_json::Value;

pub struct SchemaDoc {
    /// The record's schema string, also the file stem (`katlas.row.v1`).
    pub name: &'static str,
    pub schema: Value,
}

type SchemaFn = fn() -> Value;

/// Registry of generated schemas. Other crates' records register through
/// [`register`]-style lists in their own crates; the model owns the core ones.
pub fn schemas() -> Vec<SchemaDoc> {
    let core: &[(&str, SchemaFn)] = &[
        (crate::ROW_SCHEMA, || serde_json::to_value(schemars::schema_for!(crate::Row)).expect("schema serialises")),
        (crate::ledger::LEDGER_SCHEMA, || serde_json::to_value(schemars::schema_for!(crate::ledger::LedgerEntry)).expect("schema serialises")),
        (crate::ledger::EVAL_SAMPLE_SCHEMA, || serde_json::to_value(schemars::schema_for!(crate::ledger::EvalSample)).expect("schema serialises")),
        (crate::ledger::EVAL_RESULT_SCHEMA, || serde_json::to_value(schemars::schema_for!(crate::ledger::EvalResult)).expect("schema serialises")),
        (crate::fleet::FLEET_SCHEMA, || serde_json::to_value(schemars::schema_for!(crate::fleet::FleetRecord)).expect("schema serialises")),
        (crate::fleet::FLEET_JOB_SCHEMA, || serde_json::to_value(schemars::schema_for!(crate::fleet::FleetJobResult)).expect("schema serialises")),
        (crate::task::TASK_SCHEMA, || serde_json::to_value(schemars::schema_for!(crate::task::Task)).expect("schema serialises")),
    ];
    core.iter().map(|(name, f)| SchemaDoc { name, schema: f() }).collect()
}

/// Pretty JSON with a trailing newline, the committed form.
pub fn render(schema: &Value) -> String {
    let mut s = serde_json::to_string_pretty(schema).expect("schema serialises");
    s.push('\n');
    s
}
