//! The fit view: each hot kernel against its hardware.
//!
//! Inputs are any of: a row (profile), an ISA manifest, a product. Every number in the
//! view says where it came from; a rule that could not decide for lack of evidence is
//! listed under `missing` with the evidence that would decide it.
//!
//! [`build_fit`] reads the context and scope (`scope`: arch, product, which ISA kernels a
//! profile name may join), the phase, then each hot kernel (`kernel`, with `classify` and
//! `profile`), and gathers the rules' findings (`evaluate`) into the view's types (`view`).

mod classify;
mod evaluate;
mod kernel;
mod profile;
mod scope;
mod view;

pub use classify::is_library_kernel;
pub use kernel::{arch_signals, constexpr_list};
pub(crate) use profile::merge_samples;
pub use scope::FitInput;
pub use view::*;

use classify::fusion_neighbours;
use evaluate::{eval_rules, readings, Readings};
use kernel::{fit_kernel, phase_signals, KernelCtx};
use scope::{best_match, choose_arch, isa_for_arch, object_label, resolve_product, Pair};

use crate::expr::Facts;
use crate::isa::{CodeObject, Kernel as IsaKernel};
use crate::names::MatchLevel;
use crate::rules::RuleScope;
use crate::signals::Source;
use katlas_arch::Vendor;
use katlas_model::KernelSample;
use std::collections::BTreeSet;

/// How to add a profile, said wherever one is missing.
pub const PROFILE_HOW: &str = "add one: `katlas collect WORKLOAD --profile` (the spec's [profile] switches), or read a profiler file: \
`katlas fit FILE --parse ncu-csv` (or torch-trace, rocprofv3); a workload that times its own kernels prints a json-lines `kernels` record, \
e.g. {\"katlas\":1,\"phase\":\"decode\",\"kernels\":[{\"name\":\"gemv_q4\",\"calls\":50,\"total_us\":7500,\"bytes\":2400000}]} \
(total_us over all calls, bytes per call; docs/collect.md, json-lines kernels)";

/// A row measured on the CPU (the lab's CPU backend): its arch or its `backend` parameter says so.
pub fn measured_on_cpu(row: &katlas_model::Row) -> bool {
    row.arch.as_deref().is_some_and(|a| a.eq_ignore_ascii_case("cpu")) || row.params.get("backend").is_some_and(|b| b.eq_ignore_ascii_case("cpu"))
}

