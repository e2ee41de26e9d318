//! Real processes in the suite, only what holds on a busy machine: `katlas-eval-spin` does real
//! CPU work scaled by a factor, each sample a fresh process, through the same runner and
//! verdict code as `katlas eval`; the metric is its own thread CPU time (`cpu_ms`), so waiting
//! for a core is not noise. An A/A is not called a change and a 30% slowdown is found. The
//! power claims (5% at CV 2% in >= 90% of 50, A/A <= 5% of 200, runs per side against fixed
//! N=10) depend on load: they live in the deterministic simulation tests (tests/it/statistics.rs)
//! and in the benchmark `benches/real_power.rs` (docs/PERF.md).

use crate::support::real;
use katlas_eval::verdict::Plan;
use real::evals;

#[test]
fn real_processes_hold_under_load() {
    let d = tempfile::tempdir().unwrap();
    // 20 A/A evals at fixed N = 5: at alpha 0.05 one call is expected; a machine whose load
    // shifts between blocks must still not turn noise into a pattern of calls.
    let aa = evals(d.path(), "aa", 1.0, 0.02, &Plan::fixed(5), 0, 20);
    // A 30% slowdown is far outside any load noise of the CPU-time metric.
    let slow = evals(d.path(), "slow", 1.30, 0.02, &Plan::default_adaptive(), 1, 10);
    eprintln!("A/A fixed 5: {:?}; 30% slower, default plan: {:?} ({:.2} runs/side)", aa.verdicts, slow.verdicts, slow.runs_per_side());
    let false_calls = aa.get("improved") + aa.get("regressed");
    assert!(false_calls <= 3, "A/A: {false_calls}/20 evals called noise a change ({:?})", aa.verdicts);
    assert!(slow.get("regressed") >= 9, "30% slowdown: {:?}", slow.verdicts);
    assert_eq!(slow.get("improved"), 0, "{:?}", slow.verdicts);
}
