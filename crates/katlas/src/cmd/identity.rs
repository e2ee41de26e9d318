use crate::ctx::{CmdResult, Ctx};
use crate::output::{fmt_opt, print_json, Format, FormatArg};
use katlas_identity::{capture, CaptureOptions};
use katlas_model::Identity;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct IdentityArgs {
    /// Binary to digest (md5, cached by path/size/mtime/inode).
    #[arg(long)]
    pub binary: Option<PathBuf>,
    /// Model file; its md5 is computed only with --hash-model (or identity.hash_model).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Compute the --model file's md5 (reads the whole file; models are many GB).
    #[arg(long)]
    pub hash_model: bool,
    /// Prompt file to digest.
    #[arg(long)]
    pub prompt: Option<PathBuf>,
    #[command(flatten)]
    pub format: FormatArg,
}

/// What the project's `[identity]` records of the environment: its prefixes (the defaults
/// when unset) and its `env_names`, each that exact name. For every capture (identity, eval).
pub fn recorded_env(cfg: &katlas_project::IdentitySection) -> Vec<String> {
    katlas_identity::env_selectors(cfg.env_prefixes.as_deref(), &cfg.env_names)
}

/// Capture options from the project's [identity] section plus explicit inputs.
pub fn options_for(ctx: &Ctx) -> Result<CaptureOptions, crate::ctx::CliError> {
    let project = ctx.project()?;
    let cfg = &project.config.identity;
    Ok(CaptureOptions {
        project_root: Some(project.root.clone()),
        hash_model: cfg.hash_model,
        env_prefixes: recorded_env(cfg),
        cache_dir: Some(katlas_corpus::Layout::for_project(&project.root).cache_dir()),
        ..Default::default()
    })
}

pub fn run(args: &IdentityArgs, ctx: &Ctx) -> CmdResult {
    let mut opts = options_for(ctx)?;
    opts.binary = args.binary.as_deref().map(|p| ctx.resolve(p));
    opts.model = args.model.as_deref().map(|p| ctx.resolve(p));
    opts.prompt = args.prompt.as_deref().map(|p| ctx.resolve(p));
    opts.hash_model |= args.hash_model;
    let id = capture(&opts);
    match args.format.format {
        Format::Json => print_json(&id),
        Format::Text | Format::Markdown => print_text(&id, args.format.format == Format::Markdown),
    }
    Ok(ExitCode::SUCCESS)
}

fn print_text(id: &Identity, md: bool) {
    let mut lines: Vec<(String, String)> = Vec::new();
    let s = &id.source;
    lines.push(("source.root".into(), fmt_opt(&s.root)));
    lines.push(("source.commit".into(), fmt_opt(&s.commit)));
    lines.push(("source.branch".into(), fmt_opt(&s.branch)));
    lines.push(("source.dirty".into(), fmt_opt(&s.dirty)));
    lines.push(("source.diff_md5".into(), fmt_opt(&s.diff_md5)));
    for (label, d) in [("binary", &id.binary), ("model", &id.model), ("prompt", &id.prompt)] {
        if let Some(d) = d {
            let md5 = d.md5.clone().or_else(|| d.note.clone()).unwrap_or_else(|| "-".into());
            lines.push((label.into(), format!("{} {}", fmt_opt(&d.path), md5)));
        }
    }
    let h = &id.host;
    lines.push(("host".into(), fmt_opt(&h.hostname)));
    lines.push(("host.os".into(), fmt_opt(&h.os)));
    lines.push(("host.kernel".into(), fmt_opt(&h.kernel)));
    lines.push(("host.cpu".into(), format!("{} x{}", fmt_opt(&h.cpu), fmt_opt(&h.cpu_count))));
    if id.devices.is_empty() {
        lines.push(("gpu".into(), "none found (nvidia-smi, rocminfo, amdgpu-arch, KFD topology)".into()));
    }
    for d in &id.devices {
        lines.push((
            format!("gpu{}", d.index),
            format!("{} {} arch={} ({}) driver={}", d.vendor, fmt_opt(&d.product), fmt_opt(&d.arch), fmt_opt(&d.arch_source), fmt_opt(&d.driver)),
        ));
    }
    for (k, v) in &id.toolkits {
        lines.push((format!("toolkit.{k}"), v.clone().unwrap_or_else(|| "absent".into())));
    }
    for (k, v) in &id.env {
        lines.push((format!("env.{k}"), v.clone()));
    }
    if md {
        println!("| field | value |\n|---|---|");
        for (k, v) in lines {
            println!("| {k} | {} |", v.replace('|', "\\|"));
        }
    } else {
        let w = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in lines {
            println!("{k:<w$}  {v}");
        }
    }
}
