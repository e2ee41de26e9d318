//! Spill and stack numbers from a ptxas / NVRTC `-v` log. A cubin does not record spills,
//! so they can only come from the compiler's own report.

use std::collections::HashMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PtxasFunction {
    pub arch: Option<String>,
    pub stack_frame: u64,
    pub spill_stores: u64,
    pub spill_loads: u64,
    pub registers: Option<u32>,
    pub barriers: Option<u32>,
    pub smem: Option<u64>,
}

fn num_before(s: &str, unit: &str) -> Option<u64> {
    let i = s.find(unit)?;
    s[..i].split_whitespace().last()?.parse().ok()
}

/// Parses a log; keys are (function, arch) and (function, "") for the last arch seen.
pub fn parse(log: &str) -> HashMap<(String, String), PtxasFunction> {
    let mut out: HashMap<(String, String), PtxasFunction> = HashMap::new();
    let mut arch = String::new();
    let mut current: Option<String> = None;
    for line in log.lines() {
        if let Some(i) = line.find("Compiling entry function '") {
            let rest = &line[i + 26..];
            let name = rest.split('\'').next().unwrap_or("").to_string();
            if let Some(j) = rest.find("for '") {
                arch = rest[j + 5..].split('\'').next().unwrap_or("").to_string();
            }
            current = Some(name);
        } else if let Some(i) = line.find("Function properties for ") {
            current = Some(line[i + 24..].trim().to_string());
        } else if line.contains("bytes stack frame") {
            if let Some(f) = &current {
                let e = out.entry((f.clone(), arch.clone())).or_default();
                e.arch = Some(arch.clone()).filter(|a| !a.is_empty());
                e.stack_frame = num_before(line, "bytes stack frame").unwrap_or(0);
                e.spill_stores = num_before(line, "bytes spill stores").unwrap_or(0);
                e.spill_loads = num_before(line, "bytes spill loads").unwrap_or(0);
            }
        } else if line.contains("Used ") && line.contains(" registers") {
            if let Some(f) = &current {
                let e = out.entry((f.clone(), arch.clone())).or_default();
                e.registers = num_before(line, " registers").map(|x| x as u32);
                e.barriers = num_before(line, " barriers").map(|x| x as u32);
                e.smem = num_before(line, "bytes smem");
            }
        }
    }
    let latest: Vec<_> = out.iter().map(|((f, _), v)| ((f.clone(), String::new()), v.clone())).collect();
    for (k, v) in latest {
        out.entry(k).or_insert(v);
    }
    out
}
