//! `katlas arch`: the architecture database (atoms, products) and occupancy.

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{fmt_num, print_json, table, Format, FormatArg};
use katlas_arch::{occupancy_with, ArchDb, Atom, KernelResources, OccupancyOptions, Product};
use serde_json::json;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum ArchCmd {
    /// List atoms (ISA targets), or products with --products.
    Ls(LsArgs),
    /// Show one atom (gfx1100, gfx90a:xnack-, sm_90a, 9.0) or product ("NVIDIA H200").
    Show(ShowArgs),
    /// Theoretical occupancy of a kernel's resources on an atom.
    Occupancy(OccArgs),
}

#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// List products instead of atoms.
    #[arg(long)]
    pub products: bool,
    /// Only this family (gfx11, sm_9x) or, with --products, this atom.
    #[arg(long, value_name = "NAME")]
    pub family: Option<String>,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Atom or product name.
    pub name: String,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct OccArgs {
    /// Atom (gfx942, sm_90 ...).
    pub atom: String,
    /// AMD: .vgpr_count (total, AGPRs included as LLVM reports it).
    #[arg(long)]
    pub vgprs: Option<u32>,
    /// AMD: .agpr_count.
    #[arg(long)]
    pub agprs: Option<u32>,
    /// AMD: .sgpr_count.
    #[arg(long)]
    pub sgprs: Option<u32>,
    /// AMD: LDS bytes per workgroup.
    #[arg(long, default_value_t = 0)]
    pub lds: u64,
    /// AMD: scratch bytes per lane.
    #[arg(long, default_value_t = 0)]
    pub scratch: u64,
    /// Wave size (default: the atom's).
    #[arg(long)]
    pub wave: Option<u32>,
    /// Threads per workgroup/block (default: 256, noted).
    #[arg(long = "block", alias = "workgroup")]
    pub block: Option<u32>,
    /// NVIDIA: registers per thread.
    #[arg(long)]
    pub regs: Option<u32>,
    /// NVIDIA: static + dynamic shared memory bytes per block.
    #[arg(long, default_value_t = 0)]
    pub shared: u64,
    /// AMD gfx10+: compiled with -mcumode.
    #[arg(long)]
    pub cu_mode: bool,
    /// NVIDIA: shared-memory carveout in bytes (default: the largest).
    #[arg(long)]
    pub carveout: Option<u64>,
    #[command(flatten)]
    pub format: FormatArg,
}

fn db(ctx: &Ctx) -> Result<ArchDb, CliError> {
    // Outside a project (or with a broken katlas.toml) the builtin data still answers.
    let dir = ctx.layout().ok().map(|l| l.arch_rules_dir());
    ArchDb::load(dir.as_deref()).map_err(CliError::bad_input)
}

pub fn run(c: &ArchCmd, ctx: &Ctx) -> CmdResult {
    let db = db(ctx)?;
    match c {
        ArchCmd::Ls(a) => ls(&db, a),
        ArchCmd::Show(a) => show(&db, a),
        ArchCmd::Occupancy(a) => occ(&db, a),
    }
}

fn matrix_summary(a: &Atom) -> String {
    a.matrix.iter().map(|(u, t)| format!("{u}[{}]", t.join(","))).collect::<Vec<_>>().join(" ")
}

