//! Minimal driver for the library (benchmarks use it when the `katlas` binary is not built):
//! `scan [--mix] [--jobs N] PATH...` prints the manifest summary as JSON on stdout.
use katlas_isa::{scan, DisasmMode, ScanOptions};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mix = args.iter().any(|a| a == "--mix");
    args.retain(|a| a != "--mix");
    let mut jobs = None;
    if let Some(i) = args.iter().position(|a| a == "--jobs") {
        jobs = args.get(i + 1).and_then(|s| s.parse().ok());
        args.drain(i..(i + 2).min(args.len()));
    }
    let full = args.iter().any(|a| a == "--full");
    args.retain(|a| a != "--full");
    let opts = ScanOptions { disasm: if mix { DisasmMode::Auto } else { DisasmMode::Never }, jobs, ..Default::default() };
    let paths: Vec<_> = args.iter().map(std::path::PathBuf::from).collect();
    match scan(&paths, opts) {
        Ok(m) => {
            if full {
                println!("{}", serde_json::to_string_pretty(&m).unwrap_or_default());
            } else {
                // the summary, plus the bytes of the code objects read (after decompression):
                // the basis the benchmark's MB/s shares with the peer, which counts the objects
                // it unbundled
                let mut v = serde_json::to_value(&m.summary).unwrap_or_default();
                v["object_bytes"] = m.objects.iter().map(|o| o.size).sum::<u64>().into();
                println!("{v}");
                for e in m.errors.iter().take(20) {
                    eprintln!("error: {} {}: {}", e.path, e.chain, e.message);
                }
            }
            // the process ends here: freeing every kernel's fields one by one (0.4 s of CPU
            // for rocSPARSE's 88k kernels) would only delay the exit
            std::mem::forget(m);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
