//! `katlas reach`: which file each atom compiles, and what is compiled but never reached.

use crate::cmd::build::settings;
use crate::ctx::{CmdResult, Ctx};
use crate::output::{print_json, table, Format, FormatArg};
use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ReachArgs {
    /// Atoms to analyse instead of the matrix (comma separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub arch: Option<Vec<String>>,
    #[command(flatten)]
    pub format: FormatArg,
}

pub fn run(a: &ReachArgs, ctx: &Ctx) -> CmdResult {
    let s = settings(ctx, a.arch.as_deref())?;
    let r = katlas_build::reach(&s)?;
    let code = if r.has_problems() { ExitCode::from(1) } else { ExitCode::SUCCESS };
    if a.format.format == Format::Json {
        print_json(&r);
        return Ok(code);
    }
    // kernel x atom table of resolved files.
    let mut grid: BTreeMap<&str, BTreeMap<&str, Vec<String>>> = BTreeMap::new();
    for x in &r.resolutions {
        let name = x.file.rsplit('/').next().unwrap_or(&x.file).to_string();
        grid.entry(x.kernel.as_str()).or_default().entry(x.atom.as_str()).or_default().push(name);
    }
    let mut header = vec!["kernel"];
    header.extend(r.matrix.iter().map(String::as_str));
    let mut t = table(a.format.format, &header);
    for (k, by_atom) in &grid {
        let mut row = vec![k.to_string()];
        for atom in &r.matrix {
            row.push(by_atom.get(atom.as_str()).map(|v| v.join(" + ")).unwrap_or_else(|| "-".into()));
        }
        t.add_row(row);
    }
    println!("{t}");
    if !r.unreached.is_empty() {
        println!("\nunreached sources (no matrix atom compiles them, or the runtime never loads them):");
        for u in &r.unreached {
            println!("  {}: {}", u.file, u.reason);
        }
    }
    if !r.undispatched.is_empty() {
        if r.load_patterns.is_empty() {
            println!("\ncompiled but never dispatched (no reference in {}):", r.dispatch_roots.join(", "));
        } else {
            println!("\ncompiled but never dispatched (no load in {}: {}):", r.dispatch_roots.join(", "), r.load_patterns.join(", "));
        }
        let how = if r.load_patterns.is_empty() { "appears in host code" } else { "is loaded" };
        for u in &r.undispatched {
            println!("  {} (for {}): none of {} {how}", u.file, u.atoms.join(" "), u.names.join(", "));
        }
    }
    if !r.divergent_families.is_empty() {
        println!("\nfamilies whose members compile different files:");
        for d in &r.divergent_families {
            let files: BTreeSet<String> = d.files.iter().map(|(a, f)| format!("{a}={f}")).collect();
            println!("  {} {}: {}", d.family, d.kernel, files.into_iter().collect::<Vec<_>>().join(", "));
        }
    }
    if !r.family_hazards.is_empty() {
        println!("\nfamily-rule hazards (the runtime's family rule is {}; the arch table disagrees):", r.family_rule);
        for h in &r.family_hazards {
            let compiled = match (h.in_matrix, h.compiled.as_str()) {
                (false, _) => "not in the matrix: katlas build compiles nothing".to_string(),
                (true, "-") => "katlas build compiles nothing".to_string(),
                (true, c) => format!("katlas build compiles {c}"),
            };
            println!("  {} {}: the runtime takes {} ({compiled}): {}", h.atom, h.kernel, h.runtime_file, h.reason);
        }
    }
    if !r.selector_hazards.is_empty() {
        println!("\nrun-time selector hazards (a selector loads a file the build does not compile for the atom):");
        for h in &r.selector_hazards {
            println!("  {} {}: {}", h.atom, h.kernel, h.reason);
        }
    }
    if !r.prefix_traps.is_empty() && r.family_rule == "table" {
        println!("\nfamily tags a name-prefix rule would misroute (the arch table keeps these atoms out):");
        for p in &r.prefix_traps {
            println!("  {} (tag {}): not compiled for {}", p.file, p.tag, p.atoms.join(" "));
        }
    }
    for n in &r.notes {
        eprintln!("katlas: note: {n}");
    }
    let s = &r.summary;
    println!(
        "\n{} atom(s), {} source(s), {} compile(s); {} unreached, {} undispatched, {} divergent, {} family-rule hazard(s), {} selector hazard(s)",
        s.atoms, s.sources, s.resolutions, s.unreached, s.undispatched, s.divergent, s.hazards, s.selector_hazards
    );
    Ok(code)
}
