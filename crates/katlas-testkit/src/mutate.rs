//! The mutation drivers (`crates/katlas-collect/tests/it/mutation_driver.rs` for the output and
//! profiler parsers, `crates/katlas-isa/tests/it/mutation_driver.rs` for the code-object
//! containers): a seeded generator, the structural mutator, the driver that feeds [`INPUTS`]
//! mutated inputs to one reader under the hang bound, and the peak-RSS bound over the whole run.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Mutated inputs per reader.
pub const INPUTS: usize = 10_000;
/// No input may take longer than this.
pub const HANG: Duration = Duration::from_secs(5);
/// The whole run's peak RSS stays under 1 GiB.
pub const RSS_LIMIT_KB: u64 = 1 << 20;

/// SplitMix64: seeded, so every failure is reproducible from its number.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// One to four structural mutations of `seed`: bit flips, syntax bytes, huge numbers,
/// splices, deletions, duplications, truncation.
pub fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    const SYNTAX: &[u8] = b"{}[]\",:\n\r\t=-.e9\\\0\xff";
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = d.len().max(1);
        let at = rng.below(len);
        match rng.below(8) {
            0 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = at.min(d.len() - 1);
                d[i] = SYNTAX[rng.below(SYNTAX.len())];
            }
            2 => {
                let big: &[&[u8]] = &[b"99999999999999999999999", b"-1", b"1e308", b"NaN", b"inf", b"4294967296", b"\"\"\"", b"[[[[[[[[", b"{{{{{{{{"];
                let s = big[rng.below(big.len())];
                d.splice(at.min(d.len())..at.min(d.len()), s.iter().copied());
            }
            3 if d.len() > 2 => {
                let from = rng.below(d.len());
                let n = rng.below(64.min(d.len() - from)) + 1;
                let chunk: Vec<u8> = d[from..from + n].to_vec();
                d.splice(at.min(d.len())..at.min(d.len()), chunk);
            }
            4 if d.len() > 2 => {
                let n = rng.below(64.min(d.len() - at.min(d.len() - 1))) + 1;
                let s = at.min(d.len() - 1);
                d.drain(s..(s + n).min(d.len()));
            }
            5 => d.truncate(at),
            6 if !d.is_empty() => {
                // A line repeated many times (tables, CSV rows).
                let s = at.min(d.len() - 1);
                let line_end = d[s..].iter().position(|b| *b == b'\n').map(|p| s + p + 1).unwrap_or(d.len());
                let line = d[s..line_end].to_vec();
                for _ in 0..rng.below(50) {
                    d.splice(line_end..line_end, line.iter().copied());
                }
            }
            _ => d.push(SYNTAX[rng.below(SYNTAX.len())]),
        }
    }
    d
}

/// Peak resident set size of this process (VmHWM), KiB.
pub fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

thread_local! {
    /// Set while this thread runs a mutated input: its panics are counted, not printed.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f()`, its panic caught and not printed: the drivers count panics and report them, rather than
/// print 10,000 of them. Only this thread's panics inside `f` are quiet; any other panic of the
/// process (a hang or a missing fixture the driver reports, another test of the binary) prints
/// through the hook that was there before.
pub fn catch_quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|q| q.get()) {
                before(info)
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    r
}

/// Inputs that panicked, by number.
type Failures = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

/// Where a failing input is left to reproduce: `target/mutation-failures/FILE`.
fn save_failure(file: &str, data: &[u8]) -> PathBuf {
    let dir = crate::repo_root().join("target/mutation-failures");
    let _ = std::fs::create_dir_all(&dir);
    let p = dir.join(file);
    let _ = std::fs::write(&p, data);
    p
}

