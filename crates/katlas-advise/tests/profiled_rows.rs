//! Commands katlas derives for measurement never time the profiled program (issue 14,
//! item 4): a task or eval contract made from a `collect --profile` row runs the plain
//! command, without the profiler's arguments, wrapper or env, and says so.

mod common;

use katlas_advise::suggest::eval_contract;
use katlas_advise::task::task_markdown;
use katlas_advise::Rules;

#[test]
fn a_task_from_a_profiled_row_runs_the_plain_command() {
    let rules = Rules::builtin().unwrap();
    let mut row = common::decode_row();
    row.command = ["python3", "gpt_decode.py", "--prompt", "128", "--new", "32", "--trace", ".katlas/runs/r1/trace.json"].map(String::from).to_vec();
    row.variant.plain_command = ["python3", "gpt_decode.py", "--prompt", "128", "--new", "32"].map(String::from).to_vec();
    row.variant.env.insert("KATLAS_TORCH_TRACE".into(), "1".into());
    row.variant.instrumentation = vec!["KATLAS_TORCH_TRACE".into()];
    let c = eval_contract(Some(&row), &rules);
    assert_eq!(c.command, row.variant.plain_command);
    assert_eq!(c.stripped_args, vec!["--trace", ".katlas/runs/r1/trace.json"]);
    assert!(c.stripped_env.contains(&"KATLAS_TORCH_TRACE".to_string()) && !c.env.contains_key("KATLAS_TORCH_TRACE"));
    assert!(c.fresh_baseline_required);
    assert!(c.fresh_baseline_why.iter().any(|w| w.contains("under its profiler")), "{:?}", c.fresh_baseline_why);

    let extras = katlas_advise::task::TaskExtras::default();
    let fit = katlas_advise::build_fit(&katlas_advise::FitInput {
        row: Some(&row),
        isa: None,
        product: None,
        arch: None,
        db: katlas_arch::ArchDb::builtin(),
        rules: &rules,
        row_source: None,
    })
    .unwrap();
    let t = katlas_advise::task::from_row(&fit, &row, None, &rules, &[], &extras).unwrap();
    assert!(!t.bench.command.iter().any(|a| a.contains("trace")), "{:?}", t.bench.command);
    let md = task_markdown(&t);
    assert!(md.contains("instrumentation stripped") && md.contains("--trace .katlas/runs/r1/trace.json") && md.contains("eval measures a fresh one"), "{md}");
}
