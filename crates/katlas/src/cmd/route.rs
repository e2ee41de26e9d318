//! `katlas route CLAIM`: the correctness route of a claim class; unknown is blocked.

use crate::ctx::{exit, CmdResult, Ctx};
use crate::output::{print_json, Format, FormatArg};
use katlas_eval::routes::{all_pass, run_route, RouteSpec};
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct RouteArgs {
    /// Claim class (`[route.CLAIM]` in katlas.toml).
    pub claim: String,
    /// Run the route's commands and report PASS/FAIL/SKIP/BLOCKED.
    #[arg(long)]
    pub run: bool,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(a: &RouteArgs, ctx: &Ctx) -> CmdResult {
    let project = ctx.project()?;
    let spec: Option<RouteSpec> = project.section(&["route", &a.claim])?;
    let known: Vec<String> = project.section_names("route");
    if !a.run {
        match (&spec, a.format.format) {
            (Some(s), Format::Json) => print_json(&serde_json::json!({"claim": a.claim, "status": "known", "route": s})),
            (None, Format::Json) => print_json(&serde_json::json!({"claim": a.claim, "status": "blocked", "known_claims": known})),
            (Some(s), _) => {
                println!("route {}:{}", a.claim, s.description.as_ref().map(|d| format!(" {d}")).unwrap_or_default());
                for c in &s.commands {
                    println!("  $ {c}");
                }
                if s.commands.is_empty() {
                    println!("  (no commands: blocked)");
                }
            }
            (None, _) => {
                println!("route {}: BLOCKED (unknown claim class; known: {})", a.claim, if known.is_empty() { "none".into() } else { known.join(", ") });
            }
        }
        let ok = spec.as_ref().is_some_and(|s| !s.commands.is_empty());
        return Ok(ExitCode::from(if ok { exit::OK } else { exit::NEGATIVE }));
    }
    let cmds = spec.iter().flat_map(|s| s.commands.iter()).enumerate().map(|(i, c)| (format!("[route.{}] commands[{i}]", a.claim), c.clone())).collect();
    crate::trust::authorize(ctx, &[project.config_commands(cmds)])?;
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let checks = run_route(&a.claim, spec.as_ref(), &project.root, &env);
    if a.format.format == Format::Json {
        print_json(&checks);
    } else {
        for c in &checks {
            println!("{:<8} {} {}", c.outcome.as_str(), c.check, c.detail.as_deref().unwrap_or(""));
        }
    }
    Ok(ExitCode::from(if all_pass(&checks) { exit::OK } else { exit::NEGATIVE }))
}
