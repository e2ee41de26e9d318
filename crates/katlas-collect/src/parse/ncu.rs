//! Nsight Compute `--csv --page raw` output.
//!
//! Lines before the `"ID",...` header (`==PROF==` preamble, the program's own
//! output) are skipped; the row after the header holds units. Metric values
//! are normalised to bytes and nanoseconds and kept as counters under their
//! ncu names (per-launch means per kernel); per kernel the DRAM bytes
//! (`dram__bytes_read.sum + dram__bytes_write.sum`) and achieved GB/s are
//! derived so the fit view can put them against peak bandwidth.

use super::csvutil::{self, dim3, field, line_of, Header};
use super::{parse_number, ParseError, ParseOutput, ParserOptions};
use crate::summary::PhaseAcc;
use serde_json::json;
use std::io::{BufRead, Read};

/// Metric-name prefixes that describe the device or the profiler, not the kernel.
const DROP: &[&str] = &["device__attribute", "nvlink__", "numa__", "c2clink__", "profiler__"];

/// Factor to the base unit (byte, ns); `None` for units kept as they are.
fn unit_factor(unit: &str) -> Option<(f64, &'static str)> {
    Some(match unit {
        "byte" => (1.0, "byte"),
        "Kbyte" | "KB" => (1e3, "byte"),
        "Mbyte" | "MB" => (1e6, "byte"),
        "Gbyte" | "GB" => (1e9, "byte"),
        "Tbyte" | "TB" => (1e12, "byte"),
        "KiB" | "Kibyte" => (1024.0, "byte"),
        "MiB" | "Mibyte" => (1048576.0, "byte"),
        "GiB" | "Gibyte" => (1073741824.0, "byte"),
        "ns" | "nsecond" => (1.0, "ns"),
        "us" | "usecond" => (1e3, "ns"),
        "ms" | "msecond" => (1e6, "ns"),
        "s" | "second" => (1e9, "ns"),
        _ => return None,
    })
}

