//! Full comparison of the native AMDGPU decoder with llvm-objdump over whole libraries:
//! `mix_oracle [--per-arch N] [--objdump PATH] PATH...` checks every AMD object (or N per
//! arch), in parallel, and prints per-architecture totals and every disagreement.
//! Exit 1 on any refusal or mismatch.
use katlas_isa::manifest::Vendor;
use katlas_isa::oracle::{check_object, sample};
use rayon::prelude::*;

#[path = "../tests/it/support/mix_tally.rs"]
mod mix_tally;
use mix_tally::Tally;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut take = |flag: &str| -> Option<String> {
        let i = args.iter().position(|a| a == flag)?;
        let v = args.get(i + 1).cloned();
        args.drain(i..(i + 2).min(args.len()));
        v
    };
    let per_arch: usize = take("--per-arch").and_then(|v| v.parse().ok()).unwrap_or(0);
    let objdump = take("--objdump").unwrap_or_else(|| "/usr/lib/llvm-22/bin/llvm-objdump".into());
    let tool = katlas_isa::Tool { name: "llvm-objdump".into(), path: objdump.into(), version: None };
    let started = std::time::Instant::now();
    let mut tally = Tally::default();
    for path in &args {
        let (objs, errors, bytes) = match katlas_isa::oracle::scan_file_with_bytes(path.as_ref()) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(2);
            }
        };
        for e in errors {
            eprintln!("{path}: scan error at {}: {}", e.chain, e.message);
        }
        let objects: Vec<_> = objs.into_iter().filter(|o| o.vendor == Vendor::Amd).map(|o| (o.arch.clone(), o)).collect();
        let chosen = sample(objects, per_arch);
        let results: Vec<_> = chosen
            .par_iter()
            .map(|(arch, o)| {
                let b = &bytes[&o.chain_text];
                let names: Vec<String> = o.kernels.iter().map(|k| k.name.clone()).collect();
                (arch.clone(), o.chain_text.clone(), check_object(&tool, arch, b.bytes(), &names))
            })
            .collect();
        let shown = tally.disagreements.len();
        for (arch, chain, r) in results {
            tally.add(&arch, &chain, r);
        }
        for d in &tally.disagreements[shown..] {
            println!("{d}");
        }
    }
    println!("| arch | objects | kernels | instructions | refused | kernels mismatched |");
    println!("|---|---|---|---|---|---|");
    for (arch, t) in &tally.totals {
        println!("| {arch} | {} | {} | {} | {} | {} |", t.objects, t.kernels, t.instructions, t.refused, t.mismatched_kernels);
    }
    println!("elapsed {:.1} s", started.elapsed().as_secs_f64());
    std::process::exit(if tally.disagreements.is_empty() { 0 } else { 1 });
}
