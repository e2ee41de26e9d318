//! The committed JSON Schemas of katlas.fit.v1 and katlas.suggestions.v1 match the code.
//! Regenerate with `KATLAS_WRITE_SCHEMAS=1 cargo test -p katlas-advise --test it schema_drift`.

use std::path::PathBuf;

#[test]
fn advise_schemas_match_docs() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema");
    let write = std::env::var_os("KATLAS_WRITE_SCHEMAS").is_some();
    let mut drift = Vec::new();
    for (name, schema) in katlas_advise::schemas() {
        let p = dir.join(format!("{name}.json"));
        let want = katlas_model::schema::render(&schema);
        if write {
            std::fs::write(&p, &want).unwrap();
            continue;
        }
        if std::fs::read_to_string(&p).ok().as_deref() != Some(want.as_str()) {
            drift.push(p.display().to_string());
        }
    }
    assert!(drift.is_empty(), "schemas drifted from code: {drift:?} (regenerate: KATLAS_WRITE_SCHEMAS=1 cargo test -p katlas-advise --test it schema_drift)");
}