fn ls(db: &ArchDb, a: &LsArgs) -> CmdResult {
    let fmt = a.format.format;
    if a.products {
        let atom_filter = a.family.as_deref().map(|f| db.family_members(f).into_iter().map(|x| x.name.clone()).collect::<Vec<_>>());
        let products: Vec<&Product> = db.products().filter(|p| atom_filter.as_ref().is_none_or(|names| names.contains(&p.atom))).collect();
        if fmt == Format::Json {
            print_json(&json!({ "schema": katlas_arch::SCHEMA, "products": products }));
            return Ok(ExitCode::SUCCESS);
        }
        let mut t = table(fmt, &["product", "atom", "units", "boost MHz", "peak GB/s", "best GB/s", "fp16/bf16 matrix TFLOP/s"]);
        for p in products {
            let (best, kind) = p.best_bw_gbps();
            let mat = p.peak_rate("bf16_matrix").or(p.peak_rate("fp16_matrix")).map(fmt_num).unwrap_or_else(|| "-".into());
            t.add_row(vec![
                p.name.clone(),
                p.atom.clone(),
                format!("{} {}", p.units.value, p.unit_kind()),
                p.boost_clock_mhz.as_ref().map(|c| fmt_num(c.value)).unwrap_or_else(|| "-".into()),
                fmt_num(p.peak_bw_gbps.value),
                format!("{} ({kind})", fmt_num(best)),
                mat,
            ]);
        }
        println!("{t}");
        return Ok(ExitCode::SUCCESS);
    }
    let atoms: Vec<&Atom> = match &a.family {
        Some(f) => db.family_members(f),
        None => db.atoms().collect(),
    };
    if atoms.is_empty() {
        return Err(CliError::bad_input(format!(
            "no atoms in family `{}`; families: {}",
            a.family.as_deref().unwrap_or(""),
            db.families().into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    if fmt == Format::Json {
        print_json(&json!({ "schema": katlas_arch::SCHEMA, "atoms": atoms }));
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = table(fmt, &["atom", "vendor", "family", "class", "waves", "matrix units", "products"]);
    for x in atoms {
        let waves = x.wave_sizes.iter().map(|w| if *w == x.default_wave_size { format!("{w}*") } else { w.to_string() }).collect::<Vec<_>>().join("/");
        t.add_row(vec![
            x.name.clone(),
            x.vendor.as_str().to_string(),
            x.family.clone(),
            x.class.clone(),
            waves,
            matrix_summary(x),
            db.products_for_atom(&x.name).len().to_string(),
        ]);
    }
    println!("{t}");
    Ok(ExitCode::SUCCESS)
}

fn show(db: &ArchDb, a: &ShowArgs) -> CmdResult {
    let fmt = a.format.format;
    if let Some(atom) = db.atom(&a.name) {
        let products = db.products_for_atom(&atom.name);
        if fmt == Format::Json {
            print_json(&json!({ "schema": katlas_arch::SCHEMA, "kind": "atom", "atom": atom, "products": products }));
            return Ok(ExitCode::SUCCESS);
        }
        let mut t = table(fmt, &["key", "value"]);
        t.add_row(vec!["atom".into(), atom.name.clone()]);
        t.add_row(vec!["vendor / family / class".into(), format!("{} / {} / {}", atom.vendor.as_str(), atom.family, atom.class)]);
        if !atom.also_families.is_empty() {
            t.add_row(vec!["also families".into(), atom.also_families.join(", ")]);
        }
        if let Some(v) = &atom.variant_of {
            t.add_row(vec!["variant of".into(), v.clone()]);
        }
        if !atom.runs_on.is_empty() {
            t.add_row(vec!["code runs on".into(), atom.runs_on.join(", ")]);
        }
        t.add_row(vec!["codenames".into(), atom.codenames.join(", ")]);
        t.add_row(vec!["wave sizes (default)".into(), format!("{:?} ({})", atom.wave_sizes, atom.default_wave_size)]);
        t.add_row(vec!["caps".into(), atom.caps.join(", ")]);
        t.add_row(vec!["matrix".into(), matrix_summary(atom)]);
        if !atom.dot.is_empty() {
            t.add_row(vec!["dot".into(), atom.dot.join(", ")]);
        }
        if let Some(l) = &atom.amd {
            t.add_row(vec!["SIMDs/CU, CUs/WGP".into(), format!("{}, {} (WGP mode default: {})", l.simds_per_cu, l.cus_per_wgp, l.wgp_mode_default)]);
            t.add_row(vec!["max waves/SIMD".into(), l.max_waves_per_simd.to_string()]);
            for (w, f) in [(32, &l.vgpr_wave32), (64, &l.vgpr_wave64)] {
                if let Some(f) = f {
                    t.add_row(vec![format!("VGPRs wave{w}"), format!("{} per SIMD lane, granule {}, max {}/wave", f.total, f.granule, f.max_per_wave)]);
                }
            }
            t.add_row(vec!["AGPRs".into(), format!("{:?}, {}/wave, align {}", l.agpr_mode, l.agprs_per_wave, l.agpr_align)]);
            let sg =
                if l.sgpr_waves.is_empty() { "do not limit occupancy".to_string() } else { format!("steps {:?}, else {}", l.sgpr_waves, l.sgpr_waves_floor) };
            t.add_row(vec!["SGPRs".into(), format!("{}/wave; {sg}", l.sgprs_per_wave)]);
            t.add_row(vec![
                "LDS".into(),
                format!("{} B/CU, {} B/WGP, {} B/workgroup max, granule {} B", l.lds_bytes_per_cu, l.lds_bytes_per_wgp, l.lds_max_per_workgroup, l.lds_granule),
            ]);
            t.add_row(vec![
                "workgroups".into(),
                format!("{}/CU, {}/WGP, {} threads max", l.max_workgroups_per_cu, l.max_workgroups_per_wgp, l.max_workgroup_size),
            ]);
        }
        if let Some(l) = &atom.nvidia {
            t.add_row(vec!["compute capability".into(), l.compute_capability.clone()]);
            t.add_row(vec!["warps / threads / blocks per SM".into(), format!("{} / {} / {}", l.max_warps_per_sm, l.max_threads_per_sm, l.max_blocks_per_sm)]);
            t.add_row(vec![
                "registers".into(),
                format!(
                    "{}/SM, {}/block, {}/thread, unit {}/warp, {} sub-partitions",
                    l.regs_per_sm, l.max_regs_per_block, l.max_regs_per_thread, l.reg_alloc_unit, l.sub_partitions
                ),
            ]);
            t.add_row(vec![
                "shared memory".into(),
                format!(
                    "{} B/SM, {} B/block opt-in ({} default), {} B reserved/block, granule {} B, carveouts {:?} KiB",
                    l.smem_per_sm, l.smem_per_block_optin, l.smem_per_block_default, l.smem_reserved_per_block, l.smem_granule, l.smem_carveouts_kib
                ),
            ]);
        }
        t.add_row(vec!["products".into(), products.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")]);
        t.add_row(vec!["source".into(), atom.source.clone()]);
        for (k, s) in &atom.sources {
            t.add_row(vec![format!("source of {k}"), s.clone()]);
        }
        for n in &atom.notes {
            t.add_row(vec!["note".into(), n.clone()]);
        }
        println!("{t}");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(p) = db.product(&a.name) {
        if fmt == Format::Json {
            print_json(&json!({ "schema": katlas_arch::SCHEMA, "kind": "product", "product": p }));
            return Ok(ExitCode::SUCCESS);
        }
        let mut t = table(fmt, &["key", "value", "source"]);
        let src = |s: &katlas_arch::Sourced<f64>| {
            if s.measured {
                format!("measured: {}", s.source)
            } else {
                s.source.clone()
            }
        };
        t.add_row(vec!["product".into(), p.name.clone(), String::new()]);
        t.add_row(vec!["atom".into(), p.atom.clone(), String::new()]);
        t.add_row(vec!["aliases".into(), p.aliases.join(", "), String::new()]);
        t.add_row(vec![format!("{}s", p.unit_kind()), p.units.value.to_string(), p.units.source.clone()]);
        for (k, v) in [("boost clock MHz", &p.boost_clock_mhz), ("memory GB", &p.memory_gb), ("last-level cache MiB", &p.llc_mib)] {
            if let Some(v) = v {
                t.add_row(vec![k.into(), fmt_num(v.value), src(v)]);
            }
        }
        t.add_row(vec!["peak bandwidth GB/s".into(), fmt_num(p.peak_bw_gbps.value), src(&p.peak_bw_gbps)]);
        if let Some(m) = &p.measured_bw_gbps {
            t.add_row(vec!["measured bandwidth GB/s".into(), fmt_num(m.value), src(m)]);
        }
        for (k, v) in &p.peak_rates {
            let unit = if k.starts_with("int") { "TOP/s" } else { "TFLOP/s" };
            t.add_row(vec![format!("{k} {unit} (dense)"), fmt_num(v.value), src(v)]);
        }
        for n in &p.notes {
            t.add_row(vec!["note".into(), n.clone(), String::new()]);
        }
        println!("{t}");
        return Ok(ExitCode::SUCCESS);
    }
    Err(CliError::bad_input(format!(
        "unknown atom or product `{}` (atoms: {}; `katlas arch ls --products` lists products)",
        a.name,
        db.atoms().map(|x| x.name.as_str()).collect::<Vec<_>>().join(", ")
    )))
}

fn occ(db: &ArchDb, a: &OccArgs) -> CmdResult {
    let atom = db.atom(&a.atom).ok_or_else(|| CliError::bad_input(format!("unknown atom `{}`", a.atom)))?;
    let r = KernelResources {
        vgprs: a.vgprs,
        agprs: a.agprs,
        sgprs: a.sgprs,
        lds_bytes: a.lds,
        scratch_bytes_per_lane: a.scratch,
        wave_size: a.wave,
        workgroup_size: a.block,
        regs_per_thread: a.regs,
        shared_bytes: a.shared,
    };
    let opts = OccupancyOptions { cu_mode: a.cu_mode.then_some(true), smem_carveout_bytes: a.carveout };
    let o = occupancy_with(atom, &r, &opts)?;
    if a.format.format == Format::Json {
        print_json(&json!({ "schema": "katlas.arch.occupancy.v1", "atom": atom.name, "resources": r, "options": opts, "occupancy": o }));
        return Ok(ExitCode::SUCCESS);
    }
    println!("{}: {} / {} {} ({:.0}%), limited by {:?}; {} {}", atom.name, o.achieved, o.max, o.unit, o.fraction * 100.0, o.limiter, o.groups, o.group_unit);
    let mut t = table(a.format.format, &["limit", &o.unit, &o.group_unit]);
    for (l, v) in &o.per_limit {
        let g = o.per_limit_groups.iter().find(|p| p.0 == *l).map(|p| p.1.to_string()).unwrap_or_else(|| "-".into());
        t.add_row(vec![format!("{l:?}"), v.to_string(), g]);
    }
    println!("{t}");
    for n in &o.notes {
        println!("note: {n}");
    }
    Ok(ExitCode::SUCCESS)
}
