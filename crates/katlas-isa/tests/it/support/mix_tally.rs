//! The per-architecture tally of native-mix-vs-llvm-objdump checks, shared by the suite
//! (`tests/it/amd_mix_vs_llvm_objdump.rs`) and the full-library run (`examples/mix_oracle.rs`,
//! which includes this file with `#[path]`).

use katlas_isa::oracle::{ArchTotals, ObjectCheck};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct Tally {
    pub totals: BTreeMap<String, ArchTotals>,
    /// One line per refused object, failed llvm-objdump run and mismatched kernel, naming the
    /// object and its architecture.
    pub disagreements: Vec<String>,
}

impl Tally {
    /// Counts the check of object `chain` under `arch`.
    pub fn add(&mut self, arch: &str, chain: &str, r: ObjectCheck) {
        let t = self.totals.entry(arch.to_string()).or_default();
        t.objects += 1;
        t.kernels += r.kernels;
        t.instructions += r.instructions;
        if let Some(e) = r.refused {
            t.refused += 1;
            self.disagreements.push(format!("{chain} ({arch}): native decoder refused: {e}"));
        }
        if let Some(e) = r.objdump_error {
            self.disagreements.push(format!("{chain} ({arch}): llvm-objdump failed: {e}"));
        }
        t.mismatched_kernels += r.mismatches.len();
        self.disagreements.extend(r.mismatches.into_iter().map(|m| format!("{chain} ({arch}): {m}")));
    }
}
