//! `katlas ab`: several git refs measured against the first, fixed N, no early stop.

use super::*;

#[derive(Debug, clap::Args)]
pub struct AbArgs {
    /// Git refs; the first is the reference.
    #[arg(required = true, num_args = 2..)]
    pub refs: Vec<String>,
    #[command(flatten)]
    pub protocol: ProtocolArgs,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run_ab(a: &AbArgs, ctx: &Ctx) -> CmdResult {
    let project = ctx.project()?;
    let root = project.root.clone();
    let layout = ctx.layout()?;
    let p = &a.protocol;
    let metric = p.metric.clone().ok_or_else(|| CliError::bad_input("--metric is required"))?;
    let cmd = p.command.clone().ok_or_else(|| CliError::bad_input("--command is required (run in each ref's worktree)"))?;
    let g = goal(p.goal, &metric);
    let ecfg = eval_config(ctx)?;
    // The settle command from katlas.toml runs between every sample: shown, and run only trusted.
    if let (None, Some(settle)) = (&p.settle, &ecfg.settle) {
        crate::trust::authorize(ctx, &[project.config_commands(vec![("[eval] settle".into(), settle.clone())])])?;
    }
    let wt_dir = layout.root.join("worktrees");
    prune_worktrees(&root, &wt_dir, ecfg.keep_worktrees);
    let planner = plan::Sides { root: &root, cwd: &ctx.cwd, worktrees: &wt_dir, binary: p.binary.clone() };
    let sides = planner.refs(&a.refs, &cmd, p.build.as_deref())?;
    let parser = p.parser.clone().or(ecfg.parser.clone()).unwrap_or_else(|| "kv".into());
    let band = band(p, &ecfg, None)?;
    let mut st = settings(p, &ecfg, metric.clone(), g, parser, band.value, p.strip_env.clone())?;
    let st_min_effect = st.judge.min_effect.unwrap_or(0.05);
    if p.runs.is_none() {
        // A commit probe compares several refs at once: fixed N (default 10), no early stop.
        st.plan = Plan::fixed(10);
    }
    plan::check_programs(&sides)?;
    let d = plan::fingerprint_dir(&layout.root.join("evals"), &plan::ab_fingerprint(&a.refs, &cmd, &metric), p.fresh);
    if let Some(n) = &d.passed_over {
        eprintln!("katlas: {n}");
    }
    let (dir, id) = (d.path, d.id);
    let spec = EvalSpec {
        eval_id: id,
        dir,
        sides,
        settings: st,
        knobs: BTreeSet::new(),
        cross_host: p.cross_host,
        reference_identity: None,
        allowed_files: None,
        sol: None,
        correctness: Vec::new(),
        meta: Meta::default(),
        ledger_path: (!p.no_ledger).then(|| layout.ledger()),
        protected_ledger: p.no_ledger.then(|| layout.ledger()),
        project_root: root,
        threshold_source: Some(band.source),
        triton: None,
        aa_max_band: None,
    };
    let report = run_with_progress(&spec, ctx, &metric, g)?;
    if a.format.format == Format::Json {
        print_json(&report.result);
    } else {
        print_report(&report, a.format.format, ctx.color, st_min_effect);
        for (i, e) in report.ledger.iter().enumerate() {
            println!("{} vs {}: {}", report.result.sides[i + 1].label, report.result.sides[0].label, e.verdict);
        }
    }
    // A probe is positive when every comparison reached a verdict (a regression found is
    // a result); unstable, inconclusive, invalid and the like mean "we could not tell".
    let decided = report.ledger.iter().all(|e| matches!(e.verdict, Verdict::Improved | Verdict::Regressed | Verdict::NoChange));
    Ok(ExitCode::from(if decided && !report.ledger.is_empty() { exit::OK } else { exit::NEGATIVE }))
}
