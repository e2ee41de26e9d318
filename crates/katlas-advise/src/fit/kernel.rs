//! One kernel's signals: profile numbers, bandwidth and compute against the product's
//! ceilings, ISA resources, occupancy, instruction mix, launch geometry; then its rules.

use super::classify::{gemv_evidence, is_gemm_like, is_library_kernel, is_projection, is_route_env, knob_reaches, memory_class, phase_kind, small_transform};
use super::evaluate::eval_rules;
use super::profile::{bytes_label, bytes_source, from_shapes};
use super::scope::{object_label, Pair};
use super::view::{Finding, IsaFit, KernelFit, LaunchFit, MixBar, OccupancyFit};
use crate::expr::{Facts, Signals, Val};
use crate::isa::Kernel as IsaKernel;
use crate::names::MatchLevel;
use crate::rules::{FindingKind, RuleScope, Rules};
use katlas_arch::{Atom, KernelResources, Product, Vendor};
use katlas_collect::parse::triton_join::TritonFacts;
use katlas_model::{KernelSample, Row};
use std::collections::BTreeSet;

pub(super) struct KernelCtx<'a> {
    pub(super) atom: Option<&'a Atom>,
    pub(super) product: Option<&'a Product>,
    pub(super) phase: Option<&'a str>,
    pub(super) row: Option<&'a Row>,
    /// Phase signals and what the phase rules emitted: every kernel sees them.
    pub(super) phase_signals: &'a Signals,
    pub(super) phase_flags: &'a BTreeSet<String>,
}

/// The phase's timeline signals from the row's metrics, and the framework that ran it.
pub(super) fn phase_signals(row: Option<&Row>) -> Signals {
    let mut s = Signals::new();
    let Some(r) = row else { return s };
    for k in crate::signals::timeline_metrics() {
        if let Some(m) = r.metrics.get(k) {
            s.insert(k.into(), Val::Num(m.value));
        }
    }
    if let Some(w) = r.metrics.get("timeline_window_us") {
        s.insert("timeline_window_ms".into(), Val::Num(w.value / 1e3));
    }
    // A timeline with no graph launch replayed none: the graph rules decide, not wait.
    if s.contains_key("gpu_busy_pct") {
        for k in ["graph_launches", "graph_replayed_kernels"] {
            s.entry(k.into()).or_insert(Val::Num(0.0));
        }
    }
    let torch = r.origin.as_ref().is_some_and(|o| o.parsers.iter().any(|p| p == "torch-trace")) || r.metrics.contains_key("trace_events");
    s.insert("framework".into(), Val::Str(if torch { "torch" } else { "other" }.into()));
    s
}

/// Arch-level signals: capabilities decide legality of levers.
pub fn arch_signals(atom: Option<&Atom>, s: &mut Signals) {
    let Some(a) = atom else { return };
    s.insert("arch".into(), Val::Str(a.name.clone()));
    s.insert("arch_class".into(), Val::Str(a.class.clone()));
    s.insert("arch_family".into(), Val::Str(a.family.clone()));
    s.insert("vendor".into(), Val::Str(a.vendor.as_str().into()));
    s.insert("caps".into(), Val::List(a.caps.clone()));
    s.insert("wave_sizes".into(), Val::List(a.wave_sizes.iter().map(|w| w.to_string()).collect()));
    s.insert("wave_size_choices".into(), Val::Num(a.wave_sizes.len() as f64));
    s.insert("matrix_capable".into(), Val::Bool(!a.matrix.is_empty()));
    let units: Vec<String> = a.matrix.keys().cloned().collect();
    s.insert("matrix_units".into(), Val::Str(if units.is_empty() { "none".into() } else { units.join(", ") }));
    s.insert("counters_command".into(), Val::Str(counters_command(a.vendor).into()));
}

/// The command that gets per-kernel DRAM bytes on a vendor's GPUs.
pub(super) fn counters_command(v: Vendor) -> &'static str {
    match v {
        Vendor::Nvidia => katlas_collect::parse::torch_trace::COUNTERS_COMMAND,
        Vendor::Amd => "rocprofv3 --kernel-trace --pmc FETCH_SIZE WRITE_SIZE --output-format rocpd -d OUT_DIR -- APP, read with `katlas parse rocprofv3 OUT_DIR` (or katlas collect WORKLOAD --profile with that profile)",
    }
}

