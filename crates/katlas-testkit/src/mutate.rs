//! The mutation drivers' shared parts (`crates/katlas-collect/tests/it/mutation_driver.rs` and
//! `crates/katlas-isa/tests/it/mutation_driver.rs`): a seeded generator, the structural mutator,
//! and the peak-RSS reading.

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
