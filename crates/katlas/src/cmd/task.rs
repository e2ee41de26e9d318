//! `katlas task`: a task packet (`task.json` + `TASK.md`) for one experiment.

use super::evidence::{load, EvidenceArgs};
use super::suggest::{build, last_path, source_options};
use super::task_package;
use crate::ctx::{CliError, CmdResult, Ctx};
use crate::output::{print_json, say_err, Format};
use katlas_advise::queue::{provenance, LastQueue};
use katlas_advise::task::{from_op, from_row, from_suggestion, task_markdown, with_package, write_task, TaskExtras};
use katlas_model::ledger::Goal;
use katlas_model::task::{CorrectnessRoute, OpSpec, Task};
use serde::Deserialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct TaskArgs {
    #[command(flatten)]
    pub evidence: EvidenceArgs,
    /// Suggestion rank to hand out (from the last `katlas suggest`, or the ROW's queue).
    #[arg(long, value_name = "N", conflicts_with_all = ["id", "from_op"])]
    pub rank: Option<usize>,
    /// Suggestion id (`sug-…`) to hand out.
    #[arg(long, value_name = "SUG", conflicts_with = "from_op")]
    pub id: Option<String>,
    /// Target this kernel of the ROW (default: the hottest one worth tuning).
    #[arg(long, value_name = "NAME")]
    pub kernel: Option<String>,
    /// Ledger the queue remembers (default: .katlas/ledger.jsonl).
    #[arg(long, value_name = "PATH")]
    pub ledger: Option<PathBuf>,

    /// A task for a PyTorch-style op instead of a row (needs --name, --op, --shape, --eval-command).
    #[arg(long)]
    pub from_op: bool,
    /// Op task: a name for the task.
    #[arg(long, requires = "from_op")]
    pub name: Option<String>,
    /// Op task: the op (`aten::mm`, `torch.nn.functional.linear`).
    #[arg(long, requires = "from_op")]
    pub op: Option<String>,
    /// Op task: one input shape, kept whole (`1,2048,4096`); repeat per input.
    #[arg(long = "shape", value_name = "DIMS", requires = "from_op")]
    pub shapes: Vec<String>,
    /// Op task: data type (`bf16`).
    #[arg(long, requires = "from_op")]
    pub dtype: Option<String>,
    /// Op task: the command that measures the op (run through `sh -c`).
    #[arg(long, value_name = "CMD", requires = "from_op")]
    pub eval_command: Option<String>,

    /// Correctness command (run through `sh -c`, exit 0 = PASS); repeatable.
    #[arg(long, value_name = "CMD")]
    pub correctness: Vec<String>,
    /// Build command run before benchmarking (through `sh -c`).
    #[arg(long, value_name = "CMD")]
    pub build: Option<String>,
    /// Add a file the candidate may change; repeatable.
    #[arg(long, value_name = "PATH")]
    pub allow: Vec<String>,
    /// Benchmark command replacing the row's (through `sh -c`).
    #[arg(long, value_name = "CMD")]
    pub bench: Option<String>,
    /// Metric to judge (default: the row's tok/s or time metric).
    #[arg(long)]
    pub metric: Option<String>,
    /// Whether larger or smaller --metric is better (default: the metric's own direction; minimize with --from-op).
    #[arg(long, value_parser = ["maximize", "minimize"])]
    pub goal: Option<String>,
    /// Output parser eval reads the metric with (`kv`, `hipfire-bench` …).
    #[arg(long)]
    pub parser: Option<String>,
    /// A third-party Python package (top-level import name) the task tunes through a copy
    /// inside the project (`[task] vendor`, default third_party/python/NAME); the task's kernel
    /// is a `@triton.jit` function in it.
    #[arg(long, value_name = "NAME")]
    pub package: Option<String>,
    /// Use this existing checkout inside the project (the directory holding the package) instead of a copy.
    #[arg(long, value_name = "DIR", requires = "package")]
    pub editable: Option<PathBuf>,
    /// The library's own tests (a file or directory) as a correctness route run with pytest
    /// against each side's copy; repeatable.
    #[arg(long = "tests", value_name = "PATH", requires = "package")]
    pub tests: Vec<String>,
    /// Extra pytest arguments for --tests (`-k rms`).
    #[arg(long, value_name = "ARGS", requires = "tests", allow_hyphen_values = true)]
    pub tests_args: Option<String>,
    /// Format of what is printed (the packet's files are written either way).
    #[arg(long, value_enum, default_value_t = Format::Markdown)]
    pub format: Format,
}

/// `[task]` in katlas.toml.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSection {
    #[serde(default)]
    build: Option<String>,
    #[serde(default)]
    correctness: Vec<String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    parser: Option<String>,
    /// Where `--package` copies go, project-relative.
    #[serde(default)]
    vendor: Option<String>,
}

fn sh(cmd: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), cmd.into()]
}