pub(super) fn simds_of(atom: &Atom, product: &Product) -> f64 {
    let units = product.units.value as f64;
    match atom.vendor {
        Vendor::Amd => units * atom.amd.as_ref().map(|a| a.simds_per_cu).unwrap_or(2) as f64,
        Vendor::Nvidia => units * atom.nvidia.as_ref().map(|n| n.sub_partitions).unwrap_or(4) as f64,
    }
}

pub(super) fn mix_signals(k: &IsaKernel, s: &mut Signals) -> (Vec<MixBar>, Option<u64>) {
    let Some(mix) = &k.mix else { return (vec![], None) };
    let total = mix.total.max(mix.categories.values().sum::<u64>());
    if total == 0 {
        return (vec![], None);
    }
    let cat = |c: &str| mix.categories.get(c).copied().unwrap_or(0);
    let matrix = cat("matrix");
    let valu = cat("valu") + cat("dot");
    let loads: u64 = mix.opcodes.iter().filter(|(op, _)| is_vmem_load(op)).map(|(_, n)| *n).sum();
    let wide: u64 = mix.opcodes.iter().filter(|(op, _)| is_vmem_load(op) && is_wide(op)).map(|(_, n)| *n).sum();
    s.insert("mix_total".into(), Val::Num(total as f64));
    s.insert("matrix_ops".into(), Val::Num(matrix as f64));
    s.insert("valu_frac".into(), Val::Num(valu as f64 / total as f64));
    s.insert("valu_frac_pct".into(), Val::Num(100.0 * valu as f64 / total as f64));
    let vm = cat("vmem_load").max(loads);
    s.insert("vmem_loads".into(), Val::Num(vm as f64));
    if loads > 0 {
        s.insert("vmem_wide_frac".into(), Val::Num(wide as f64 / loads as f64));
        s.insert("vmem_wide_frac_pct".into(), Val::Num(100.0 * wide as f64 / loads as f64));
    }
    let mut bars: Vec<MixBar> =
        mix.categories.iter().filter(|(_, n)| **n > 0).map(|(c, n)| MixBar { category: c.clone(), count: *n, fraction: *n as f64 / total as f64 }).collect();
    bars.sort_by(|a, b| b.count.cmp(&a.count).then(a.category.cmp(&b.category)));
    (bars, Some(matrix))
}

pub(super) fn is_vmem_load(op: &str) -> bool {
    let o = op.to_ascii_lowercase();
    o.starts_with("global_load") || o.starts_with("buffer_load") || o.starts_with("flat_load") || o.starts_with("ldg")
}

pub(super) fn is_wide(op: &str) -> bool {
    let o = op.to_ascii_lowercase();
    o.contains("dwordx4") || o.contains("b128") || o.contains(".128")
}

/// A Triton kernel's launch facts from the profile (`extra.triton`), as `triton.*` signals.
fn triton_signals(x: &KernelSample, kf: &mut KernelFit, s: &mut Signals) {
    let Some(t) = x.extra.get("triton").and_then(|v| serde_json::from_value::<TritonFacts>(v.clone()).ok()) else {
        return;
    };
    s.insert("triton".into(), Val::Bool(true));
    for (k, v) in [("triton.num_warps", t.num_warps), ("triton.num_stages", t.num_stages)] {
        if let Some(v) = v {
            s.insert(k.into(), Val::Num(v as f64));
        }
    }
    if let Some(v) = t.shared {
        s.insert("triton.shared".into(), Val::Num(v as f64));
    }
    if !t.constexprs.is_empty() {
        s.insert("triton.constexprs".into(), Val::Str(constexpr_list(&t.constexprs)));
    }
    if let Some(a) = &t.autotune {
        s.insert("triton.autotune_configs".into(), Val::Num(a.configs as f64));
    }
    kf.triton = Some(t);
}