/// Feeds [`INPUTS`] mutations of `seeds` (taken in turn, so the first is mutated most when
/// there are fewer seeds than inputs) to `read` on a worker thread, and fails naming `name`,
/// the input's number and the file it is saved to (`{saved_as}-{number}.bin`) when an input
/// panics or takes longer than [`HANG`]. Returns the line the run reports.
pub fn drive(name: &str, saved_as: &str, seeds: Vec<Vec<u8>>, read: impl Fn(&[u8]) + Send + 'static) -> String {
    assert!(!seeds.is_empty(), "{name}: no seed input");
    let done = Arc::new(AtomicUsize::new(0));
    let panics: Failures = Arc::default();
    let current: Arc<Mutex<Vec<u8>>> = Arc::default();
    let (d, p, c) = (done.clone(), panics.clone(), current.clone());
    let mut rng = Rng(0x6b61_746c_6173 ^ name.len() as u64);
    let worker = std::thread::spawn(move || {
        for i in 0..INPUTS {
            let input = mutate(&seeds[i % seeds.len()], &mut rng);
            *c.lock().unwrap() = input.clone();
            if catch_quietly(|| read(&input)).is_err() {
                p.lock().unwrap().push((i, input));
            }
            d.store(i + 1, Ordering::SeqCst);
        }
    });
    let t0 = Instant::now();
    let (mut last, mut since) = (0, Instant::now());
    while done.load(Ordering::SeqCst) < INPUTS {
        std::thread::sleep(Duration::from_millis(20));
        let now = done.load(Ordering::SeqCst);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() > HANG {
            let p = save_failure(&format!("{saved_as}-{now}.bin"), &current.lock().unwrap());
            panic!("{name}: input #{now} did not finish in {HANG:?} (saved to {})", p.display());
        }
    }
    worker.join().unwrap();
    let panics = panics.lock().unwrap();
    if let Some((i, data)) = panics.first() {
        let p = save_failure(&format!("{saved_as}-{i}.bin"), data);
        panic!("{name}: {} of {INPUTS} inputs panicked; first #{i} (saved to {})", panics.len(), p.display());
    }
    format!("{name}: {INPUTS} inputs, 0 panics, 0 hangs, {:.1} s", t0.elapsed().as_secs_f64())
}

/// A reader of mutated inputs.
pub type Reader = Box<dyn Fn(&[u8]) + Send>;

/// One reader for [`drive_all`]: its name, the stem its failing inputs are saved as, its seeds
/// and the reader.
pub struct Job {
    pub name: String,
    pub saved_as: String,
    pub seeds: Vec<Vec<u8>>,
    pub read: Reader,
}

/// [`drive`]s every job, as many at once as the machine has cores (each job whole on one
/// thread, under its own hang bound), and returns their report lines in the jobs' order. Run
/// one after another, the readers left every core but one idle. The first failing job's panic is
/// raised once the others are done.
pub fn drive_all(jobs: Vec<Job>) -> Vec<String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, jobs.len().max(1));
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let lines = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| loop {
                    let Some((i, job)) = queue.lock().unwrap().next() else { break };
                    let line = drive(&job.name, &job.saved_as, job.seeds, job.read);
                    lines.lock().unwrap().push((i, line));
                })
            })
            .collect();
        let failures: Vec<_> = workers.into_iter().filter_map(|w| w.join().err()).collect();
        if let Some(first) = failures.into_iter().next() {
            std::panic::resume_unwind(first);
        }
    });
    let mut lines = lines.into_inner().unwrap();
    lines.sort_by_key(|(i, _)| *i);
    lines.into_iter().map(|(_, l)| l).collect()
}

/// Prints the drivers' `report` lines and the peak RSS, and fails when the RSS breached
/// [`RSS_LIMIT_KB`]. Only meaningful in a process of its own (`own_process!`).
pub fn assert_peak_rss(report: &[String]) {
    let rss = peak_rss_kb();
    for r in report {
        eprintln!("{r}");
    }
    eprintln!("peak RSS {} MiB", rss / 1024);
    assert!(rss < RSS_LIMIT_KB, "peak RSS {} MiB breaches the 1 GiB bound", rss / 1024);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, read: Reader) -> Job {
        Job { name: name.into(), saved_as: format!("testkit-{name}"), seeds: vec![b"seed bytes".to_vec()], read }
    }

    #[test]
    fn drive_all_reports_every_job_in_order() {
        let lines = drive_all(vec![job("first", Box::new(|_| {})), job("second", Box::new(|_| {})), job("third", Box::new(|_| {}))]);
        assert_eq!(lines.len(), 3);
        for (line, name) in lines.iter().zip(["first", "second", "third"]) {
            assert!(line.starts_with(&format!("{name}: {INPUTS} inputs, 0 panics")), "{line}");
        }
    }

    #[test]
    fn a_reader_that_panics_fails_drive_all_naming_it() {
        let r = std::panic::catch_unwind(|| {
            drive_all(vec![
                job("fine", Box::new(|_| {})),
                job("fragile", Box::new(|input| assert!(input.len() != 3, "three bytes"))),
                job("also-fine", Box::new(|_| {})),
            ])
        });
        let e = r.expect_err("a panicking reader fails the run");
        let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.starts_with("fragile: ") && msg.contains("inputs panicked"), "{msg}");
    }
}
