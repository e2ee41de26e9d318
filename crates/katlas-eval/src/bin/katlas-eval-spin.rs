//! Test workload for the eval protocol: real CPU work with a tunable factor.
//!
//! `katlas-eval-spin --factor F [--iters N] [--warm-file P --warm-gain G] [--bytes B]
//!  [--kernel NAME] [--fail]` spins a checksum loop for `F × N` iterations and prints
//! `elapsed_ms=…`, `cpu_ms=…` (the thread's CPU time: what the work cost, without the time
//! spent waiting for a core on a shared machine), `iters_per_s=…`, `sink=…` (the loop's sum, printed so the loop is not optimised away), `work=…`
//! (iterations done; a noise-free cost) and optionally `bytes=…`, `kernel_seen=…`.
//!
//! `--jitter CV` varies the work of each run by a log-normal factor with that CV (seeded from
//! the clock and pid), so a test can run at a chosen sample CV with real work.
//!
//! `--warm-file` models an order effect: when the file was touched less than
//! `--warm-window-ms` ago (by the previous run), the run does `G` less work,
//! like a candidate that looks faster only because it runs right after the
//! baseline warmed clocks or caches. Every run touches the file at its end.
//! `KATLAS_SPIN_FACTOR` (env) multiplies the factor and `KATLAS_SPIN_KERNEL` names the
//! kernel it reports: env knobs for variant A/B.

use std::time::{Instant, SystemTime};

fn main() {
    let mut factor = 1.0f64;
    let mut iters: u64 = 2_000_000;
    let mut warm_file: Option<String> = None;
    let mut warm_gain = 0.0f64;
    let mut warm_window_ms = 1000u64;
    let mut bytes: Option<f64> = None;
    let mut kernel: Option<String> = None;
    let mut fail = false;
    let mut jitter = 0.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| die(&format!("{a} needs a value")));
        match a.as_str() {
            "--factor" => factor = val().parse().unwrap_or_else(|_| die("--factor: not a number")),
            "--iters" => iters = val().parse().unwrap_or_else(|_| die("--iters: not a number")),
            "--warm-file" => warm_file = Some(val()),
            "--warm-gain" => warm_gain = val().parse().unwrap_or_else(|_| die("--warm-gain: not a number")),
            "--warm-window-ms" => warm_window_ms = val().parse().unwrap_or_else(|_| die("--warm-window-ms: not a number")),
            "--bytes" => bytes = Some(val().parse().unwrap_or_else(|_| die("--bytes: not a number"))),
            "--kernel" => kernel = Some(val()),
            "--fail" => fail = true,
            "--jitter" => jitter = val().parse().unwrap_or_else(|_| die("--jitter: not a number")),
            _ => die(&format!("unknown argument {a}")),
        }
    }
    if let Ok(f) = std::env::var("KATLAS_SPIN_FACTOR") {
        factor *= f.parse::<f64>().unwrap_or_else(|_| die("KATLAS_SPIN_FACTOR: not a number"));
    }
    if fail {
        eprintln!("spin: failing as asked");
        std::process::exit(7);
    }
    let mut work = factor * iters as f64;
    if let Some(p) = &warm_file {
        let warm = std::fs::metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age.as_millis() < warm_window_ms as u128);
        if warm {
            work *= 1.0 - warm_gain;
        }
    }
    if jitter > 0.0 {
        work *= lognormal_factor(jitter);
    }
    let n = work.max(1.0) as u64;
    let t0 = Instant::now();
    let c0 = thread_cpu_s();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut sum: u64 = 0;
    for i in 0..n {
        // xorshift64* step: cheap, not optimisable away because the sum is printed.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        sum = sum.wrapping_add(x.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ i);
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_s() - c0;
    if let Some(p) = &warm_file {
        let _ = std::fs::write(p, b"warm\n");
    }
    // `sink`, not `checksum`: sides with different factors do different work by design, and
    // an eval compares the `checksum` of its sides as their output.
    println!("sink={sum}");
    // The work actually done: a noise-free cost for tests of protocol structure.
    println!("work={n}");
    println!("elapsed_ms={:.4}", secs * 1e3);
    println!("cpu_ms={:.4}", cpu * 1e3);
    println!("iters_per_s={:.1}", n as f64 / secs.max(1e-9));
    if let Some(b) = bytes {
        println!("bytes={b}");
    }
    if let Some(k) = kernel.or_else(|| std::env::var("KATLAS_SPIN_KERNEL").ok()) {
        println!("kernel_seen={k}");
    }
}

/// exp(N(-s²/2, s²)) with s chosen for the given CV: mean 1, a fresh draw per process.
fn lognormal_factor(cv: f64) -> f64 {
    let seed = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1) ^ ((std::process::id() as u64) << 32);
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let (u1, u2) = (1.0 - next(), next());
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    let s = (1.0 + cv * cv).ln().sqrt();
    (s * z - s * s / 2.0).exp()
}

/// CPU time of this thread in seconds (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn die(msg: &str) -> ! {
    eprintln!("katlas-eval-spin: {msg}");
    std::process::exit(2)
}