/// `BLOCK_SIZE=2048, BT=64`: constexprs as a rule text or a table shows them.
pub fn constexpr_list(c: &std::collections::BTreeMap<String, serde_json::Value>) -> String {
    c.iter().map(|(k, v)| format!("{k}={}", v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect::<Vec<_>>().join(", ")
}

pub(super) fn fit_kernel(
    ctx: &KernelCtx,
    rules: &Rules,
    sample: Option<&KernelSample>,
    isa: Option<(MatchLevel, Pair)>,
    short: &str,
    neighbour: Option<&(String, f64)>,
) -> KernelFit {
    let mut s = ctx.phase_signals.clone();
    arch_signals(ctx.atom, &mut s);
    let name = sample.map(|x| x.name.clone()).or_else(|| isa.map(|(_, (_, k))| k.name.clone())).unwrap_or_default();
    // Rule texts quote the view's short name (the full name stays on the kernel and its findings).
    s.insert("kernel".into(), Val::Str(short.to_string()));
    let mut kf = KernelFit { name: name.clone(), short_name: short.to_string(), ..Default::default() };

    // Phase and op.
    let op = sample.and_then(|x| x.op.clone());
    if let Some(p) = ctx.phase {
        let (pre, dec) = phase_kind(p);
        s.insert("phase".into(), Val::Str(p.into()));
        s.insert("phase_prefill".into(), Val::Bool(pre));
        s.insert("phase_decode".into(), Val::Bool(dec));
        let gemm = is_gemm_like(&name, op.as_ref());
        s.insert("is_gemm".into(), Val::Bool(gemm));
        let ev = gemv_evidence(&rules.fit.settings, &name, op.as_ref(), sample, Some(p), gemm && dec && !pre);
        s.insert("decode_gemv".into(), Val::Bool(ev.is_some()));
        if let Some(e) = ev {
            s.insert("gemv_evidence".into(), Val::Str(e));
        }
        s.insert("projection".into(), Val::Bool(is_projection(&name, op.as_ref())));
    } else {
        let gemm = is_gemm_like(&name, op.as_ref());
        s.insert("is_gemm".into(), Val::Bool(gemm));
        // Without a phase only shapes can say a GEMM is one token.
        let ev = gemv_evidence(&rules.fit.settings, &name, op.as_ref(), sample, None, false);
        s.insert("decode_gemv".into(), Val::Bool(ev.is_some()));
        if let Some(e) = ev {
            s.insert("gemv_evidence".into(), Val::Str(e));
        }
    }
    if let Some(o) = &op {
        s.insert("op_family".into(), Val::Str(o.family.clone()));
        s.insert("op_role".into(), Val::Str(o.role.clone()));
    }
    let st = &rules.fit.settings;
    let fam = op.as_ref().map(|o| o.family.to_ascii_lowercase());
    let lname = name.to_ascii_lowercase();
    let in_fams = |list: &[String]| fam.as_ref().is_some_and(|f| list.iter().any(|x| x == f));
    s.insert("is_elementwise".into(), Val::Bool(in_fams(&st.elementwise_families) || lname.contains("elementwise")));
    s.insert("is_reduction".into(), Val::Bool(in_fams(&st.reduction_families) || lname.contains("reduce")));
    s.insert("library_kernel".into(), Val::Bool(is_library_kernel(&st.library_prefixes, &name)));
    if let Some(x) = sample {
        let why = memory_class(st, &s, &name, op.as_ref(), x);
        s.insert("memory_class".into(), Val::Bool(why.is_some()));
        if let Some(w) = why {
            s.insert("memory_class_evidence".into(), Val::Str(w));
        }
    }
    if let Some(x) = sample {
        let (small, why) = small_transform(st, x);
        s.insert("small_transform".into(), Val::Bool(small));
        if let Some(w) = why {
            s.insert("transform_evidence".into(), Val::Str(w));
        }
    }
    if let Some((n, share)) = neighbour {
        s.insert("fusion_neighbour".into(), Val::Str(n.clone()));
        s.insert("fusion_neighbour_share_pct".into(), Val::Num(*share));
    }
    kf.op = op;

    if let Some(r) = ctx.row {
        let graph = r.route.as_ref().and_then(|rt| rt.attributes.get("graph_enabled")).and_then(|v| v.as_bool());
        if let Some(g) = graph {
            s.insert("graph_enabled".into(), Val::Bool(g));
        }
        // Only env that can change a route is a knob (PYTHONUNBUFFERED=1 is not).
        let knobs: Vec<String> = r
            .variant
            .env
            .iter()
            .filter(|(k, _)| !r.variant.instrumentation.contains(k) && is_route_env(st, r, k) && knob_reaches(st, k, &name))
            .chain(r.variant.knobs.iter())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        s.insert("route_knobs".into(), Val::Bool(!knobs.is_empty()));
        if !knobs.is_empty() {
            s.insert("route_knob_list".into(), Val::Str(knobs.join(", ")));
        }
    }

    // Profile numbers.
    if let Some(x) = sample {
        kf.demangled = x.demangled.clone();
        kf.share_pct = x.share_pct;
        kf.calls = Some(x.calls);
        kf.avg_us = x.avg_us;
        kf.total_us = Some(x.total_us);
        if let Some(v) = x.share_pct {
            s.insert("share_pct".into(), Val::Num(v));
        }
        s.insert("calls".into(), Val::Num(x.calls as f64));
        if let Some(v) = x.avg_us {
            s.insert("avg_us".into(), Val::Num(v));
        }
        s.insert("total_us".into(), Val::Num(x.total_us));

        // Bandwidth: counters, bytes per call, then what the workload reported.
        // `bytes` is per call (collect parsers: per-launch mean of the DRAM counters).
        let bw = if let (Some(b), Some(avg)) = (x.bytes, x.avg_us.filter(|a| *a > 0.0)) {
            Some((b / avg / 1e3, bytes_label(x)))
        } else {
            x.achieved_gbps.map(|g| (g, "reported by workload".to_string()))
        };
        if let Some(src) = bytes_source(x) {
            kf.throughput.bytes_source = Some(src.to_string());
            s.insert("bytes_source".into(), Val::Str(src.to_string()));
        }
        kf.bytes_note = x.extra.get("bytes_note").and_then(|v| v.as_str()).map(str::to_string);
        s.insert("bw_unknown".into(), Val::Bool(bw.is_none()));
        if bw.is_none() {
            let how = kf.bytes_note.clone().or_else(|| ctx.atom.map(|a| format!("{} gets DRAM bytes", counters_command(a.vendor))));
            if let Some(h) = how {
                s.insert("bytes_how".into(), Val::Str(h));
            }
        }
        if let Some(n) = x.extra.get("graph_replayed_calls").and_then(|v| v.as_f64()) {
            s.insert("graph_replayed_calls".into(), Val::Num(n));
        }
        triton_signals(x, &mut kf, &mut s);
        if let Some((gbps, src)) = bw {
            kf.throughput.bw_gbps = Some(gbps);
            kf.throughput.bw_source = Some(src.clone());
            s.insert("bw_gbps".into(), Val::Num(gbps));
            s.insert("bw_source".into(), Val::Str(src));
            if let Some(p) = ctx.product {
                let (peak, label) = p.best_bw_gbps();
                let pct = 100.0 * gbps / peak;
                kf.throughput.bw_pct_of_peak = Some(pct);
                kf.throughput.bw_band = rules.fit.band(pct).map(|b| b.name.clone());
                s.insert("bw_pct".into(), Val::Num(pct));
                s.insert("bw_peak_gbps".into(), Val::Num(peak));
                s.insert("bw_peak_label".into(), Val::Str(label.into()));
                if let Some(share) = x.share_pct {
                    s.insert("headroom_pct".into(), Val::Num(share * (1.0 - pct.min(100.0) / 100.0)));
                }
            }
        }
        if let (Some(f), Some(avg)) = (x.flops, x.avg_us.filter(|a| *a > 0.0)) {
            let tflops = f / avg / 1e6;
            kf.throughput.tflops = Some(tflops);
            s.insert("tflops".into(), Val::Num(tflops));
            if let Some(p) = ctx.product {
                let key = ["bf16_matrix", "fp16_matrix", "fp32"].into_iter().find(|k| p.peak_rate(k).is_some());
                if let Some(k) = key {
                    let peak = p.peak_rate(k).unwrap_or(1.0);
                    let pct = 100.0 * tflops / peak;
                    kf.throughput.compute_pct_of_peak = Some(pct);
                    kf.throughput.compute_band = rules.fit.band(pct).map(|b| b.name.clone());
                    s.insert("compute_pct".into(), Val::Num(pct));
                    s.insert("compute_peak".into(), Val::Num(peak));
                    s.insert("compute_peak_key".into(), Val::Str(k.into()));
                    let how = if from_shapes(x) { ", from shapes" } else { "" };
                    s.insert("compute_source".into(), Val::Str(format!("{} TFLOP/s of {peak} TFLOP/s {k}{how}", crate::expr::fmt_num(tflops, Some(1)))));
                }
            }
        }
        // Nsight Compute's own speed-of-light percentages, when the capture has them.
        let ctr = |k: &str| x.counters.get(k).copied();
        if !s.contains_key("compute_pct") {
            if let Some(pct) = ctr("sm__throughput.avg.pct_of_peak_sustained_elapsed") {
                kf.throughput.compute_pct_of_peak = Some(pct);
                kf.throughput.compute_band = rules.fit.band(pct).map(|b| b.name.clone());
                s.insert("compute_pct".into(), Val::Num(pct));
                s.insert("compute_source".into(), Val::Str("ncu sm__throughput".into()));
            }
        }
        if let Some(pct) = ctr("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed") {
            kf.throughput.memory_sol_pct = Some(pct);
            s.insert("memory_sol_pct".into(), Val::Num(pct));
        }
        if let Some(pct) = ctr("sm__warps_active.avg.pct_of_peak_sustained_active") {
            kf.achieved_occupancy_pct = Some(pct);
            s.insert("achieved_occupancy_pct".into(), Val::Num(pct));
        }
        // Launch geometry: waves against SIMDs.
        if let (Some(g), Some(b), Some(atom), Some(p)) = (x.grid, x.block, ctx.atom, ctx.product) {
            let wave = atom.default_wave_size.max(1) as f64;
            let threads = (b[0].max(1) * b[1].max(1) * b[2].max(1)) as f64;
            let groups = (g[0].max(1) as f64) * (g[1].max(1) as f64) * (g[2].max(1) as f64);
            let waves = groups * (threads / wave).ceil();
            let simds = simds_of(atom, p);
            let wps = waves / simds;
            kf.launch = Some(LaunchFit { grid: g, block: b, waves, simds, waves_per_simd: wps });
            s.insert("launch_waves".into(), Val::Num(waves));
            s.insert("simds".into(), Val::Num(simds));
            s.insert("launch_waves_per_simd".into(), Val::Num(wps));
        }
    }

    // ISA resources.
    let launch_block = sample.and_then(|x| x.block).map(|b| b[0].max(1) * b[1].max(1) * b[2].max(1));
    let mut res = KernelResources::default();
    let mut occ_source = None;
    if let Some((lvl, (o, k))) = isa {
        let r = &k.resources;
        let spills = k.spills();
        kf.isa = Some(IsaFit {
            kernel: k.name.clone(),
            object: object_label(o),
            arch: o.arch.clone(),
            how: lvl,
            vgpr: r.vgpr,
            sgpr: r.sgpr,
            agpr: r.agpr,
            spills,
            scratch_bytes: r.scratch_bytes,
            lds_bytes: r.lds_bytes,
            wave_size: r.wave_size,
            max_workgroup_size: r.max_workgroup_size,
            mix_status: o.mix_status.clone(),
        });
        for (key, v) in [("vgpr", r.vgpr), ("sgpr", r.sgpr), ("agpr", r.agpr), ("wave_size", r.wave_size)] {
            if let Some(v) = v {
                s.insert(key.into(), Val::Num(v as f64));
            }
        }
        if let Some(v) = spills {
            s.insert("spills".into(), Val::Num(v));
        }
        s.insert("scratch_bytes".into(), Val::Num(r.scratch_bytes.unwrap_or(0) as f64));
        if let Some(v) = r.lds_bytes {
            s.insert("lds_bytes".into(), Val::Num(v as f64));
        }
        let (bars, matrix) = mix_signals(k, &mut s);
        kf.mix = bars;
        kf.matrix.used_ops = matrix;
        let vendor = o.vendor.or_else(|| Vendor::of_arch(&o.arch)).unwrap_or(Vendor::Amd);
        res = k.occupancy_resources(vendor, launch_block);
        occ_source = Some("isa manifest + arch db");
    } else if let Some(x) = sample {
        // Profilers that report launch resources (ncu) give occupancy without a manifest.
        if x.registers.is_some() {
            res.regs_per_thread = x.registers;
            res.vgprs = x.registers;
            res.shared_bytes = x.shared_bytes.unwrap_or(0);
            res.lds_bytes = x.shared_bytes.unwrap_or(0);
            occ_source = Some("profiler launch data + arch db");
        }
    }
    if launch_block.is_some() {
        res.workgroup_size = launch_block;
    }
    if let (Some(atom), Some(src)) = (ctx.atom, occ_source) {
        if atom.vendor == Vendor::Nvidia && res.vgprs.is_some() && res.regs_per_thread.is_none() {
            res.regs_per_thread = res.vgprs;
        }
        if atom.vendor == Vendor::Nvidia {
            res.vgprs = None;
            res.sgprs = None;
        } else {
            res.regs_per_thread = None;
        }
        match katlas_arch::occupancy(atom, &res) {
            Ok(o) => {
                // AMD reports waves/SIMD; NVIDIA warps/SM: per sub-partition it is comparable.
                let per_simd = match atom.vendor {
                    Vendor::Amd => o.achieved as f64,
                    Vendor::Nvidia => o.achieved as f64 / atom.nvidia.as_ref().map(|n| n.sub_partitions).unwrap_or(4).max(1) as f64,
                };
                s.insert("occupancy_waves".into(), Val::Num(per_simd));
                s.insert(
                    "occupancy_max".into(),
                    Val::Num(match atom.vendor {
                        Vendor::Amd => o.max as f64,
                        Vendor::Nvidia => o.max as f64 / atom.nvidia.as_ref().map(|n| n.sub_partitions).unwrap_or(4).max(1) as f64,
                    }),
                );
                s.insert("occupancy_pct".into(), Val::Num(100.0 * o.fraction));
                s.insert("occupancy_limiter".into(), Val::Str(o.limiter.name().into()));
                kf.occupancy = Some(OccupancyFit {
                    achieved: o.achieved,
                    max: o.max,
                    unit: o.unit,
                    limiter: o.limiter,
                    source: src.into(),
                    groups: o.groups,
                    group_unit: o.group_unit,
                    bounds: o.per_limit_groups.iter().map(|(l, n)| (l.name().to_string(), *n)).collect(),
                    notes: o.notes,
                });
            }
            Err(e) => {
                kf.occupancy = None;
                s.insert("occupancy_error".into(), Val::Str(e.to_string()));
            }
        }
    }
    if let Some(a) = ctx.atom {
        kf.matrix.available = a.matrix.iter().map(|(u, t)| format!("{u}: {}", t.join(", "))).collect();
    }

    // Rules.
    let mut flags = ctx.phase_flags.clone();
    let (findings, emitted, unknown) =
        eval_rules(rules.fit.rules.iter().filter(|r| r.scope == RuleScope::Kernel), Facts { values: &s, flags: &flags }, Some(&name));
    kf.findings = findings;
    one_lead_class(&mut kf.findings, rules);
    flags.extend(emitted);
    kf.emitted = flags;
    kf.unknown = unknown;
    kf.signals = s;
    kf
}

/// A kernel gets one lead limit class. A measured reading that the kernel is far from its
/// bandwidth ceiling (latency-bound) and a memory-bound reading from its op class alone (the
/// roofline of a one-token GEMV) would otherwise both be called its limit: the measurement
/// leads, and the class reading stays as a caveat saying what the ceiling would be. The
/// emitted signals stay, so levers for both readings still trigger.
fn one_lead_class(findings: &mut [Finding], rules: &Rules) {
    let emits = |f: &Finding, what: &str| rules.fit.rules.iter().any(|r| r.id == f.rule && r.emits.iter().any(|e| e == what));
    let Some(lead) =
        findings.iter().find(|f| f.kind == FindingKind::Limit && emits(f, "latency_bound")).map(|f| (f.rule.clone(), f.numbers.get("bw_pct").cloned()))
    else {
        return;
    };
    for f in findings.iter_mut().filter(|f| f.kind == FindingKind::Limit && emits(f, "memory_bound")) {
        let (who, what) = match (&f.kernel, f.text.split_once(": ")) {
            (Some(k), Some((head, rest))) if head == k => (format!("{k}: "), rest.to_string()),
            _ => (String::new(), f.text.clone()),
        };
        let measured = match &lead.1 {
            Some(Val::Num(p)) => format!("measured at {}% of the bandwidth ceiling, it does not reach it", crate::expr::fmt_num(*p, Some(1))),
            _ => "measured, it does not reach the bandwidth ceiling".into(),
        };
        f.kind = FindingKind::Caveat;
        f.text = format!("{who}secondary, by op class alone: {what}; {measured}, so the lead limit is latency ({})", lead.0);
    }
}
