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
pub(crate) const DROP: &[&str] = &["device__attribute", "nvlink__", "numa__", "c2clink__", "profiler__"];

/// Factor to the base unit (byte, ns); `None` for units kept as they are.
pub(crate) fn unit_factor(unit: &str) -> Option<(f64, &'static str)> {
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
    let time_c = TIME.iter().find_map(|m| col(m));
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
        let time = match time_c.and_then(|i| field(&rec, Some(i))) {
            Some(raw) => match val(time_c) {
                Some(ns) => Timed::Ns(ns),
                None => {
                    out.warnings.push(format!(
                        "{source}:{line}: {}: not a number ({raw:?}); the launch counts as a call with no time (untimed_calls)",
                        h.names[time_c.unwrap()]
                    ));
                    Timed::NotANumber
                }
            },
            None => Timed::Absent,
        };
        let block = field(&rec, block_c).and_then(dim3);
        let launch = Launch::new(name, block, field(&rec, grid_c).and_then(dim3), time, |m| val(col(m)));
        let counters = metric_cols.iter().filter_map(|&i| Some((h.names[i].as_str(), val(Some(i))?)));
        launch.add_to(&mut acc, counters);
    }
    finish(&mut out, acc, opts, device, cc);
    Ok(out)
}

/// A launch's time as the profiler gave it.
pub(crate) enum Timed {
    Ns(f64),
    /// The duration metric is there but is not a number: a call with no time, kept on the record.
    NotANumber,
    /// No duration metric was collected.
    Absent,
}

/// One kernel launch as Nsight Compute reports it, from the CSV raw page or from a report.
pub(crate) struct Launch<'a> {
    pub name: &'a str,
    pub block: Option<[u32; 3]>,
    pub grid: Option<[u32; 3]>,
    pub time: Timed,
    /// `dram__bytes_read.sum + dram__bytes_write.sum`.
    pub dram_bytes: Option<f64>,
    pub registers: Option<u32>,
    pub shared_bytes: Option<u64>,
}

/// The duration metric, by preference.
pub(crate) const TIME: [&str; 2] = ["gpu__time_duration.sum", "gpu__time_duration.avg"];

impl<'a> Launch<'a> {
    /// The launch's facts from its metrics (`metric` gives a value in bytes and ns by name).
    pub(crate) fn new(name: &'a str, block: Option<[u32; 3]>, grid: Option<[u32; 3]>, time: Timed, metric: impl Fn(&str) -> Option<f64>) -> Self {
        let shared_bytes = match (metric("launch__shared_mem_per_block_static"), metric("launch__shared_mem_per_block_dynamic")) {
            (Some(a), Some(b)) => Some((a + b) as u64),
            _ => metric("launch__shared_mem_per_block_allocated").or_else(|| metric("launch__shared_mem_per_block")).map(|v| v as u64),
        };
        Launch {
            name,
            block,
            grid,
            time,
            dram_bytes: metric("dram__bytes_read.sum").zip(metric("dram__bytes_write.sum")).map(|(a, b)| a + b),
            registers: metric("launch__registers_per_thread").map(|v| v as u32),
            shared_bytes,
        }
    }

    /// Add the launch and its counters (already in bytes and ns) to its kernel.
    pub(crate) fn add_to<'c>(&self, acc: &mut PhaseAcc, counters: impl Iterator<Item = (&'c str, f64)>) {
        let k = acc.kernel(self.name);
        let s = &mut k.sample;
        if s.calls == 0 {
            s.block = self.block;
            s.grid = self.grid;
            s.registers = self.registers;
            s.shared_bytes = self.shared_bytes;
        } else if s.block != self.block || s.grid != self.grid {
            s.extra.insert("launch_config_varies".into(), json!(true));
        }
        match self.time {
            Timed::Ns(ns) => k.add_duration(ns / 1000.0),
            Timed::NotANumber => {
                k.add_call();
                // A launch whose duration is not a number would lower the kernel's mean if
                // counted as zero: keep the count on the record.
                let n = k.sample.extra.get("untimed_calls").and_then(|v| v.as_u64()).unwrap_or(0);
                k.sample.extra.insert("untimed_calls".into(), json!(n + 1));
            }
            Timed::Absent => k.add_call(),
        }
        if let Some(b) = self.dram_bytes {
            k.add_bytes(b);
        }
        for (name, v) in counters {
            k.add_counter(name, v);
        }
    }
}

/// The phase table and route of a parse of Nsight Compute launches.
pub(crate) fn finish(out: &mut ParseOutput, acc: PhaseAcc, opts: &ParserOptions, device: Option<String>, cc: Option<String>) {
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
}
