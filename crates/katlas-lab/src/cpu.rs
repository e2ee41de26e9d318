//! The CPU backend: the same families, shapes, checks and rows, with the Rust f32 kernels as the
//! implementation, so CI and GPU-less machines can run the whole loop. Its copy ceiling is a
//! host memcpy measured in the same run.

use crate::case::{CaseResult, Env};
use crate::check::{compare, stats};
use crate::kernels::{tolerance, Family, Math, CPU_VARIANTS};
use crate::workload::Case;
use crate::{Exit, RunOpts};
use std::collections::BTreeMap;
use std::time::Instant;

/// CPU time of this process so far, in microseconds.
fn process_cpu_us() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

fn host_copy_gbps() -> f64 {
    let n = 64usize << 20;
    let a = vec![0x5Au8; n];
    let mut b = vec![0u8; n];
    let mut s = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        b.copy_from_slice(&a);
        s.push(t.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(&b);
    }
    2.0 * n as f64 / (stats(&s).median * 1e3)
}

pub fn run(opts: &RunOpts) -> Result<(Env, Vec<CaseResult>), Exit> {
    let copy = host_copy_gbps();
    let mut detail = BTreeMap::new();
    detail.insert("host_memcpy_gbps".to_string(), copy);
    let env = Env {
        backend: "cpu".into(),
        arch: "cpu".into(),
        device: format!("host ({} threads)", rayon::current_num_threads()),
        driver: None,
        toolkit: None,
        copy_gbps: Some(copy),
        copy_detail: detail,
        floor_us: None,
        warmup: opts.warmup,
        samples: opts.samples,
        batch: opts.batch,
        l2: "warm (host)".into(),
        command: opts.command.clone(),
    };
    let mut results = Vec::new();
    let mut any = false;
    for fam in Family::ALL {
        let vars: Vec<_> = CPU_VARIANTS.iter().filter(|v| v.serves(fam) && opts.selects(fam.name(), v.name)).collect();
        if vars.is_empty() {
            continue;
        }
        any = true;
        for sh in opts.shapes.clone().unwrap_or_else(|| fam.default_shapes(false)) {
            fam.validate(sh).map_err(|e| Exit::input(format!("{e}")))?;
            let case = Case::new(fam, sh, opts.seed);
            let want = case.oracle();
            for v in &vars {
                let (name, doc, mode) = (v.name, v.doc, v.mode);
                let got = case.cpu_run(mode);
                let check = compare(&got, &want, case.row_len, tolerance(fam, Math::F32));
                for _ in 0..opts.warmup {
                    std::hint::black_box(case.cpu_run(mode));
                }
                let (mut s, mut cpu) = (Vec::new(), Vec::new());
                for _ in 0..opts.samples {
                    let (t, c) = (Instant::now(), process_cpu_us());
                    std::hint::black_box(case.cpu_run(mode));
                    s.push(t.elapsed().as_secs_f64() * 1e6);
                    cpu.push(process_cpu_us() - c);
                }
                let r = CaseResult {
                    family: fam,
                    variant: name.to_string(),
                    func: format!("cpu_{}_{name}", fam.name()),
                    levers: doc.to_string(),
                    shape: sh,
                    bytes: fam.bytes(sh),
                    flops: fam.flops(sh),
                    stats: stats(&s),
                    stream_us: None,
                    cpu_time: cpu.iter().all(|c| c.is_finite()).then(|| stats(&cpu)),
                    check,
                    resources: None,
                    grid: None,
                    block: None,
                    rotation_sets: 1,
                };
                eprintln!("{}", crate::report::metric_line(&env, &r));
                results.push(r);
            }
        }
    }
    if !any {
        return Err(Exit::input("no CPU kernel variant matches --kernel/--variant (CPU variants: scalar, par, r4 for the 4-bit GEMVs)".into()));
    }
    Ok((env, results))
}