pub fn parse(r: &mut dyn BufRead, source: &str, opts: &ParserOptions) -> Result<ParseOutput, ParseError> {
    let mut out = ParseOutput::new("ncu-csv", source);
    // Find the header line; everything before it is preamble.
    let mut skipped_lines = 0u64;
    let mut header_line = Vec::new();
    loop {
        header_line.clear();
        let n = r.read_until(b'\n', &mut header_line).map_err(|e| ParseError::new(source, Some(skipped_lines + 1), e.to_string()))?;
        if n == 0 {
            return Err(ParseError::new(source, None, "no `\"ID\",...` header line: not `ncu --csv --page raw` output"));
        }
        if header_line.starts_with(b"\"ID\",") || header_line.starts_with(b"ID,") {
            break;
        }
        skipped_lines += 1;
        if header_line.starts_with(b"==ERROR==") {
            out.warnings.push(format!("{source}:{skipped_lines}: {}", String::from_utf8_lossy(&header_line).trim()));
        }
    }
    let chained = std::io::Cursor::new(std::mem::take(&mut header_line)).chain(r);
    let mut rd = csvutil::reader(chained);
    let mut rec = csv::ByteRecord::new();
    let line_base = skipped_lines;
    if !rd.read_byte_record(&mut rec).map_err(|e| ParseError::new(source, Some(line_base + 1), e.to_string()))? {
        return Err(ParseError::new(source, Some(line_base + 1), "empty header"));
    }
    let h = Header::new(&rec);
    let name_c = h.require(&["Kernel Name"], source, line_base + 1)?;
    let block_c = h.col(&["Block Size"]);
    let grid_c = h.col(&["Grid Size"]);
    let cc_c = h.col(&["CC"]);
    let ncols = h.names.len();
    let mut factors: Vec<Option<f64>> = vec![None; ncols];
    let mut metric_cols: Vec<usize> = Vec::new();
    let mut units_done = false;
    let col = |n: &str| h.col(&[n]);
    let time_c = col("gpu__time_duration.sum").or(col("gpu__time_duration.avg"));
    let rd_c = col("dram__bytes_read.sum");
    let wr_c = col("dram__bytes_write.sum");
    let regs_c = col("launch__registers_per_thread");
    let smem_static = col("launch__shared_mem_per_block_static");
    let smem_dyn = col("launch__shared_mem_per_block_dynamic");
    let smem_any = col("launch__shared_mem_per_block_allocated").or(col("launch__shared_mem_per_block"));
    if time_c.is_none() {
        out.warnings.push(format!("{source}:{}: no gpu__time_duration metric: kernels get calls but no time", line_base + 1));
    }
    let dropped = |name: &str| DROP.iter().any(|p| name.starts_with(p)) || opts.drop_counters.iter().any(|p| name.starts_with(p.as_str()));
    let mut acc = PhaseAcc::default();
    let mut device: Option<String> = None;
    let mut cc: Option<String> = None;
    let dev_c = col("device__attribute_display_name");
    loop {
        if !csvutil::next_record(&mut rd, &mut rec, source, line_base, &mut out.warnings)? {
            break;
        }
        let line = line_of(&rec) + line_base;
        if !units_done {
            units_done = true;
            if rec.get(0).is_some_and(|f| f.is_empty()) {
                for (i, name) in h.names.iter().enumerate() {
                    if !name.contains("__") || dropped(name) {
                        continue;
                    }
                    let unit = field(&rec, Some(i)).unwrap_or("");
                    metric_cols.push(i);
                    factors[i] = unit_factor(unit).map(|(f, _)| f).or(Some(1.0));
                }
                continue;
            }
            // No units row (`--print-units base` with units off): take values as they are.
            for (i, name) in h.names.iter().enumerate() {
                if name.contains("__") && !dropped(name) {
                    metric_cols.push(i);
                    factors[i] = Some(1.0);
                }
            }
        }
        if rec.len() != ncols {
            out.warnings.push(format!("{source}:{line}: {} fields, header has {ncols}; row skipped", rec.len()));
            continue;
        }
        let Some(name) = field(&rec, Some(name_c)).filter(|n| !n.is_empty()) else {
            out.warnings.push(format!("{source}:{line}: empty Kernel Name; row skipped"));
            continue;
        };
        if device.is_none() {
            device = field(&rec, dev_c).map(str::to_string);
            cc = field(&rec, cc_c).map(str::to_string);
        }
        let val = |i: Option<usize>| -> Option<f64> {
            let i = i?;
            parse_number(field(&rec, Some(i))?).map(|v| v * factors[i].unwrap_or(1.0))
        };
        let k = acc.kernel(name);
        let block = field(&rec, block_c).and_then(dim3);
        let grid = field(&rec, grid_c).and_then(dim3);
        let regs = val(regs_c).map(|v| v as u32);
        let smem = match (val(smem_static), val(smem_dyn)) {
            (Some(a), Some(b)) => Some((a + b) as u64),
            _ => val(smem_any).map(|v| v as u64),
        };
        let s = &mut k.sample;
        if s.calls == 0 {
            s.block = block;
            s.grid = grid;
            s.registers = regs;
            s.shared_bytes = smem;
        } else if s.block != block || s.grid != grid {
            s.extra.insert("launch_config_varies".into(), json!(true));
        }
        match val(time_c) {
            Some(ns) => k.add_duration(ns / 1000.0),
            None => {
                k.add_call();
                // A launch whose duration is there but not a number would count as a call
                // with no time and lower the kernel's mean: keep the count on the record.
                if let Some(raw) = time_c.and_then(|i| field(&rec, Some(i))) {
                    let n = k.sample.extra.get("untimed_calls").and_then(|v| v.as_u64()).unwrap_or(0);
                    k.sample.extra.insert("untimed_calls".into(), json!(n + 1));
                    out.warnings.push(format!(
                        "{source}:{line}: {}: not a number ({raw:?}); the launch counts as a call with no time (untimed_calls)",
                        h.names[time_c.unwrap()]
                    ));
                }
            }
        }
        if let (Some(a), Some(b)) = (val(rd_c), val(wr_c)) {
            k.add_bytes(a + b);
        }
        for &i in &metric_cols {
            if let Some(v) = val(Some(i)) {
                k.add_counter(&h.names[i], v);
            }
        }
    }
    let mut table = acc.finish(opts.phase.as_deref().unwrap_or("run"));
    for k in &mut table.kernels {
        k.extra.insert("counter_units".into(), json!("per-launch mean; bytes in byte, times in ns"));
    }
    out.phases.push(table);
    if let Some(d) = device {
        out.route.insert("device".into(), json!(d));
    }
    if let Some(c) = cc {
        out.route.insert("arch".into(), json!(format!("sm_{}", c.replace('.', ""))));
    }
    Ok(out)
}
