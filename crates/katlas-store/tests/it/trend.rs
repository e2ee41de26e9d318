//! Change points: a planted 5% step at one commit is named; flat noisy histories give none.
//! Histories are rows in a real corpus, read through the index (deterministic, seeded noise).

use katlas_corpus::{append_jsonl, Fsync, Layout};
use katlas_model::{Metric, Row};
use katlas_store::trend::{analyse, load, By};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn gauss(rng: &mut ChaCha8Rng) -> f64 {
    let (u, v): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// `commits` commits × `runs` rows of `gen_tok_s` ≈ 100 with relative noise `cv`; from commit
/// `step_at` on, the level is multiplied by `step`.
fn history(seed: u64, commits: usize, runs: usize, cv: f64, step_at: usize, step: f64) -> (tempfile::TempDir, Layout) {
    let d = tempfile::tempdir().unwrap();
    let l = Layout::for_project(d.path());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows = Vec::new();
    for c in 0..commits {
        // Each commit's own small offset (builds differ a little), well inside the noise.
        let offset = 1.0 + 0.002 * gauss(&mut rng);
        for r in 0..runs {
            let mut row = Row::new("qwen3.5-9b", "decode");
            row.run_index = r as u32 + 1;
            row.captured_at = katlas_model::row::format_unix_utc(1_767_225_600 + (c * 3600 + r * 60) as i64).expect("a 2026 time");
            row.identity.source.commit = Some(format!("{:040x}", 0xc0ffee_u64 + c as u64));
            row.identity.host.hostname = Some("box-a".into());
            let level = if c >= step_at { 100.0 * step } else { 100.0 };
            row.metrics.insert("gen_tok_s".into(), Metric::new(level * offset * (1.0 + cv * gauss(&mut rng)), Some("tok/s")));
            rows.push(row);
        }
    }
    append_jsonl(&l.corpus_file("box-a", "2026-01-01"), &rows, Fsync::Never).unwrap();
    (d, l)
}

fn trend(l: &Layout) -> katlas_store::trend::Trend {
    let (c, _) = katlas_store::index::open(l).unwrap();
    let samples = load(&c, "gen_tok_s", Some("qwen3.5-9b"), None, By::Commit).unwrap();
    analyse("gen_tok_s", By::Commit, &samples)
}

#[test]
fn a_planted_five_percent_step_is_named_at_its_commit() {
    for (seed, at, step) in [(1, 12, 0.95), (2, 5, 1.05), (3, 17, 0.95)] {
        let (_d, l) = history(seed, 24, 5, 0.01, at, step);
        let t = trend(&l);
        assert_eq!(t.groups.len(), 24);
        assert_eq!(t.change_points.len(), 1, "seed {seed}: {:?}", t.change_points);
        let cp = &t.change_points[0];
        assert_eq!(cp.key, format!("{:040x}", 0xc0ffee_u64 + at as u64), "seed {seed}: names the commit where the step entered");
        assert_eq!(cp.index, at);
        assert!((cp.relative_change - (step - 1.0)).abs() < 0.01, "seed {seed}: {}", cp.relative_change);
        assert_eq!(t.noise_basis, Some("within-group"));
        assert!((t.noise.unwrap() - 0.01).abs() < 0.004, "noise estimated from the samples: {:?}", t.noise);
    }
}

#[test]
fn flat_noisy_histories_have_no_change_point() {
    for seed in 0..20 {
        let (_d, l) = history(100 + seed, 24, 5, 0.02, usize::MAX, 1.0);
        let t = trend(&l);
        assert!(t.change_points.is_empty(), "seed {seed}: {:?}", t.change_points);
    }
}

#[test]
fn the_threshold_follows_the_noise_not_a_fixed_percentage() {
    // A 5% step inside 10% noise with two runs per commit is not claimed ...
    let (_d, l) = history(7, 24, 2, 0.10, 12, 0.95);
    assert!(trend(&l).change_points.is_empty());
    // ... while a 1% step in 0.1% noise is.
    let (_d, l) = history(8, 24, 5, 0.001, 12, 0.99);
    let t = trend(&l);
    assert_eq!(t.change_points.len(), 1, "{:?}", t.change_points);
    assert_eq!(t.change_points[0].index, 12);
}
