//! `katlas-lab`: run the decode kernel lab on CUDA or the CPU, or compile its kernels.

use clap::{Parser, Subcommand, ValueEnum};
use katlas_lab::kernels::{Family, Shape, CPU_VARIANTS, VARIANTS};
use katlas_lab::report::{metric_line, row, table};
use katlas_lab::{cpu, cuda, Exit, RunOpts};
use std::io::Write;
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "katlas-lab", version, about = "The katlas decode kernel lab: check and time our own decode kernels", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile the CUDA kernels with NVRTC to cubins + ptxas logs (no GPU needed).
    Compile {
        #[arg(long, default_value = "sm_90")]
        arch: String,
        #[arg(long, default_value = ".katlas/lab")]
        out_dir: PathBuf,
    },
    /// List kernel families and variants.
    List,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum Backend {
    Cpu,
    Cuda,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum Format {
    /// A table, then one KATLAS_METRIC line per case.
    Table,
    /// katlas.row.v1 JSON lines only.
    Json,
    /// KATLAS_METRIC lines and katlas.row.v1 JSON lines (what `katlas collect` reads).
    Collect,
}

#[derive(clap::Args)]
struct RunArgs {
    #[arg(long, value_enum, default_value = "cuda")]
    backend: Backend,
    /// Kernel family regex (e.g. `gemv_hfq4g256$`).
    #[arg(long)]
    kernel: Option<String>,
    /// Variant regex, matched against the whole name (e.g. `r4_h2` or `r1|r4`).
    #[arg(long)]
    variant: Option<String>,
    /// Shapes AxB, comma separated (meaning per family: see `list`).
    #[arg(long, value_delimiter = ',')]
    shapes: Option<Vec<String>>,
    /// Timed samples per case (CUDA default 100, CPU default 5).
    #[arg(long)]
    samples: Option<u32>,
    #[arg(long)]
    warmup: Option<u32>,
    /// Launches per timed sample, on consecutive rotating sets (the sample is their mean).
    #[arg(long, default_value_t = 1)]
    batch: u32,
    /// Flush the L2 (memset of twice its size) before every sample instead of rotating inputs.
    #[arg(long)]
    l2_flush: bool,
    /// Also measure a read-only kernel at each 4-bit GEMV shape's byte count (the ceiling any
    /// kernel reading those bytes once reaches under the same protocol).
    #[arg(long)]
    read_ceilings: bool,
    /// MB the rotating input sets span (default 4 x L2).
    #[arg(long)]
    rotate_mb: Option<usize>,
    #[arg(long, default_value_t = 20261130)]
    seed: u64,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Also write the rows as JSON lines to this file.
    #[arg(long)]
    rows_out: Option<PathBuf>,
    /// Where cubins and ptxas logs go.
    #[arg(long, default_value = ".katlas/lab")]
    out_dir: PathBuf,
}

fn main() {
    let code = match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("katlas-lab: error: {}", e.msg);
            e.code
        }
    };
    std::process::exit(code);
}

fn real_main() -> Result<i32, Exit> {
    let cli = Cli::try_parse().unwrap_or_else(|e| {
        let _ = e.print();
        std::process::exit(if e.use_stderr() { 2 } else { 0 });
    });
    match cli.cmd {
        Some(Cmd::List) => {
            for f in Family::ALL {
                println!("{}  [{}]", f.name(), f.shape_doc());
                for v in VARIANTS.iter().filter(|v| v.family == f) {
                    println!("  {:<12} {:<28} {}", v.name, v.func, v.levers);
                }
                for v in CPU_VARIANTS.iter().filter(|v| v.serves(f)) {
                    println!("  {:<12} (cpu backend) {}", v.name, v.doc);
                }
            }
            Ok(0)
        }
        Some(Cmd::Compile { arch, out_dir }) => {
            cuda::probe::nvrtc()?;
            let c = cuda::run::compile_all(&arch, &out_dir, None)?;
            for c in &c {
                for r in &c.resources {
                    println!(
                        "{} {} registers={} smem={} stack={} spill_stores={} spill_loads={}",
                        c.file,
                        r.func,
                        r.registers.unwrap_or(0),
                        r.smem_bytes.unwrap_or(0),
                        r.stack_bytes.unwrap_or(0),
                        r.spill_stores.unwrap_or(0),
                        r.spill_loads.unwrap_or(0)
                    );
                }
            }
            println!("wrote {} cubins for {arch} to {}", c.len(), out_dir.display());
            Ok(0)
        }
        None => run(cli.run),
    }
}

fn regex(s: &Option<String>, whole: bool, what: &str) -> Result<Option<regex::Regex>, Exit> {
    s.as_ref()
        .map(|p| {
            let p = if whole { format!("^(?:{p})$") } else { p.clone() };
            regex::Regex::new(&p).map_err(|e| Exit::input(format!("--{what}: bad regex: {e}")))
        })
        .transpose()
}

fn run(a: RunArgs) -> Result<i32, Exit> {
    let gpu = a.backend == Backend::Cuda;
    let shapes = a
        .shapes
        .as_ref()
        .map(|v| v.iter().map(|s| s.parse::<Shape>().map_err(|e| Exit::input(format!("--shapes: {e}")))).collect::<Result<Vec<_>, _>>())
        .transpose()?;
    let opts = RunOpts {
        kernel: regex(&a.kernel, false, "kernel")?,
        variant: regex(&a.variant, true, "variant")?,
        shapes,
        samples: a.samples.unwrap_or(if gpu { 100 } else { 5 }).max(1),
        warmup: a.warmup.unwrap_or(if gpu { 10 } else { 1 }),
        batch: a.batch.max(1),
        l2_flush: a.l2_flush,
        read_ceilings: a.read_ceilings,
        rotate_bytes: a.rotate_mb.map(|m| m << 20),
        seed: a.seed,
        out_dir: a.out_dir.clone(),
        command: std::env::args().collect(),
    };
    let (env, results) = if gpu { cuda::run::run(&opts)? } else { cpu::run(&opts)? };
    let rows: Vec<_> = results.iter().enumerate().map(|(i, r)| row(&env, r, i as u32 + 1)).collect();
    let mut out = std::io::stdout().lock();
    let mut w = |s: String| writeln!(out, "{s}").map_err(|e| Exit::fail(format!("stdout: {e}")));
    match a.format {
        Format::Table => {
            w(table(&env, &results))?;
            for r in &results {
                w(metric_line(&env, r))?;
            }
        }
        Format::Json => {
            for r in &rows {
                w(serde_json::to_string(r).unwrap())?;
            }
        }
        Format::Collect => {
            for (r, row) in results.iter().zip(&rows) {
                w(metric_line(&env, r))?;
                w(serde_json::to_string(row).unwrap())?;
            }
        }
    }
    if let Some(p) = &a.rows_out {
        let mut s = String::new();
        for r in &rows {
            s += &serde_json::to_string(r).unwrap();
            s.push('\n');
        }
        std::fs::write(p, s).map_err(|e| Exit::input(format!("--rows-out {}: {e}", p.display())))?;
    }
    let failed = results.iter().filter(|r| !r.check.pass).count();
    if failed > 0 {
        eprintln!("katlas-lab: {failed} of {} cases failed their check", results.len());
        return Ok(1);
    }
    Ok(0)
}