pub fn build_fit(input: &FitInput) -> Result<FitView, crate::AdviseError> {
    let rules = input.rules;
    let db = input.db;
    let row = input.row;
    let mut scope_notes = Vec::new();

    // Arch atom: explicit, row, product, then a manifest with a single arch.
    let (arch, arch_source) = choose_arch(input);
    let atom = arch.as_deref().and_then(|a| db.atom(a));
    let cpu = row.is_some_and(measured_on_cpu);
    if cpu {
        scope_notes.push(format!(
            "the row was measured on the CPU: its kernels are CPU functions, so GPU readings (% of {}, a kernel's GPU resources) do not hold for them; \
             a GPU read needs a GPU run of the workload (`katlas collect {} --set backend=cuda` or the spec's GPU backend)",
            input.product.map(|p| format!("{p}'s ceilings")).unwrap_or_else(|| "a GPU's ceilings".into()),
            row.map(|r| r.workload.as_str()).unwrap_or("WORKLOAD")
        ));
    } else if let (Some(a), None) = (&arch, atom) {
        scope_notes.push(format!("arch `{a}` is not in the arch database: no capability or occupancy reads"));
    }
    let atom_name = atom.map(|a| a.name.clone()).or(arch.clone());

    let mut candidates = Vec::new();
    let product = resolve_product(db, input.product, row, atom_name.as_deref(), &mut scope_notes, &mut candidates).map_err(crate::AdviseError::Usage)?;
    if let (Some((p, _)), Some(a)) = (&product, atom) {
        if katlas_arch::canonical_atom(&p.atom) != a.name && a.variant_of.as_deref() != Some(p.atom.as_str()) {
            scope_notes.push(format!("product {} is {} but the evidence is {}", p.name, p.atom, a.name));
        }
    }
    let prod = product.as_ref().map(|(p, _)| *p);

    let mut header = Header {
        arch: atom_name.clone(),
        arch_class: atom.map(|a| a.class.clone()),
        arch_source,
        product: prod.map(|p| p.name.clone()),
        product_source: product.as_ref().map(|(_, s)| s.clone()),
        bw_ceiling_gbps: prod.map(|p| p.best_bw_gbps().0),
        bw_ceiling_label: prod.map(|p| p.best_bw_gbps().1.to_string()),
        row_source: input.row_source.clone(),
        isa_manifest: input.isa.map(|m| m.path.clone()),
        ..Default::default()
    };
    if let Some(r) = row {
        header.workload = Some(r.workload.clone());
        header.phase = Some(r.phase.clone());
        header.shape = r.shape_bucket.clone();
        header.quant = r.quant.clone();
        header.row_id = Some(r.id.clone());
    }

    // ISA kernels usable for this arch.
    let isa_all: Vec<Pair> = input.isa.map(|m| m.kernels().collect()).unwrap_or_default();
    let isa_for_arch = isa_for_arch(db, &isa_all, atom_name.as_deref());
    let isa_arches = input.isa.map(|m| m.arches()).unwrap_or_default();
    if input.isa.is_some() && isa_for_arch.is_empty() {
        scope_notes.push(format!(
            "the ISA manifest has no code objects for {} (it has: {}); resources stay unknown",
            atom_name.as_deref().unwrap_or("the row's arch"),
            if isa_arches.is_empty() { "none".into() } else { isa_arches.join(", ") }
        ));
    }

    // The phase first: its timeline decides before any one kernel does.
    let mut psig = phase_signals(row);
    arch_signals(atom, &mut psig);
    let no_flags = BTreeSet::new();
    let (phase_findings, phase_emitted, phase_unknown) =
        eval_rules(rules.fit.rules.iter().filter(|r| r.scope == RuleScope::Phase), Facts { values: &psig, flags: &no_flags }, None);
    let pflags: BTreeSet<String> = phase_emitted.into_iter().collect();
    let ctx = KernelCtx { atom, product: prod, phase: row.map(|r| r.phase.as_str()), row, phase_signals: &psig, phase_flags: &pflags };
    let mut kernels = Vec::new();
    let mut scope = Scope { isa_kernels: isa_all.len(), isa_kernels_for_arch: isa_for_arch.len(), isa_arches, ..Default::default() };

    let profile: Vec<KernelSample> = row.map(|r| merge_samples(&r.kernels)).unwrap_or_default();
    if !profile.is_empty() {
        let mut hot = profile;
        let total: f64 = hot.iter().map(|k| k.total_us).sum();
        for k in &mut hot {
            if k.share_pct.is_none() && total > 0.0 {
                k.share_pct = Some(100.0 * k.total_us / total);
            }
            // Counter-only profiles carry no times: the average is unknown, not zero.
            if k.total_us <= 0.0 && k.avg_us.is_some_and(|a| a <= 0.0) {
                k.avg_us = None;
            }
            if k.avg_us.is_none() && k.calls > 0 && k.total_us > 0.0 {
                k.avg_us = Some(k.total_us / k.calls as f64);
            }
        }
        let neighbours = fusion_neighbours(&rules.fit.settings, &hot);
        hot.sort_by(|a, b| b.share_pct.unwrap_or(0.0).total_cmp(&a.share_pct.unwrap_or(0.0)).then(b.total_us.total_cmp(&a.total_us)));
        scope.profile_names = hot.len();
        hot.truncate(rules.fit.settings.hot_limit);
        let shorts = crate::names::short_names(&hot.iter().map(|k| k.name.as_str()).collect::<Vec<_>>());
        for (s, short) in hot.iter().zip(&shorts) {
            let m = if input.isa.is_some() { best_match(&s.name, s.demangled.as_deref(), &isa_for_arch) } else { None };
            match &m {
                Some((lvl, (o, k), also)) => scope.matched.push(ScopeMatch {
                    profile: s.name.clone(),
                    isa_kernel: k.name.clone(),
                    how: *lvl,
                    object: object_label(o),
                    also: also.clone(),
                }),
                None if input.isa.is_some() => {
                    // A name the manifest holds for another arch only is not "no entry": say whose.
                    if let Some((lvl, (o, k), _)) = best_match(&s.name, s.demangled.as_deref(), &isa_all) {
                        scope_notes.push(format!(
                            "{short}: the ISA manifest has it ({} match: {} in {}) for {} only, not {}; its resources are not read",
                            lvl.as_str(),
                            k.name,
                            object_label(o),
                            o.arch,
                            atom_name.as_deref().unwrap_or("the row's arch")
                        ));
                    }
                    scope.unmatched_hot.push(s.name.clone())
                }
                None => {}
            }
            let isa = m.map(|(lvl, pair, _)| (lvl, pair));
            kernels.push(fit_kernel(&ctx, rules, Some(s), isa, short, neighbours.get(&s.name)));
        }
        scope.kind = match (input.isa.is_some(), scope.matched.is_empty()) {
            (false, _) => ScopeKind::ProfileOnly,
            (true, false) => ScopeKind::ProfileMatched,
            (true, true) => ScopeKind::ProfileUnmatched,
        };
    } else if input.isa.is_some() {
        scope.kind = ScopeKind::IsaOnly;
        if atom.is_none() && scope.isa_arches.len() > 1 {
            scope_notes.push(format!(
                "the manifest holds several arches ({}): each kernel is read against its own; pass --arch to pick one",
                scope.isa_arches.join(", ")
            ));
        }
        let shown: Vec<&(&CodeObject, &IsaKernel)> = isa_for_arch.iter().take(rules.fit.settings.isa_only_limit).collect();
        let shorts = crate::names::short_names(&shown.iter().map(|(_, k)| k.name.as_str()).collect::<Vec<_>>());
        for ((o, k), short) in shown.into_iter().zip(&shorts) {
            // Without a chosen arch, each object is judged against its own atom.
            let own = KernelCtx {
                atom: ctx.atom.or_else(|| db.atom(&o.arch)),
                product: ctx.product,
                phase: ctx.phase,
                row: ctx.row,
                phase_signals: ctx.phase_signals,
                phase_flags: ctx.phase_flags,
            };
            kernels.push(fit_kernel(&own, rules, None, Some((MatchLevel::Exact, (*o, *k))), short, None));
        }
        if isa_for_arch.len() > rules.fit.settings.isa_only_limit {
            scope_notes.push(format!("{} of {} ISA kernels shown (isa_only_limit)", rules.fit.settings.isa_only_limit, isa_for_arch.len()));
        }
    } else {
        scope.kind = ScopeKind::Empty;
    }
    scope.notes = scope_notes;

    // Row-level findings, hottest kernel first; phase rules wait on a trace's timeline only
    // when there is a profile to have one.
    let profiled = row.is_some_and(|r| !r.kernels.is_empty());
    let Readings { likely, left, stops, caveats, missing } = readings(&phase_findings, &phase_unknown, profiled, &kernels);
    let mut evidence = Evidence {
        profile: row.map(|r| !r.kernels.is_empty()).unwrap_or(false),
        isa: input.isa.is_some(),
        throughput: kernels.iter().any(|k| k.throughput.bw_gbps.is_some() || k.throughput.tflops.is_some()),
        product: prod.is_some(),
        missing,
    };
    if !evidence.profile {
        evidence.missing.insert(
            0,
            Missing { evidence: format!("a profile (per-kernel calls and times): without it no kernel can be called hot; {PROFILE_HOW}"), rules: vec![] },
        );
    }
    if cpu {
        // ISA, occupancy, launch and arch evidence are GPU evidence: a CPU function has none.
        let gpu_only = [Source::Isa, Source::Occupancy, Source::Mix, Source::Launch, Source::Arch, Source::Counters].map(|s| s.evidence());
        evidence.missing.retain(|m| !gpu_only.iter().any(|g| m.evidence.starts_with(g)));
        evidence.missing.push(Missing {
            evidence: "a GPU run of the workload (this row is CPU time): its GPU kernels, read against the GPU's ceilings and code objects".into(),
            rules: vec![],
        });
    } else if !evidence.isa {
        evidence.missing.push(Missing {
            evidence: format!(
                "an ISA manifest (`katlas isa scan`): {}",
                if atom.is_some_and(|a| a.vendor == Vendor::Nvidia) {
                    "registers/thread, spills, shared memory, instruction mix"
                } else {
                    "registers, spills, LDS, wave size, instruction mix"
                }
            ),
            rules: vec![],
        });
    }
    if !evidence.product {
        evidence.missing.push(Missing { evidence: "a product (`--product`): bandwidth and rate ceilings for % of peak".into(), rules: vec![] });
    }

    let quant = row.and_then(|r| r.quant.as_deref()).and_then(|q| input.rules.quant_for(q)).cloned();
    let runtime = row.map(|r| r.metrics.iter().map(|(k, m)| (k.clone(), m.value)).collect()).unwrap_or_default();

    let product_readings = candidates
        .iter()
        .map(|p| {
            let one = FitInput {
                row: input.row,
                isa: input.isa,
                product: Some(p.name.as_str()),
                arch: input.arch,
                db: input.db,
                rules: input.rules,
                row_source: None,
            };
            build_fit(&one).map(|v| ProductReading {
                product: p.name.clone(),
                bw_ceiling_gbps: v.header.bw_ceiling_gbps,
                likely_limit: v.likely_limit,
                bw_pct: v.kernels.iter().filter_map(|k| k.throughput.bw_pct_of_peak.map(|x| (k.short_name.clone(), x))).collect(),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;

    Ok(FitView {
        schema: crate::FIT_SCHEMA.into(),
        header,
        evidence,
        scope,
        phase: PhaseFit {
            signals: psig
                .into_iter()
                .filter(|(k, _)| {
                    crate::signals::get(k).is_some_and(|d| matches!(d.from, crate::signals::Source::Timeline | crate::signals::Source::Host))
                        || k == "framework"
                })
                .collect(),
            findings: phase_findings,
        },
        kernels,
        quant,
        runtime,
        likely_limit: likely,
        left_on_table: left,
        stops,
        caveats,
        rules_files: vec![rules.fit.file.clone(), rules.quant_file.clone()],
        product_readings,
    })
}
