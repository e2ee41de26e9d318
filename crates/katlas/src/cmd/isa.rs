//! `katlas isa`: scan code objects natively (katlas-isa), show one kernel, diff two manifests.

use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{fmt_opt, print_json, say_err, say_line, table, Format, FormatArg};
use katlas_isa::manifest::{CodeObject, IsaManifest, Kernel, Vendor};
use katlas_isa::{DisasmMode, ScanFailure, ScanOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum IsaCmd {
    /// Read code objects (AMD ELF, offload bundles, CCOB, host ELF .hip_fatbin/.nv_fatbin, cubins,
    /// fatbins) by content, recursively; write a katlas.isa.v1 manifest.
    Scan(ScanArgs),
    /// Show one kernel's resources, descriptor, mix and occupancy from a manifest.
    Show(ShowArgs),
    /// Per-kernel resource and instruction-mix deltas between two manifests (or code objects);
    /// exit 1 when spills or scratch rose or matrix instructions fell.
    Diff(DiffArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DisasmArg {
    Auto,
    Never,
    Always,
    /// External disassemblers only (llvm-objdump for AMD, no native decoder).
    Objdump,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportArg {
    /// hipfire's `hipfire.kernel_atlas.isa.v0` document.
    #[value(name = "hipfire-v0")]
    HipfireV0,
}

#[derive(Debug, clap::Args)]
pub struct ScanArgs {
    /// Files or directories (walked recursively; content decides what a file is).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Keep kernels whose name or demangled name matches this regex.
    #[arg(long, value_name = "REGEX")]
    pub filter: Option<String>,
    /// Keep objects of this architecture atom (gfx90a, sm_90; sm_100 also matches sm_100a and sm_100f).
    #[arg(long, value_name = "ATOM")]
    pub arch: Option<String>,
    /// Parallel jobs (default: all cores).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Instruction mix: AMD natively (opcode tables from LLVM; llvm-objdump where the decoder
    /// refuses), NVIDIA through nvdisasm / cuobjdump: auto (when found), never, always (exit 3
    /// if absent), objdump (external tools only, no native decoder).
    #[arg(long, value_enum, default_value_t = DisasmArg::Auto)]
    pub disasm: DisasmArg,
    /// ptxas / NVRTC `-v` log with spill bytes for NVIDIA kernels.
    #[arg(long, value_name = "FILE")]
    pub ptxas_log: Option<PathBuf>,
    /// Write the manifest (or the export) here; default: .katlas/isa/scan-<time>.json inside a project.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also write the manifest in another tool's shape (to --output, or beside the manifest).
    #[arg(long, value_enum)]
    pub export: Option<ExportArg>,
    /// Per-object result cache keyed by content md5 (default: .katlas/cache/isa inside a project).
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    pub cache_dir: Option<PathBuf>,
    /// Do not read or write the result cache.
    #[arg(long)]
    pub no_cache: bool,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Kernel name, demangled name, or a regex matching either.
    pub kernel: String,
    /// Manifest to read (default: the newest .katlas/isa/*.json).
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// Only objects of this architecture atom.
    #[arg(long, value_name = "ATOM")]
    pub arch: Option<String>,
    #[command(flatten)]
    pub format: FormatArg,
}

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// Baseline: a katlas.isa.v1 manifest or code objects to scan.
    pub a: PathBuf,
    /// Candidate: a katlas.isa.v1 manifest or code objects to scan.
    pub b: PathBuf,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(c: &IsaCmd, ctx: &Ctx) -> CmdResult {
    match c {
        IsaCmd::Scan(a) => scan(a, ctx),
        IsaCmd::Show(a) => show(a, ctx),
        IsaCmd::Diff(a) => diff(a, ctx),
    }
}

/// A path of the project's `.katlas/` layout, when that directory exists.
fn project_dir(ctx: &Ctx, pick: fn(&katlas_corpus::Layout) -> PathBuf) -> Option<PathBuf> {
    let l = ctx.layout().ok()?;
    l.root.is_dir().then(|| pick(&l))
}

fn scan_failure(e: ScanFailure) -> CliError {
    match e {
        ScanFailure::MissingDisassembler(_) => CliError::missing_env(e),
        ScanFailure::BadInput(_) => CliError::bad_input(e),
    }
}

/// Creates `path` (and its directory) and streams `body` into it, then a newline: manifests
/// run to hundreds of megabytes (rocSPARSE's), so they are never built as one string.
fn write_streamed(path: &Path, body: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>) -> Result<(), CliError> {
    use std::io::Write;
    let err = |e| CliError::io(path, e);
    let file = katlas_fs::create_file(path).map_err(err)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    body(&mut w).and_then(|()| w.write_all(b"\n")).and_then(|()| w.flush()).map_err(err)
}

fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<(), CliError> {
    write_streamed(path, |w| serde_json::to_writer_pretty(w, v).map_err(std::io::Error::other))
}

/// The manifest as compact JSON, objects serialised in parallel (rocSPARSE's is 274 MB
/// compact, 524 MB pretty; `jq .` pretty-prints it, `katlas isa show` reads it).
fn write_manifest(path: &Path, m: &mut katlas_isa::IsaManifest) -> Result<(), CliError> {
    write_streamed(path, |w| katlas_isa::write_compact(m, w))
}

fn scan(a: &ScanArgs, ctx: &Ctx) -> CmdResult {
    let filter = match &a.filter {
        Some(f) => Some(regex::Regex::new(f).map_err(|e| CliError::bad_input(format!("--filter: {e}")))?),
        None => None,
    };
    let cache_dir =
        if a.no_cache { None } else { a.cache_dir.as_ref().map(|d| ctx.resolve(d)).or_else(|| project_dir(ctx, katlas_corpus::Layout::isa_cache_dir)) };
    let opts = ScanOptions {
        filter,
        arch: a.arch.clone(),
        jobs: a.jobs,
        disasm: match a.disasm {
            DisasmArg::Auto => DisasmMode::Auto,
            DisasmArg::Never => DisasmMode::Never,
            DisasmArg::Always => DisasmMode::Always,
            DisasmArg::Objdump => DisasmMode::External,
        },
        ptxas_log: a.ptxas_log.as_ref().map(|p| ctx.resolve(p)),
        cache_dir,
        disassemblers: None,
    };
    let paths: Vec<PathBuf> = a.paths.iter().map(|p| ctx.resolve(p)).collect();
    let mut m = katlas_isa::scan(&paths, opts).map_err(scan_failure)?;
    // Nothing to report on is bad input (a README, /dev/zero, a sparse file), whether or
    // not a reader complained; no empty manifest is written.
    if m.objects.is_empty() {
        for e in &m.errors {
            say_err!("katlas: {}: {}: {}", crate::output::printable(&e.path), crate::output::printable(&e.chain), crate::output::printable(&e.message));
        }
        return Err(CliError::bad_input(format!(
            "no code object found in {} ({} read error(s)); give ELF code objects, offload bundles, fatbins or the libraries that hold them",
            a.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            m.errors.len()
        )));
    }
    let stamp = m.created_at.replace([':', '-'], "");
    let manifest_path = match (&a.output, a.export) {
        (Some(o), None) => Some(ctx.resolve(o)),
        (Some(_), Some(_)) => None,
        (None, _) => project_dir(ctx, katlas_corpus::Layout::isa_dir).map(|d| d.join(format!("scan-{stamp}.json"))),
    };
    if let Some(p) = &manifest_path {
        write_manifest(p, &mut m)?;
    }
    let export_path = match (a.export, &a.output, &manifest_path) {
        (Some(_), Some(o), _) => Some(ctx.resolve(o)),
        (Some(_), None, Some(mp)) => Some(mp.with_extension("hipfire.json")),
        (Some(_), None, None) => None,
        (None, _, _) => None,
    };
    if let (Some(ExportArg::HipfireV0), Some(p)) = (a.export, &export_path) {
        write_json(p, &katlas_isa::hipfire::export(&m))?;
    }
    match a.format.format {
        Format::Json => {
            if a.export.is_some() && export_path.is_none() {
                print_json(&katlas_isa::hipfire::export(&m));
            } else {
                let out = std::io::stdout();
                let mut w = std::io::BufWriter::with_capacity(1 << 20, out.lock());
                katlas_isa::write_pretty(&mut m, &mut w)
                    .and_then(|_| std::io::Write::write_all(&mut w, b"\n"))
                    .and_then(|_| std::io::Write::flush(&mut w))
                    .map_err(|e| CliError::bad_input(format!("stdout: {e}")))?;
            }
        }
        fmt => print_scan_text(&m, fmt, manifest_path.as_deref(), export_path.as_deref()),
    }
    // the process ends here: freeing every kernel's record one by one (rocSPARSE: 88k) would
    // only delay the exit
    std::mem::forget(m);
    Ok(ExitCode::SUCCESS)
}

fn spills(k: &Kernel) -> String {
    let r = &k.resources;
    match (r.vgpr_spill, r.sgpr_spill, r.spill_store_bytes) {
        (Some(v), Some(s), _) => format!("{v}/{s}"),
        (Some(v), None, _) => v.to_string(),
        (None, _, Some(b)) => format!("{b} B"),
        _ => "-".into(),
    }
}

fn occ(k: &Kernel) -> String {
    match &k.occupancy {
        Some(o) => format!("{}/{} {} ({})", o.achieved, o.max, o.unit, o.limiter.name()),
        None => "-".into(),
    }
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

/// The tail of an object's chain: one kernel name in three objects is three rows that must
/// say which object each is.
fn object_label(o: &CodeObject) -> String {
    let n = o.chain_text.chars().count();
    if n <= 48 {
        o.chain_text.clone()
    } else {
        "…".to_string() + &o.chain_text.chars().skip(n - 47).collect::<String>()
    }
}

fn matrix_ops(k: &Kernel) -> String {
    k.mix.as_ref().map(|m| m.categories.get("matrix").copied().unwrap_or(0).to_string()).unwrap_or_else(|| "-".into())
}

/// NVIDIA in NVIDIA's words (registers/thread, shared memory, warps/SM), AMD in AMD's
/// (VGPR/SGPR/AGPR, LDS, waves/SIMD): one table per vendor.
fn print_kernel_tables(m: &IsaManifest, fmt: Format) {
    let kernels = |v: Vendor| m.objects.iter().filter(move |o| o.vendor == v).flat_map(|o| o.kernels.iter().map(move |k| (o, k)));
    if kernels(Vendor::Amd).next().is_some() {
        let mut t = table(fmt, &["kernel", "object", "arch", "vgpr", "sgpr", "agpr", "spill v/s", "lds", "scratch", "wave", "matrix ops", "occupancy"]);
        for (o, k) in kernels(Vendor::Amd) {
            let r = &k.resources;
            t.add_row(vec![
                short(k.demangled.as_deref().unwrap_or(&k.name), 50),
                object_label(o),
                o.arch.clone(),
                fmt_opt(&r.vgpr),
                fmt_opt(&r.sgpr),
                fmt_opt(&r.agpr),
                spills(k),
                fmt_opt(&r.lds_bytes),
                fmt_opt(&r.scratch_bytes),
                fmt_opt(&r.wave_size),
                matrix_ops(k),
                occ(k),
            ]);
        }
        println!("{t}");
    }
    if kernels(Vendor::Nvidia).next().is_some() {
        let mut t = table(
            fmt,
            &[
                "kernel",
                "object",
                "arch",
                "registers/thread",
                "shared static B",
                "shared dynamic B",
                "shared reserved B",
                "stack B",
                "block",
                "matrix ops",
                "occupancy",
            ],
        );
        for (o, k) in kernels(Vendor::Nvidia) {
            let n = k.nvidia.clone().unwrap_or_default();
            t.add_row(vec![
                short(k.demangled.as_deref().unwrap_or(&k.name), 50),
                object_label(o),
                o.arch.clone(),
                fmt_opt(&n.regcount),
                n.shared_static_bytes.saturating_sub(n.shared_reserved_bytes).to_string(),
                k.triton.as_ref().map(|t| t.shared_dynamic_bytes.to_string()).unwrap_or_else(|| "-".into()),
                n.shared_reserved_bytes.to_string(),
                fmt_opt(&k.resources.scratch_bytes),
                block(k),
                matrix_ops(k),
                occ(k),
            ]);
        }
        println!("{t}");
    }
}

/// The launch block when known (Triton's JSON, `__launch_bounds__`/reqntid), else `-`.
fn block(k: &Kernel) -> String {
    if let Some(t) = &k.triton {
        return format!("{} (triton {} warps{})", t.block_size, t.num_warps, t.num_stages.map(|s| format!(", {s} stages")).unwrap_or_default());
    }
    match (k.resources.reqd_workgroup_size, k.resources.max_workgroup_size) {
        (Some(r), _) => format!("{}x{}x{}", r[0], r[1], r[2]),
        (None, Some(m)) => format!("≤{m}"),
        _ => "-".into(),
    }
}

/// The instruction-mix categories of SASS in NVIDIA's words (the manifest keeps one set of
/// category keys for both vendors).
fn sass_word(category: &str) -> &str {
    match category {
        "vmem_load" => "global/local load",
        "vmem_store" => "global/local store",
        "smem" => "constant load",
        "lds" => "shared memory",
        "valu" => "alu",
        "salu" => "uniform alu",
        "wait" => "barrier/wait",
        c => c,
    }
}

fn print_scan_text(m: &IsaManifest, fmt: Format, manifest: Option<&Path>, export: Option<&Path>) {
    let s = &m.summary;
    say_line!(
        "{} files, {:.1} MB, {} code objects, {} kernels, {} errors in {} ms",
        s.files,
        s.bytes as f64 / 1e6,
        s.objects,
        s.kernels,
        s.errors,
        s.elapsed_ms
    );
    let mut t = table(fmt, &["object", "arch", "kernels", "mix", "md5"]);
    for o in m.objects.iter().take(200) {
        t.add_row(vec![
            short(&o.chain_text, 90),
            o.target.clone(),
            if o.format == "ptx" { format!("{} entries (ptx)", o.ptx_entries.len()) } else { o.kernels.len().to_string() },
            fmt_opt(&o.mix_status),
            o.md5[..12.min(o.md5.len())].to_string(),
        ]);
    }
    println!("{t}");
    if m.objects.len() > 200 {
        say_line!("… {} more objects (--format json for all)", m.objects.len() - 200);
    }
    if s.kernels <= 100 {
        print_kernel_tables(m, fmt);
    }
    for e in m.errors.iter().take(20) {
        say_err!("error: {}: {}: {}", e.path, e.chain, e.message);
    }
    if m.errors.len() > 20 {
        say_err!("… {} more errors in the manifest", m.errors.len() - 20);
    }
    for t in &m.disassemblers {
        if t.status == "absent" {
            say_err!("note: {} ({}) not found: no instruction mix for {} objects", t.name, t.vendor.as_str(), t.vendor.as_str());
        }
    }
    if let Some(p) = manifest {
        say_line!("manifest: {}", p.display());
    }
    if let Some(p) = export {
        say_line!("export: {}", p.display());
    }
}

fn read_manifest(p: &Path) -> Result<IsaManifest, CliError> {
    let text = std::fs::read_to_string(p).map_err(|e| CliError::io(p, e))?;
    let m: IsaManifest = serde_json::from_str(&text)
        .map_err(|e| CliError::bad_input(format!("{}: line {}, column {}: not a katlas.isa.v1 manifest: {e}", p.display(), e.line(), e.column())))?;
    if m.schema != katlas_isa::SCHEMA {
        return Err(CliError::bad_input(format!("{}: schema `{}`, expected `{}`", p.display(), m.schema, katlas_isa::SCHEMA)));
    }
    Ok(m)
}

fn latest_manifest(ctx: &Ctx) -> Result<PathBuf, CliError> {
    let dir = project_dir(ctx, katlas_corpus::Layout::isa_dir)
        .ok_or_else(|| CliError::bad_input("no --manifest and no .katlas/isa/ in this project (run `katlas isa scan` first)"))?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| CliError::io(&dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.to_string_lossy().ends_with(".hipfire.json"))
        .collect();
    files.sort();
    files.pop().ok_or_else(|| CliError::bad_input(format!("no manifest in {} (run `katlas isa scan` first)", dir.display())))
}

fn show(a: &ShowArgs, ctx: &Ctx) -> CmdResult {
    let path = match &a.manifest {
        Some(p) => ctx.resolve(p),
        None => latest_manifest(ctx)?,
    };
    let m = read_manifest(&path)?;
    let exact = |k: &Kernel| k.name == a.kernel || k.demangled.as_deref() == Some(a.kernel.as_str());
    let re = regex::Regex::new(&a.kernel).ok();
    let arch_ok = |o: &CodeObject| a.arch.as_deref().is_none_or(|x| o.arch == x);
    let mut hits: Vec<(&CodeObject, &Kernel)> =
        m.objects.iter().filter(|o| arch_ok(o)).flat_map(|o| o.kernels.iter().filter(|k| exact(k)).map(move |k| (o, k))).collect();
    if hits.is_empty() {
        if let Some(re) = &re {
            hits = m
                .objects
                .iter()
                .filter(|o| arch_ok(o))
                .flat_map(|o| o.kernels.iter().filter(|k| re.is_match(&k.name) || k.demangled.as_deref().is_some_and(|d| re.is_match(d))).map(move |k| (o, k)))
                .collect();
        }
    }
    if hits.is_empty() {
        return Err(CliError::bad_input(format!("no kernel `{}` in {}", a.kernel, path.display())));
    }
    if a.format.format == Format::Json {
        let v: Vec<_> = hits
            .iter()
            .map(|(o, k)| serde_json::json!({"schema": "katlas.isa.kernel.v1", "object": o.chain_text, "arch": o.arch, "target": o.target, "md5": o.md5, "kernel": k}))
            .collect();
        print_json(&v);
        return Ok(ExitCode::SUCCESS);
    }
    for (o, k) in hits.iter().take(50) {
        say_line!("{}  [{}]", k.demangled.as_deref().unwrap_or(&k.name), o.target);
        say_line!("  object: {}", o.chain_text);
        say_line!("  symbol: {}", k.symbol);
        let mut t = table(a.format.format, &["resource", "value"]);
        if let Some(n) = &k.nvidia {
            nvidia_rows(&mut t, k, n);
        } else {
            let r = serde_json::to_value(&k.resources).unwrap_or_default();
            if let Some(map) = r.as_object() {
                for (key, v) in map {
                    t.add_row(vec![key.clone(), v.to_string()]);
                }
            }
        }
        if let Some(kd) = k.amd.as_ref().and_then(|x| x.descriptor.as_ref()) {
            t.add_row(vec!["kd.vgpr_alloc".into(), kd.vgpr_alloc.to_string()]);
            t.add_row(vec!["kd.sgpr_alloc".into(), fmt_opt(&kd.sgpr_alloc)]);
            t.add_row(vec!["kd.wave32".into(), kd.wave32.to_string()]);
            t.add_row(vec!["kd.enable_private_segment".into(), kd.enable_private_segment.to_string()]);
        }
        t.add_row(vec!["occupancy".into(), occ(k)]);
        println!("{t}");
        if let Some(a) = &k.amd {
            for mm in &a.descriptor_mismatches {
                say_line!("  descriptor disagrees: {mm}");
            }
        }
        if let Some(mix) = &k.mix {
            let nv = o.vendor == Vendor::Nvidia;
            let cats: Vec<String> = mix.categories.iter().map(|(c, n)| format!("{}={n}", if nv { sass_word(c) } else { c })).collect();
            say_line!("  mix ({} instructions): {}", mix.total, cats.join(" "));
        }
        if let Some(n) = &k.occupancy_note {
            say_line!("  occupancy: {n}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn nvidia_rows(t: &mut crate::output::SafeTable, k: &Kernel, n: &katlas_isa::manifest::NvKernel) {
    let r = &k.resources;
    let mut row = |key: &str, v: String| t.add_row(vec![key.to_string(), v]);
    let src = match n.regcount_source.as_deref() {
        Some(katlas_isa::manifest::REGCOUNT_FROM_SECTION) => " (from the .text section header)",
        _ => "",
    };
    row("registers/thread", format!("{}{src}", fmt_opt(&n.regcount)));
    row("shared memory static", format!("{} B", n.shared_static_bytes.saturating_sub(n.shared_reserved_bytes)));
    row(
        "shared memory dynamic",
        k.triton.as_ref().map(|t| format!("{} B (Triton launch)", t.shared_dynamic_bytes)).unwrap_or_else(|| "set at launch (unknown here)".into()),
    );
    row("shared memory reserved", format!("{} B", n.shared_reserved_bytes));
    row("stack (local memory)", format!("{} B", r.scratch_bytes.unwrap_or(0)));
    if n.local_bytes > 0 {
        row("local memory section", format!("{} B", n.local_bytes));
    }
    if let (Some(st), Some(ld)) = (r.spill_store_bytes, r.spill_load_bytes) {
        row("spill stores/loads", format!("{st} B / {ld} B"));
    }
    row("warp size", "32".into());
    row("block", block(k));
    if let Some(m) = r.max_workgroup_size {
        row("max threads/block", m.to_string());
    }
    if let Some(b) = r.barriers {
        row("barriers", b.to_string());
    }
    row("parameter bytes", fmt_opt(&r.kernarg_bytes));
    row("constant bank 0", format!("{} B", n.constant0_bytes));
    if let Some(tr) = &k.triton {
        row("triton kernel", format!("{}{}", tr.name, tr.source.as_deref().map(|s| format!(" at {s}")).unwrap_or_default()));
        row(
            "triton config",
            format!(
                "num_warps {} num_stages {} num_ctas {} target {} (Triton {})",
                tr.num_warps,
                fmt_opt(&tr.num_stages),
                fmt_opt(&tr.num_ctas),
                tr.arch.as_deref().unwrap_or("-"),
                tr.triton_version.as_deref().unwrap_or("-")
            ),
        );
    }
}

fn load_or_scan(p: &Path) -> Result<IsaManifest, CliError> {
    let is_manifest = std::fs::read(p).ok().is_some_and(|b| b.trim_ascii_start().starts_with(b"{"));
    if is_manifest {
        return read_manifest(p);
    }
    let opts = ScanOptions { disasm: DisasmMode::Auto, ..Default::default() };
    let m = katlas_isa::scan(&[p.to_path_buf()], opts).map_err(scan_failure)?;
    if m.objects.is_empty() {
        return Err(CliError::bad_input(format!("{}: neither a manifest nor a file with code objects", p.display())));
    }
    Ok(m)
}

fn diff(a: &DiffArgs, ctx: &Ctx) -> CmdResult {
    let (pa, pb) = (ctx.resolve(&a.a), ctx.resolve(&a.b));
    let d = katlas_isa::diff::diff(&load_or_scan(&pa)?, &load_or_scan(&pb)?, &pa.display().to_string(), &pb.display().to_string());
    if a.format.format == Format::Json {
        print_json(&d);
    } else {
        let mut t = table(a.format.format, &["kernel", "arch", "resource deltas", "mix deltas", "flags"]);
        for k in &d.kernels {
            let fmt = |v: &Vec<katlas_isa::diff::Delta>| {
                v.iter().map(|x| format!("{} {}→{} ({:+})", x.field, fmt_opt(&x.a), fmt_opt(&x.b), x.delta)).collect::<Vec<_>>().join(", ")
            };
            t.add_row(vec![short(&k.name, 50), k.arch.clone(), fmt(&k.resources), fmt(&k.mix), k.flags.join(", ")]);
        }
        println!("{t}");
        say_line!("{} kernels changed, {} flagged, {} only in A, {} only in B", d.kernels.len(), d.regressions, d.removed.len(), d.added.len());
    }
    Ok(if d.regressions > 0 { ExitCode::from(crate::ctx::exit::NEGATIVE) } else { ExitCode::SUCCESS })
}
