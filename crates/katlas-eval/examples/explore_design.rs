//! The design experiment behind the eval's decision rule (docs/eval.md, "Why this design"):
//! four decision intervals (hull of median bootstrap + Welch, Welch alone, Yuen's trimmed t,
//! hull of trimmed-mean bootstrap + Welch) against Bonferroni and group-sequential spending
//! plans, on simulated log-normal noise. Seeded; `cargo run --release -p katlas-eval --example
//! explore_design -- TRIALS`.
use katlas_eval::sim::sample;
use katlas_eval::stats;
use katlas_eval::verdict::{classify, Plan};
use katlas_model::ledger::Verdict;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn trimmed(xs: &[f64], g: usize) -> (f64, f64) {
    // trimmed mean and winsorized variance
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let tm = v[g..n - g].iter().sum::<f64>() / (n - 2 * g) as f64;
    let w: Vec<f64> = (0..n).map(|i| v[i.clamp(g, n - 1 - g)]).collect();
    let wm = w.iter().sum::<f64>() / n as f64;
    let wv = w.iter().map(|x| (x - wm).powi(2)).sum::<f64>() / (n - 1) as f64;
    (tm, wv)
}

fn tmean(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let g = (0.2 * v.len() as f64).floor() as usize;
    let n = v.len();
    v[g..n - g].iter().sum::<f64>() / (n - 2 * g) as f64
}
/// Percentile bootstrap interval of `stat(b) / stat(a) - 1` at `level`, `r` resamples.
fn boot_ratio(a: &[f64], b: &[f64], level: f64, r: u32, seed: u64, stat: impl Fn(&mut [f64]) -> f64) -> [f64; 2] {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut ba = vec![0.0; a.len()];
    let mut bb = vec![0.0; b.len()];
    let mut st = Vec::new();
    for _ in 0..r {
        for x in ba.iter_mut() {
            *x = a[rng.random_range(0..a.len())];
        }
        for x in bb.iter_mut() {
            *x = b[rng.random_range(0..b.len())];
        }
        st.push(stat(&mut bb) / stat(&mut ba) - 1.0);
    }
    st.sort_by(|x, y| x.total_cmp(y));
    let al = 1.0 - level;
    [stats::quantile_sorted(&st, al / 2.0), stats::quantile_sorted(&st, 1.0 - al / 2.0)]
}
fn yuen(a: &[f64], b: &[f64], level: f64, trim: f64) -> Option<[f64; 2]> {
    let la: Vec<f64> = a.iter().map(|x| x.ln()).collect();
    let lb: Vec<f64> = b.iter().map(|x| x.ln()).collect();
    let (na, nb) = (la.len(), lb.len());
    if na < 2 || nb < 2 {
        return None;
    }
    let ga = (trim * na as f64).floor() as usize;
    let gb = (trim * nb as f64).floor() as usize;
    let (ma, wa) = trimmed(&la, ga);
    let (mb, wb) = trimmed(&lb, gb);
    let ha = (na - 2 * ga) as f64;
    let hb = (nb - 2 * gb) as f64;
    let da = (na as f64 - 1.0) * wa / (ha * (ha - 1.0));
    let db = (nb as f64 - 1.0) * wb / (hb * (hb - 1.0));
    let se2 = da + db;
    let d = mb - ma;
    if se2 <= 0.0 {
        return Some([d.exp() - 1.0; 2]);
    }
    let df = se2 * se2 / (da * da / (ha - 1.0) + db * db / (hb - 1.0));
    let t = stats::t_quantile(1.0 - (1.0 - level) / 2.0, df);
    let hw = t * se2.sqrt();
    Some([(d - hw).exp() - 1.0, (d + hw).exp() - 1.0])
}

#[derive(Clone, Copy, Debug)]
enum Method {
    Hull,
    Welch,
    Yuen,
    HullTrim,
    HullTrimYuen,
}