fn extras(args: &TaskArgs, ctx: &Ctx) -> Result<TaskExtras, CliError> {
    let section: TaskSection = match ctx.project() {
        Ok(p) => p.section(&["task"])?.unwrap_or_default(),
        Err(_) => TaskSection::default(),
    };
    let git_ref = ctx.project().ok().and_then(|p| katlas_identity::source_identity(&p.root).commit);
    let mut correctness: Vec<CorrectnessRoute> =
        section.correctness.iter().map(|c| CorrectnessRoute { claim: "katlas.toml [task]".into(), command: c.clone() }).collect();
    correctness.extend(args.correctness.iter().map(|c| CorrectnessRoute { claim: "task".into(), command: c.clone() }));
    let mut allow = section.allow.clone();
    allow.extend(args.allow.iter().cloned());
    Ok(TaskExtras {
        // A shell line kept as one element: eval runs `build.join(" ")` through `sh -c`.
        build: args.build.as_deref().or(section.build.as_deref()).map(|b| vec![b.to_string()]),
        correctness,
        allow,
        bench: args.bench.as_deref().map(sh),
        metric: args.metric.clone(),
        goal: args.goal.as_deref().map(|g| if g == "minimize" { Goal::Minimize } else { Goal::Maximize }),
        parser: args.parser.clone().or(section.parser),
        git_ref,
    })
}

fn read_last(ctx: &Ctx) -> Result<LastQueue, CliError> {
    let p = last_path(ctx)?;
    let text = std::fs::read_to_string(&p)
        .map_err(|_| CliError::bad_input(format!("no suggestion queue at {}: run `katlas suggest ROW` first or give the ROW", p.display())))?;
    LastQueue::from_json(&text).map_err(|e| CliError::bad_input(format!("{}: {e}", p.display())))
}

fn with_package_copy(args: &TaskArgs, ctx: &Ctx, name: &str, task: Task, extra: &TaskExtras) -> Result<Task, CliError> {
    let project = ctx.project()?;
    let section: TaskSection = project.section(&["task"])?.unwrap_or_default();
    let kernel = task.kernel.clone().ok_or_else(|| CliError::bad_input("--package needs the task's kernel (the @triton.jit function): give --kernel NAME"))?;
    let python = super::provenance::python(ctx)?;
    let vendor = section.vendor.as_deref().unwrap_or("third_party/python");
    let req = task_package::Request { root: &project.root, name, editable: args.editable.as_deref(), vendor, python: &python, kernel: &kernel };
    let prepared = task_package::prepare(&req)?;
    let mut tests = Vec::new();
    for t in &args.tests {
        let p = std::path::Path::new(t);
        if !(if p.is_absolute() { p.to_path_buf() } else { project.root.join(p) }).exists() {
            return Err(CliError::bad_input(format!("--tests {t}: no such file or directory (absolute, or relative to the project root)")));
        }
        let argv: Vec<String> = [python.as_str(), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", t].iter().map(|s| s.to_string()).collect();
        let mut command = katlas_advise::task::shell_line(&argv);
        if let Some(a) = &args.tests_args {
            command = format!("{command} {a}");
        }
        tests.push(CorrectnessRoute { claim: "library-tests".into(), command });
    }
    Ok(with_package(task, prepared.package, &prepared.pythonpath, tests, extra))
}

pub fn run(args: &TaskArgs, ctx: &Ctx) -> CmdResult {
    let extra = extras(args, ctx)?;
    let tasks_dir = ctx.layout()?.tasks_dir();
    let task = if args.from_op {
        let need = |v: &Option<String>, f: &str| v.clone().ok_or_else(|| CliError::bad_input(format!("--from-op needs {f}")));
        if args.shapes.is_empty() {
            return Err(CliError::bad_input("--from-op needs at least one --shape (e.g. --shape 1,2048,4096)"));
        }
        for s in &args.shapes {
            if s.split(',').any(|d| d.trim().parse::<u64>().is_err()) {
                return Err(CliError::bad_input(format!("--shape `{s}`: expected comma-separated dimensions like 1,2048,4096")));
            }
        }
        let op = OpSpec { name: need(&args.name, "--name")?, op: need(&args.op, "--op")?, shapes: args.shapes.clone(), dtype: args.dtype.clone() };
        let cmd = need(&args.eval_command, "--eval-command")?;
        let metric = args.metric.clone().unwrap_or_else(|| "time_us".into());
        let mut t = from_op(op, sh(&cmd), metric, &extra);
        t.kernel = args.kernel.clone();
        t
    } else if args.rank.is_some() || args.id.is_some() {
        let last =
            if args.evidence.row.is_some() || args.evidence.isa.is_some() { build(&args.evidence, args.ledger.as_ref(), None, ctx)? } else { read_last(ctx)? };
        let s = last.pick(args.rank, args.id.as_deref()).map_err(CliError::bad_input)?;
        let rules = katlas_advise::Rules::load(ctx.layout().ok().map(|l| l.rules_dir()).as_deref())?;
        from_suggestion(&last.fit, last.row.as_ref(), s, &rules, last.provenance_of(s), &extra)
    } else {
        let l = load(&args.evidence, ctx)?;
        let row = l.row.as_ref().ok_or_else(|| CliError::bad_input("give a ROW, --rank/--id, or --from-op"))?;
        let prov = provenance(&l.fit, Some(row), &l.db, source_options(ctx)?.as_ref());
        from_row(&l.fit, row, args.kernel.as_deref(), &l.rules, &prov, &extra)?
    };
    let task = match &args.package {
        Some(name) => with_package_copy(args, ctx, name, task, &extra)?,
        None => task,
    };
    let dir = write_task(&tasks_dir, &task)?;
    say_err!("katlas: wrote {}/task.json and TASK.md", dir.display());
    match args.format {
        Format::Json => print_json(&task),
        _ => print!("{}", task_markdown(&task)),
    }
    crate::trust::trust_written(ctx, &dir.join("task.json"));
    Ok(ExitCode::SUCCESS)
}
