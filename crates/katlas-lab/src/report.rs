//! Results: the table for people, `KATLAS_METRIC` key=value lines and `katlas.row.v1` JSON lines
//! for katlas collect/eval. Metric names are stable and never carry the variant, so two runs
//! with different `--variant` print the same keys and can be compared as fresh processes.

use crate::case::{CaseResult, Env};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Table};
use katlas_model::identity::{Device as MDevice, RunPolicy};
use katlas_model::row::{KernelSample, Metric, Origin, Row, RunError, Status};
use serde_json::json;

pub const WORKLOAD: &str = "lab-decode";

pub fn table(env: &Env, res: &[CaseResult]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(vec!["kernel", "variant", "shape", "median us", "min us", "GB/s", "% copy", "TFLOP/s", "regs", "spill B", "check"]);
    for r in res {
        let spill = r.resources.as_ref().and_then(|x| Some(x.spill_stores? + x.spill_loads?));
        t.add_row(vec![
            Cell::new(r.family.name()),
            Cell::new(&r.variant),
            Cell::new(r.shape.to_string()),
            Cell::new(format!("{:.2}", r.stats.median)),
            Cell::new(format!("{:.2}", r.stats.min)),
            Cell::new(if r.gbps() < 100.0 { format!("{:.2}", r.gbps()) } else { format!("{:.0}", r.gbps()) }),
            Cell::new(r.copy_pct(env).map_or("-".into(), |p| format!("{p:.1}"))),
            Cell::new(format!("{:.3}", r.tflops())),
            Cell::new(r.resources.as_ref().and_then(|x| x.registers).map_or("-".into(), |v| v.to_string())),
            Cell::new(spill.map_or("-".into(), |v| v.to_string())),
            Cell::new(if r.check.pass { format!("ok {:.1e}", r.check.max_rel) } else { format!("FAIL {:.1e}", r.check.max_rel) }),
        ]);
    }
    let mut s = format!(
        "backend {} on {} ({}), copy {} GB/s, timing floor {} us, {} warmups, {} samples of {} launch(es), L2 {}\n",
        env.backend,
        env.device,
        env.arch,
        env.copy_gbps.map_or("-".into(), |v| format!("{v:.0}")),
        env.floor_us.map_or("-".into(), |v| format!("{v:.2}")),
        env.warmup,
        env.samples,
        env.batch,
        env.l2
    );
    s += &t.to_string();
    s
}

/// One line per case: `KATLAS_METRIC <family> shape=.. variant=.. median_us=.. ...`.
pub fn metric_line(env: &Env, r: &CaseResult) -> String {
    let mut s = format!(
        "KATLAS_METRIC {} shape={} variant={} backend={} median_us={:.3} min_us={:.3} achieved_gbps={:.1} achieved_tflops={:.4}",
        r.family.name(),
        r.shape,
        r.variant,
        env.backend,
        r.stats.median,
        r.stats.min,
        r.gbps(),
        r.tflops()
    );
    if let Some(p) = r.copy_pct(env) {
        s += &format!(" copy_pct={p:.2}");
    }
    if let Some(c) = env.copy_gbps {
        s += &format!(" copy_gbps={c:.1}");
    }
    if let Some(c) = &r.cpu_time {
        s += &format!(" cpu_median_us={:.3} cpu_min_us={:.3}", c.median, c.min);
    }
    s += &format!(" bytes={:.0} flops={:.0} check={} max_rel={:.3e}", r.bytes, r.flops, if r.check.pass { "pass" } else { "fail" }, r.check.max_rel);
    s
}

pub fn row(env: &Env, r: &CaseResult, run_index: u32) -> Row {
    let mut row = Row::new(WORKLOAD, "decode");
    row.workload_kind = Some("lab".into());
    row.shape_bucket = Some(r.shape.to_string());
    row.run_index = run_index;
    row.arch = Some(env.arch.clone());
    row.quant = r.family.quant().map(str::to_string);
    row.command = env.command.clone();
    for (k, v) in [
        ("kernel", r.family.name().to_string()),
        ("variant", r.variant.clone()),
        ("shape", r.shape.to_string()),
        ("backend", env.backend.clone()),
        ("l2", env.l2.clone()),
        ("batch", env.batch.to_string()),
    ] {
        row.params.insert(k.into(), v);
    }
    row.variant.knobs.insert("variant".into(), r.variant.clone());
    row.variant.knobs.insert("levers".into(), r.levers.clone());
    if env.backend == "cuda" {
        row.identity.devices.push(MDevice {
            index: 0,
            vendor: "nvidia".into(),
            product: Some(env.device.clone()),
            arch: Some(env.arch.clone()),
            arch_source: Some("cuDeviceGetAttribute".into()),
            driver: env.driver.clone(),
            ..Default::default()
        });
        row.identity.toolkits.insert("nvrtc".into(), env.toolkit.clone());
    }
    row.identity.policy = Some(RunPolicy {
        fresh_process: false,
        warmup_runs: env.warmup,
        measured_runs: env.samples,
        order: Some(format!("spin-held stream, warmups then samples, {} launch(es) per event pair", env.batch)),
        settle: Some(env.l2.clone()),
        ..Default::default()
    });
    let mut m = |k: &str, v: f64| {
        if v.is_finite() {
            row.metrics.insert(k.into(), Metric::from_key(k, v));
        }
    };
    m("median_us", r.stats.median);
    m("min_us", r.stats.min);
    m("max_us", r.stats.max);
    m("achieved_gbps", r.gbps());
    m("achieved_tflops", r.tflops());
    if let Some(p) = r.copy_pct(env) {
        m("copy_pct", p);
    }
    if let Some(c) = env.copy_gbps {
        m("copy_gbps", c);
    }
    if let Some(s) = r.stream_us {
        m("stream_us", s);
    }
    if let Some(c) = &r.cpu_time {
        m("cpu_median_us", c.median);
        m("cpu_min_us", c.min);
    }
    m("max_rel", r.check.max_rel);
    m("norm_rel", r.check.norm_rel);
    let mut k = KernelSample {
        name: r.func.clone(),
        calls: r.stats.n as u64,
        total_us: r.stats.median * r.stats.n as f64,
        avg_us: None,
        median_us: Some(r.stats.median),
        min_us: Some(r.stats.min),
        max_us: Some(r.stats.max),
        bytes: Some(r.bytes),
        flops: Some(r.flops),
        achieved_gbps: Some(r.gbps()),
        grid: r.grid,
        block: r.block,
        ..Default::default()
    };
    if let Some(res) = &r.resources {
        k.registers = res.registers;
        k.shared_bytes = res.smem_bytes;
        k.extra.insert("spill_stores".into(), json!(res.spill_stores));
        k.extra.insert("spill_loads".into(), json!(res.spill_loads));
        k.extra.insert("stack_bytes".into(), json!(res.stack_bytes));
    }
    k.extra.insert("rotation_sets".into(), json!(r.rotation_sets));
    row.kernels.push(k);
    row.fill_kernel_shares();
    row.artifacts.insert("check".into(), serde_json::to_value(&r.check).unwrap_or_default());
    if !env.copy_detail.is_empty() {
        row.artifacts.insert("copy".into(), json!(env.copy_detail));
    }
    if !r.check.pass {
        row.status = Status::Error;
        row.error = Some(RunError { message: Some(format!("check failed: {}", r.check.summary())), ..Default::default() });
    }
    row.origin = Some(Origin { kind: "lab".into(), ..Default::default() });
    row
}