fn interval(m: Method, a: &[f64], b: &[f64], level: f64, seed: u64) -> Option<[f64; 2]> {
    match m {
        Method::Welch => stats::welch_log_ci(a, b, level),
        Method::Yuen => yuen(a, b, level, 0.2),
        Method::HullTrim => {
            let w = stats::welch_log_ci(a, b, level)?;
            if classify(w, 1.0, 0.01) == Verdict::Inconclusive {
                return Some(w);
            }
            let x = boot_ratio(a, b, level, 2000, seed, tmean);
            Some([x[0].min(w[0]), x[1].max(w[1])])
        }
        Method::HullTrimYuen => {
            let w = yuen(a, b, level, 0.2)?;
            if classify(w, 1.0, 0.01) == Verdict::Inconclusive {
                return Some(w);
            }
            let x = boot_ratio(a, b, level, 2000, seed, tmean);
            Some([x[0].min(w[0]), x[1].max(w[1])])
        }
        Method::Hull => {
            let w = stats::welch_log_ci(a, b, level)?;
            if classify(w, 1.0, 0.01) == Verdict::Inconclusive {
                return Some(w);
            }
            let x = boot_ratio(a, b, level, 2000, seed, |v| stats::median(v));
            Some([x[0].min(w[0]), x[1].max(w[1])])
        }
    }
}

