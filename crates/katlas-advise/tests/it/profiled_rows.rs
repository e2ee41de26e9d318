//! Commands katlas derives for measurement never time the profiled program (issue 14,
//! item 4): a task or eval contract made from a `collect --profile` row runs the plain
//! command, without the profiler's arguments, wrapper or env, and says so.

use crate::common;

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
    let fit = common::row_fit(&row, &rules);
    let t = katlas_advise::task::from_row(&fit, &row, None, &rules, &[], &extras).unwrap();
    assert!(!t.bench.command.iter().any(|a| a.contains("trace")), "{:?}", t.bench.command);
    let md = task_markdown(&t);
    assert!(md.contains("instrumentation stripped") && md.contains("--trace .katlas/runs/r1/trace.json") && md.contains("eval measures a fresh one"), "{md}");
}

use katlas_testkit::hipfire_streams;

/// The rows `hipfire-ar` makes of the bench's real stderr (bench_qwen35_mq4's format strings,
/// profiled): SUMMARY's `gen_tok_s` lands on the prefill row too, yet a prefill row is judged
/// by the prefill rate, in suggest and in task.
#[test]
fn a_prefill_row_is_judged_on_the_prefill_rate() {
    let text = hipfire_streams::bench_qwen35_mq4("/models/qwen3.5-9b.mq4", true).err;
    let parsed = katlas_collect::parse::parse("hipfire-bench", katlas_collect::parse::Input::Text { text: &text, source: "stderr" }).unwrap();
    let rows = katlas_collect::collect::rows_from_output("hipfire-ar", parsed, &katlas_collect::ops::OpRules::builtin(), "stderr");
    let rules = Rules::builtin().unwrap();
    let by = |p: &str| rows.iter().find(|r| r.phase == p).unwrap_or_else(|| panic!("no {p} row"));
    let (pre, dec) = (by("prefill"), by("decode"));
    assert!(pre.metrics.contains_key("gen_tok_s"), "the whole-run SUMMARY is on both rows");
    assert_eq!(eval_contract(Some(pre), &rules).metric.as_deref(), Some("prefill_tok_s"));
    assert_eq!(eval_contract(Some(dec), &rules).metric.as_deref(), Some("gen_tok_s"));
    // A prefill row with no prefill rate falls to its own numbers, never the decode rate.
    let mut bare = pre.clone();
    bare.metrics.retain(|k, _| !k.starts_with("prefill_tok_s"));
    let m = eval_contract(Some(&bare), &rules).metric.unwrap();
    assert!(!m.starts_with("gen_") && !m.starts_with("decode_"), "{m}");

    let fit = common::row_fit(pre, &rules);
    let q = katlas_advise::suggest::suggest(
        &fit,
        Some(pre),
        katlas_arch::ArchDb::builtin(),
        &rules,
        &katlas_advise::suggest::SuggestOptions { ledger: None, provenance: &[], max: None },
    );
    assert!(!q.suggestions.is_empty());
    for s in &q.suggestions {
        assert_eq!(s.eval.metric.as_deref(), Some("prefill_tok_s"), "{}", s.title);
    }
    let t = katlas_advise::task::from_row(&fit, pre, None, &rules, &[], &katlas_advise::task::TaskExtras::default()).unwrap();
    assert_eq!(t.bench.metric, "prefill_tok_s");
}
