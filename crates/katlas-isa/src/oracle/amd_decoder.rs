//! Checks the native decoder against llvm-objdump on real objects: per kernel, the mix from
//! [`crate::amd::decode::object_mix`] must equal the one from the objdump listing. Used by the
//! oracle test (`tests/it/amd_mix_vs_llvm_objdump.rs`) and the full-library run
//! (`examples/mix_oracle.rs`).

use crate::manifest::Vendor;
use crate::mix::{disassemble, Tool};
use std::process::Command;

/// The outcome for one object.
#[derive(Debug, Default, Clone)]
pub struct ObjectCheck {
    pub kernels: usize,
    pub instructions: u64,
    /// The native decoder refused the object (it would fall back to llvm-objdump).
    pub refused: Option<String>,
    /// One line per kernel whose mixes differ, with the first diverging instruction.
    pub mismatches: Vec<String>,
    /// llvm-objdump itself failed.
    pub objdump_error: Option<String>,
}

pub fn check_object(tool: &Tool, arch: &str, data: &[u8], kernels: &[String]) -> ObjectCheck {
    let mut out = ObjectCheck { kernels: kernels.len(), ..Default::default() };
    let native = match crate::amd::decode::object_mix(data, arch) {
        Ok(m) => m,
        Err(e) => {
            out.refused = Some(e);
            return out;
        }
    };
    let objdump = match disassemble(tool, Vendor::Amd, data) {
        Ok(m) => m,
        Err(e) => {
            out.objdump_error = Some(e);
            return out;
        }
    };
    let mut first_divergence: Option<String> = None;
    for k in kernels {
        let a = native.get(k).cloned().unwrap_or_default();
        let b = objdump.get(k).cloned().unwrap_or_default();
        out.instructions += b.total;
        if a != b {
            let mut diff: Vec<String> = a
                .opcodes
                .keys()
                .chain(b.opcodes.keys())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .filter(|op| a.opcodes.get(*op) != b.opcodes.get(*op))
                .take(6)
                .map(|op| format!("{op} native {} objdump {}", a.opcodes.get(op).unwrap_or(&0), b.opcodes.get(op).unwrap_or(&0)))
                .collect();
            if first_divergence.is_none() {
                first_divergence = Some(divergence(tool, arch, data));
                diff.push(first_divergence.clone().unwrap_or_default());
            }
            out.mismatches.push(format!("{k}: total native {} objdump {}; {}", a.total, b.total, diff.join("; ")));
        }
    }
    out
}

/// The first instruction where the native walk and objdump's listing part ways:
/// offset, word, native mnemonic and size, and objdump's line.
pub fn divergence(tool: &Tool, arch: &str, data: &[u8]) -> String {
    let mut native: Vec<(u64, usize, &'static str, u64)> = Vec::new();
    let walked = crate::amd::decode::walk(data, arch, |_| {}, |i| native.push((i.address, i.size, i.mnemonic, i.offset)));
    let Ok(f) = tempfile::NamedTempFile::new() else {
        return "temp file".into();
    };
    if std::fs::write(f.path(), data).is_err() {
        return "temp file".into();
    }
    let Ok(o) = Command::new(&tool.path).arg("-d").arg(f.path()).output() else {
        return "llvm-objdump did not run".into();
    };
    let text = String::from_utf8_lossy(&o.stdout);
    let mut theirs: Vec<(u64, &str, &str)> = Vec::new();
    for line in text.lines() {
        if !line.starts_with('\t') {
            continue;
        }
        let Some(c) = line.rfind("// ") else { continue };
        let Some((addr, _)) = line[c + 3..].split_once(':') else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        let op = line.split_whitespace().next().unwrap_or("");
        theirs.push((addr, op, line.trim()));
    }
    for (i, t) in theirs.iter().enumerate() {
        match native.get(i) {
            Some(n) if n.0 == t.0 && n.2 == t.1 => continue,
            Some(n) => {
                let w = data.get(n.3 as usize..n.3 as usize + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0);
                return format!("first divergence: native {:#x} size {} {} (word {w:#010x}) vs objdump `{}`", n.0, n.1, n.2, t.2);
            }
            None => return format!("native walk ended ({:?}) before objdump `{}`", walked.err(), t.2),
        }
    }
    if native.len() > theirs.len() {
        let n = native[theirs.len()];
        return format!("native has more instructions from {:#x} {}", n.0, n.2);
    }
    "no instruction-level divergence (symbol attribution differs)".into()
}

/// Totals of a run over many objects, per architecture.
#[derive(Debug, Default, Clone)]
pub struct ArchTotals {
    pub objects: usize,
    pub kernels: usize,
    pub instructions: u64,
    pub refused: usize,
    pub mismatched_kernels: usize,
}

/// Deterministic sample: of the objects of each architecture (in scan order), the first and
/// then every `stride`-th, at most `per_arch`. `per_arch == 0` keeps every object.
pub fn sample<T>(objects: Vec<(String, T)>, per_arch: usize) -> Vec<(String, T)> {
    if per_arch == 0 {
        return objects;
    }
    let mut by_arch: std::collections::BTreeMap<String, Vec<(String, T)>> = Default::default();
    for (arch, o) in objects {
        by_arch.entry(arch.clone()).or_default().push((arch, o));
    }
    let mut out = Vec::new();
    for (_, v) in by_arch {
        let stride = v.len().div_ceil(per_arch).max(1);
        out.extend(v.into_iter().step_by(stride).take(per_arch));
    }
    out
}