/// Group-sequential nominal two-sided alphas per look by Monte Carlo on the
/// normal-theory joint law of the looks, for cumulative spending `cum`.
fn nominal(looks: &[u32], cum: &[f64]) -> Vec<f64> {
    let paths = 200_000;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let n_max = *looks.last().unwrap() as usize;
    let mut z: Vec<Vec<f64>> = (0..paths).map(|_| Vec::with_capacity(looks.len())).collect();
    for zp in z.iter_mut() {
        let mut s = 0.0;
        let mut i = 0;
        for &n in looks {
            while i < n as usize {
                let u1: f64 = 1.0 - rng.random::<f64>();
                let u2: f64 = rng.random();
                s += (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                i += 1;
            }
            zp.push((s / (n as f64).sqrt()).abs());
        }
        let _ = n_max;
    }
    let mut alive: Vec<usize> = (0..paths).collect();
    let mut out = Vec::new();
    let mut crossed = 0usize;
    for (k, &c) in cum.iter().enumerate() {
        let want = ((c * paths as f64).round() as usize).saturating_sub(crossed);
        let mut v: Vec<f64> = alive.iter().map(|&p| z[p][k]).collect();
        v.sort_by(|a, b| b.total_cmp(a));
        let thr = if want == 0 { f64::INFINITY } else { (v[want - 1] + v.get(want).copied().unwrap_or(0.0)) / 2.0 };
        alive.retain(|&p| z[p][k] <= thr);
        crossed = paths - alive.len();
        out.push(2.0 * (1.0 - stats::normal_cdf(thr)));
    }
    out
}

fn spend(looks: &[u32], alpha: f64, first: f64, rho: f64) -> Vec<f64> {
    let n1 = looks[0] as f64;
    let nk = *looks.last().unwrap() as f64;
    looks.iter().map(|&n| if looks.len() == 1 { alpha } else { first + (alpha - first) * ((n as f64 - n1) / (nk - n1)).powf(rho) }).collect()
}

fn draw(rng: &mut ChaCha8Rng, med: f64, cv: f64, tail: f64) -> f64 {
    // tail 0.1: 10% slow outliers (+5..30%); tail 0.2: the shape measured on the H200 box's CPU
    // for katlas-eval-spin (a 1.5% core and ~20% of runs 3..13% slow).
    if tail >= 0.2 {
        let x = sample(rng, med, 0.015);
        return if rng.random::<f64>() < tail { x * (1.03 + 0.10 * rng.random::<f64>()) } else { x };
    }
    let x = sample(rng, med, cv);
    if tail > 0.0 && rng.random::<f64>() < tail {
        x * (1.0 + 0.05 + 0.25 * rng.random::<f64>())
    } else {
        x
    }
}

#[allow(clippy::too_many_arguments)] // an exploration script: one knob per design axis
fn run(m: Method, looks: &[u32], alphas: &[f64], effect: f64, cv: f64, trials: u32, thr: f64, tail: f64) -> (u32, u32, u32, u32, f64) {
    let (mut imp, mut reg, mut nc, mut inc) = (0, 0, 0, 0);
    let mut runs = 0u64;
    for t in 0..trials {
        let mut rng = ChaCha8Rng::seed_from_u64(1 + t as u64 * 0x1000_0001);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut v = Verdict::Inconclusive;
        for (k, &n) in looks.iter().enumerate() {
            while (a.len() as u32) < n {
                a.push(draw(&mut rng, 100.0, cv, tail));
                b.push(draw(&mut rng, 100.0 * (1.0 + effect), cv, tail));
            }
            v = match interval(m, &a, &b, 1.0 - alphas[k], t as u64) {
                Some(ci) => classify(ci, 1.0, thr),
                None => Verdict::Inconclusive,
            };
            if matches!(v, Verdict::Improved | Verdict::Regressed | Verdict::NoChange) {
                break;
            }
        }
        runs += a.len() as u64;
        match v {
            Verdict::Improved => imp += 1,
            Verdict::Regressed => reg += 1,
            Verdict::NoChange => nc += 1,
            _ => inc += 1,
        }
    }
    (imp, reg, nc, inc, runs as f64 / trials as f64)
}

fn main() {
    let trials: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(400);
    let bonf = |looks: &[u32]| -> Vec<f64> {
        let k = looks.len();
        if k == 1 {
            vec![0.05]
        } else {
            std::iter::once(0.025).chain(std::iter::repeat_n(0.025 / (k - 1) as f64, k - 1)).collect()
        }
    };
    let mut plans: Vec<(String, Vec<u32>, Vec<f64>)> = vec![
        ("fixed10".into(), vec![10], vec![0.05]),
        ("bonferroni 3..30 (the previous plan)".into(), vec![3, 5, 8, 12, 18, 27, 30], bonf(&[3, 5, 8, 12, 18, 27, 30])),
    ];
    for looks in [Plan::adaptive(3, 11).looks, Plan::adaptive(3, 15).looks, Plan::adaptive(3, 20).looks, Plan::adaptive(3, 30).looks] {
        for (first, rho) in [(0.02, 2.5), (0.025, 2.5), (0.025, 3.5)] {
            let cum = spend(&looks, 0.05, first, rho);
            let nom = nominal(&looks, &cum);
            plans.push((
                format!("gs {:?} a1={first} rho={rho} nom={:?}", looks, nom.iter().map(|x| (x * 10000.0).round() / 10000.0).collect::<Vec<_>>()),
                looks.clone(),
                nom,
            ));
        }
    }
    for m in [Method::Hull, Method::Welch, Method::Yuen, Method::HullTrim, Method::HullTrimYuen] {
        for (name, looks, al) in &plans {
            for tail in [0.0, 0.2] {
                let aa0 = run(m, looks, al, 0.0, 0.02, trials, 0.0, tail);
                let aa = run(m, looks, al, 0.0, 0.02, trials, 0.01, tail);
                let e10 = run(m, looks, al, 0.10, 0.02, trials, 0.01, tail);
                let e3 = run(m, looks, al, 0.03, 0.02, trials, 0.01, tail);
                let e5 = run(m, looks, al, -0.05, 0.02, trials, 0.01, tail);
                println!(
                    "{m:?} outliers {:.0}% {name}: AA(t=0) fp {} | AA fp {} | 10%: {} right {:.2} runs | 3%: {} right {:.2} runs | -5%: {} right {:.2} runs",
                    tail * 100.0,
                    aa0.0 + aa0.1,
                    aa.0 + aa.1,
                    e10.0,
                    e10.4,
                    e3.0,
                    e3.4,
                    e5.1,
                    e5.4
                );
            }
        }
    }
}
