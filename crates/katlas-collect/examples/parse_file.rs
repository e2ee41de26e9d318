//! `cargo run --release --example parse_file -p katlas-collect -- PARSER FILE`:
//! the library's parse path without the CLI (benchmarks; see benches/ingest.sh).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: parse_file PARSER FILE");
        std::process::exit(2);
    }
    match katlas_collect::parse(&args[1], katlas_collect::Input::File(std::path::Path::new(&args[2]))) {
        Ok(o) => {
            let kernels: usize = o.phases.iter().map(|p| p.kernels.len()).sum();
            let launches: u64 = o.phases.iter().filter_map(|p| p.launches).sum();
            let gpu: f64 = o.phases.iter().map(|p| p.gpu_time_us).sum();
            println!("{} phases, {kernels} kernels, {launches} launches, {gpu:.1} us GPU time, {} warnings", o.phases.len(), o.warnings.len());
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
