//! md5 of many messages at once ("multi-buffer" md5). md5 is serial within one message, but
//! independent messages can share SIMD lanes: 16 with AVX-512 (`vpternlogd` for the round
//! functions, `vprold` for the rotations), 8 with AVX2. A scan hashes every code object it
//! reports (hundreds per library, 1.3 GB for rocSPARSE), which one scalar md5 per object made
//! the largest cost of the scan. Backends are chosen at run time; the scalar fallback is the
//! `md-5` crate, which the tests also use as the reference for the SIMD backends.
//!
//! Scheduling: messages go longest first into free lanes; each compress call runs all busy
//! lanes for as many blocks as the shortest remaining segment allows (a segment is either the
//! whole 64-byte blocks of a message, read in place, or its padded tail, one or two blocks
//! copied into the lane); a lane that finishes takes the next message.

use md5::{Digest, Md5};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// 8 lanes in 256-bit registers with AVX-512VL's `vpternlogd` and `vprold`: the round
    /// step's dependency chain is as short as with 512-bit registers, and CPUs that split
    /// 512-bit operations in two (AMD Zen 4) run it faster per lane.
    #[cfg(target_arch = "x86_64")]
    Avx512Vl,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Backend {
    /// The fastest backend this CPU runs.
    pub fn detect() -> Backend {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Backend::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Backend::Avx2;
            }
        }
        Backend::Scalar
    }

    /// Every backend this CPU runs (tests compare them all with the reference).
    pub fn supported() -> Vec<Backend> {
        #[allow(unused_mut)]
        let mut v = vec![Backend::Scalar];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                v.push(Backend::Avx2);
            }
            if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vl") {
                v.push(Backend::Avx512Vl);
            }
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Backend::Avx512);
            }
        }
        v
    }

    pub fn lanes(self) -> usize {
        match self {
            Backend::Scalar => 1,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 | Backend::Avx512Vl => 8,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => 16,
        }
    }
}

pub fn md5(d: &[u8]) -> [u8; 16] {
    Md5::digest(d).into()
}

/// How many messages one call of [`md5_many_with`] (best backend) hashes at once on this CPU.
pub fn group_lanes() -> usize {
    Backend::detect().lanes()
}

/// md5 of each message, on the calling thread, with the best backend.
/// md5 of each message with a given backend (which the CPU must support: see
/// [`Backend::supported`]; an unsupported one falls back to scalar).
pub fn md5_many_with(backend: Backend, msgs: &[&[u8]]) -> Vec<[u8; 16]> {
    if !Backend::supported().contains(&backend) || msgs.len() < 2 {
        return msgs.iter().map(|m| md5(m)).collect();
    }
    let mut out = vec![[0u8; 16]; msgs.len()];
    match backend {
        Backend::Scalar => {
            for (o, m) in out.iter_mut().zip(msgs) {
                *o = md5(m);
            }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU supports the backend (checked above).
        Backend::Avx2 => run::<8>(msgs, &mut out, |s, p, st, n| unsafe { x86::compress8(s, p, st, n) }),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Backend::Avx512Vl => run::<8>(msgs, &mut out, |s, p, st, n| unsafe { x86::compress8_vl(s, p, st, n) }),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Backend::Avx512 => run::<16>(msgs, &mut out, |s, p, st, n| unsafe { x86::compress16(s, p, st, n) }),
    }
    out
}

/// md5 of each message, spread over the rayon pool: messages are dealt longest first into
/// groups of similar total size, each group hashed by one task with all SIMD lanes.
pub fn md5_many_par(msgs: &[&[u8]]) -> Vec<[u8; 16]> {
    use rayon::prelude::*;
    let backend = Backend::detect();
    let lanes = backend.lanes();
    let threads = rayon::current_num_threads();
    // one group per thread: the more messages a group holds, the better its lanes stay busy
    // (a lane that holds a long message runs on while the others idle; with 4 groups per
    // thread, rocRAND's 150 objects of 0.13-4.7 MB kept the lanes 45% busy). A thread that
    // loses its core to another process is covered by the parse running beside the hashing.
    let groups = threads.min(msgs.len() / (2 * lanes)).max(1);
    if groups == 1 {
        return md5_many_with(narrowest(backend, msgs.len()), msgs);
    }
    let mut order: Vec<usize> = (0..msgs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(msgs[i].len()));
    // longest first, each to the group with the fewest bytes so far
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); groups];
    let mut load = vec![0usize; groups];
    for i in order {
        let g = (0..groups).min_by_key(|&g| load[g]).unwrap_or(0);
        load[g] += msgs[i].len() + 64;
        members[g].push(i);
    }
    let parts: Vec<(Vec<usize>, Vec<[u8; 16]>)> = members
        .into_par_iter()
        .map(|idx| {
            let m: Vec<&[u8]> = idx.iter().map(|&i| msgs[i]).collect();
            let h = md5_many_with(narrowest(backend, m.len()), &m);
            (idx, h)
        })
        .collect();
    let mut out = vec![[0u8; 16]; msgs.len()];
    for (idx, h) in parts {
        for (i, d) in idx.into_iter().zip(h) {
            out[i] = d;
        }
    }
    out
}

/// The backend for `n` messages: 256-bit AVX-512VL when they fit its 8 lanes, which runs each
/// lane faster than 512-bit registers on CPUs that split those (AMD Zen 4: 0.60 against
/// 0.46 GB/s per lane, docs/PERF.md); 512-bit registers only for more messages.
fn narrowest(best: Backend, n: usize) -> Backend {
    #[cfg(target_arch = "x86_64")]
    if best == Backend::Avx512 && n <= 8 && Backend::supported().contains(&Backend::Avx512Vl) {
        return Backend::Avx512Vl;
    }
    let _ = n;
    best
}

const IV: [u32; 4] = [0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476];

/// Per-lane progress through one message.
#[derive(Clone)]
struct Lane {
    msg: usize,
    /// Whole blocks of the message not yet hashed, read in place.
    full_left: usize,
    off: usize,
    /// Padded tail: the last partial block, 0x80, zeros, the bit length (1 or 2 blocks).
    tail: [u8; 128],
    tail_blocks: usize,
    tail_done: usize,
}

impl Lane {
    fn new(msg: usize, d: &[u8]) -> Lane {
        let full = d.len() / 64;
        let rest = &d[full * 64..];
        let mut tail = [0u8; 128];
        tail[..rest.len()].copy_from_slice(rest);
        tail[rest.len()] = 0x80;
        let tail_blocks = if rest.len() < 56 { 1 } else { 2 };
        let bits = (d.len() as u64).wrapping_mul(8);
        tail[tail_blocks * 64 - 8..tail_blocks * 64].copy_from_slice(&bits.to_le_bytes());
        Lane { msg, full_left: full, off: 0, tail, tail_blocks, tail_done: 0 }
    }
}

/// `compress(state, ptrs, strides, n)` runs `n` md5 blocks per lane; lane `i` reads
/// `ptrs[i] + k * strides[i]` for block `k`.
type Compress<const N: usize> = fn(&mut [[u32; N]; 4], &[*const u8; N], &[usize; N], usize);

fn run<const N: usize>(msgs: &[&[u8]], out: &mut [[u8; 16]], compress: Compress<N>) {
    static ZERO: [u8; 64] = [0; 64];
    let mut order: Vec<usize> = (0..msgs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(msgs[i].len()));
    let mut queue = order.into_iter();
    let mut lanes: [Option<Lane>; N] = std::array::from_fn(|_| None);
    let mut state = [[0u32; N]; 4];
    loop {
        for (i, lane) in lanes.iter_mut().enumerate() {
            if lane.is_none() {
                if let Some(m) = queue.next() {
                    *lane = Some(Lane::new(m, msgs[m]));
                    for (j, iv) in IV.iter().enumerate() {
                        state[j][i] = *iv;
                    }
                }
            }
        }
        let mut ptrs = [ZERO.as_ptr(); N];
        let mut strides = [0usize; N];
        let mut n = usize::MAX;
        for (i, lane) in lanes.iter().enumerate() {
            let Some(l) = lane else { continue };
            if l.full_left > 0 {
                // in bounds: full_left whole blocks remain after `off`
                ptrs[i] = msgs[l.msg][l.off..].as_ptr();
                n = n.min(l.full_left);
            } else {
                ptrs[i] = l.tail[l.tail_done * 64..].as_ptr();
                n = n.min(l.tail_blocks - l.tail_done);
            }
            strides[i] = 64;
        }
        if n == usize::MAX {
            break;
        }
        compress(&mut state, &ptrs, &strides, n);
        for (i, lane) in lanes.iter_mut().enumerate() {
            let Some(l) = lane else { continue };
            if l.full_left > 0 {
                l.full_left -= n;
                l.off += n * 64;
            } else {
                l.tail_done += n;
                if l.tail_done == l.tail_blocks {
                    let o = &mut out[l.msg];
                    for j in 0..4 {
                        o[j * 4..j * 4 + 4].copy_from_slice(&state[j][i].to_le_bytes());
                    }
                    *lane = None;
                }
            }
        }
    }
}

/// The 64 md5 steps (RFC 1321 order), written once for every backend: `$step!(round
/// function, a, b, c, d, message word, constant, rotation)` computes
/// `a = b + rotl(a + f(b, c, d) + m + k, s)`.
macro_rules! md5_steps {
    ($step:ident, $a:ident, $b:ident, $c:ident, $d:ident) => {
        $step!(F, $a, $b, $c, $d, 0, 0xd76aa478, 7);
        $step!(F, $d, $a, $b, $c, 1, 0xe8c7b756, 12);
        $step!(F, $c, $d, $a, $b, 2, 0x242070db, 17);
        $step!(F, $b, $c, $d, $a, 3, 0xc1bdceee, 22);
        $step!(F, $a, $b, $c, $d, 4, 0xf57c0faf, 7);
        $step!(F, $d, $a, $b, $c, 5, 0x4787c62a, 12);
        $step!(F, $c, $d, $a, $b, 6, 0xa8304613, 17);
        $step!(F, $b, $c, $d, $a, 7, 0xfd469501, 22);
        $step!(F, $a, $b, $c, $d, 8, 0x698098d8, 7);
        $step!(F, $d, $a, $b, $c, 9, 0x8b44f7af, 12);
        $step!(F, $c, $d, $a, $b, 10, 0xffff5bb1, 17);
        $step!(F, $b, $c, $d, $a, 11, 0x895cd7be, 22);
        $step!(F, $a, $b, $c, $d, 12, 0x6b901122, 7);
        $step!(F, $d, $a, $b, $c, 13, 0xfd987193, 12);
        $step!(F, $c, $d, $a, $b, 14, 0xa679438e, 17);
        $step!(F, $b, $c, $d, $a, 15, 0x49b40821, 22);
        $step!(G, $a, $b, $c, $d, 1, 0xf61e2562, 5);
        $step!(G, $d, $a, $b, $c, 6, 0xc040b340, 9);
        $step!(G, $c, $d, $a, $b, 11, 0x265e5a51, 14);
        $step!(G, $b, $c, $d, $a, 0, 0xe9b6c7aa, 20);
        $step!(G, $a, $b, $c, $d, 5, 0xd62f105d, 5);
        $step!(G, $d, $a, $b, $c, 10, 0x02441453, 9);
        $step!(G, $c, $d, $a, $b, 15, 0xd8a1e681, 14);
        $step!(G, $b, $c, $d, $a, 4, 0xe7d3fbc8, 20);
        $step!(G, $a, $b, $c, $d, 9, 0x21e1cde6, 5);
        $step!(G, $d, $a, $b, $c, 14, 0xc33707d6, 9);
        $step!(G, $c, $d, $a, $b, 3, 0xf4d50d87, 14);
        $step!(G, $b, $c, $d, $a, 8, 0x455a14ed, 20);
        $step!(G, $a, $b, $c, $d, 13, 0xa9e3e905, 5);
        $step!(G, $d, $a, $b, $c, 2, 0xfcefa3f8, 9);
        $step!(G, $c, $d, $a, $b, 7, 0x676f02d9, 14);
        $step!(G, $b, $c, $d, $a, 12, 0x8d2a4c8a, 20);
        $step!(H, $a, $b, $c, $d, 5, 0xfffa3942, 4);
        $step!(H, $d, $a, $b, $c, 8, 0x8771f681, 11);
        $step!(H, $c, $d, $a, $b, 11, 0x6d9d6122, 16);
        $step!(H, $b, $c, $d, $a, 14, 0xfde5380c, 23);
        $step!(H, $a, $b, $c, $d, 1, 0xa4beea44, 4);
        $step!(H, $d, $a, $b, $c, 4, 0x4bdecfa9, 11);
        $step!(H, $c, $d, $a, $b, 7, 0xf6bb4b60, 16);
        $step!(H, $b, $c, $d, $a, 10, 0xbebfbc70, 23);
        $step!(H, $a, $b, $c, $d, 13, 0x289b7ec6, 4);
        $step!(H, $d, $a, $b, $c, 0, 0xeaa127fa, 11);
        $step!(H, $c, $d, $a, $b, 3, 0xd4ef3085, 16);
        $step!(H, $b, $c, $d, $a, 6, 0x04881d05, 23);
        $step!(H, $a, $b, $c, $d, 9, 0xd9d4d039, 4);
        $step!(H, $d, $a, $b, $c, 12, 0xe6db99e5, 11);
        $step!(H, $c, $d, $a, $b, 15, 0x1fa27cf8, 16);
        $step!(H, $b, $c, $d, $a, 2, 0xc4ac5665, 23);
        $step!(I, $a, $b, $c, $d, 0, 0xf4292244, 6);
        $step!(I, $d, $a, $b, $c, 7, 0x432aff97, 10);
        $step!(I, $c, $d, $a, $b, 14, 0xab9423a7, 15);
        $step!(I, $b, $c, $d, $a, 5, 0xfc93a039, 21);
        $step!(I, $a, $b, $c, $d, 12, 0x655b59c3, 6);
        $step!(I, $d, $a, $b, $c, 3, 0x8f0ccc92, 10);
        $step!(I, $c, $d, $a, $b, 10, 0xffeff47d, 15);
        $step!(I, $b, $c, $d, $a, 1, 0x85845dd1, 21);
        $step!(I, $a, $b, $c, $d, 8, 0x6fa87e4f, 6);
        $step!(I, $d, $a, $b, $c, 15, 0xfe2ce6e0, 10);
        $step!(I, $c, $d, $a, $b, 6, 0xa3014314, 15);
        $step!(I, $b, $c, $d, $a, 13, 0x4e0811a1, 21);
        $step!(I, $a, $b, $c, $d, 4, 0xf7537e82, 6);
        $step!(I, $d, $a, $b, $c, 11, 0xbd3af235, 10);
        $step!(I, $c, $d, $a, $b, 2, 0x2ad7d2bb, 15);
        $step!(I, $b, $c, $d, $a, 9, 0xeb86d391, 21);
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// 16 lanes in AVX-512 registers.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `ptrs[i] + k * strides[i]` is readable for 64 bytes for every
    /// block `k < n`.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn compress16(state: &mut [[u32; 16]; 4], ptrs: &[*const u8; 16], strides: &[usize; 16], n: usize) {
        let mut a = _mm512_loadu_si512(state[0].as_ptr().cast());
        let mut b = _mm512_loadu_si512(state[1].as_ptr().cast());
        let mut c = _mm512_loadu_si512(state[2].as_ptr().cast());
        let mut d = _mm512_loadu_si512(state[3].as_ptr().cast());
        let mut p = *ptrs;
        for _ in 0..n {
            let mut r = [_mm512_setzero_si512(); 16];
            for i in 0..16 {
                r[i] = _mm512_loadu_si512(p[i].cast());
                p[i] = p[i].wrapping_add(strides[i]);
            }
            let m = transpose16(&r);
            let (a0, b0, c0, d0) = (a, b, c, d);
            // vpternlogd truth tables (operands b, c, d): F = b ? c : d (0xca),
            // G = d ? b : c (0xe4), H = b ^ c ^ d (0x96), I = c ^ (b | !d) (0x39)
            macro_rules! F {
                ($b:expr, $c:expr, $d:expr) => {
                    _mm512_ternarylogic_epi32::<0xca>($b, $c, $d)
                };
            }
            macro_rules! G {
                ($b:expr, $c:expr, $d:expr) => {
                    _mm512_ternarylogic_epi32::<0xe4>($b, $c, $d)
                };
            }
            macro_rules! H {
                ($b:expr, $c:expr, $d:expr) => {
                    _mm512_ternarylogic_epi32::<0x96>($b, $c, $d)
                };
            }
            macro_rules! I {
                ($b:expr, $c:expr, $d:expr) => {
                    _mm512_ternarylogic_epi32::<0x39>($b, $c, $d)
                };
            }
            macro_rules! step {
                ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $g:expr, $k:expr, $s:expr) => {
                    let t = _mm512_add_epi32($a, _mm512_add_epi32(m[$g], _mm512_set1_epi32($k as u32 as i32)));
                    let t = _mm512_add_epi32(t, $f!($b, $c, $d));
                    $a = _mm512_add_epi32($b, _mm512_rol_epi32::<$s>(t));
                };
            }
            md5_steps!(step, a, b, c, d);
            a = _mm512_add_epi32(a, a0);
            b = _mm512_add_epi32(b, b0);
            c = _mm512_add_epi32(c, c0);
            d = _mm512_add_epi32(d, d0);
        }
        _mm512_storeu_si512(state[0].as_mut_ptr().cast(), a);
        _mm512_storeu_si512(state[1].as_mut_ptr().cast(), b);
        _mm512_storeu_si512(state[2].as_mut_ptr().cast(), c);
        _mm512_storeu_si512(state[3].as_mut_ptr().cast(), d);
    }

    /// Row `i` = lane `i`'s block (16 words) -> vector `w` = word `w` of every lane.
    #[target_feature(enable = "avx512f")]
    fn transpose16(r: &[__m512i; 16]) -> [__m512i; 16] {
        // pairs of rows interleaved by 32 and then 64 bits: u[4q + j] holds, per 128-bit
        // chunk k, word j + 4k of rows 4q..4q+3
        let mut t = [_mm512_setzero_si512(); 16];
        for q in 0..8 {
            t[2 * q] = _mm512_unpacklo_epi32(r[2 * q], r[2 * q + 1]);
            t[2 * q + 1] = _mm512_unpackhi_epi32(r[2 * q], r[2 * q + 1]);
        }
        let mut u = [_mm512_setzero_si512(); 16];
        for q in 0..4 {
            let (t0, t1, t2, t3) = (t[4 * q], t[4 * q + 1], t[4 * q + 2], t[4 * q + 3]);
            u[4 * q] = _mm512_unpacklo_epi64(t0, t2);
            u[4 * q + 1] = _mm512_unpackhi_epi64(t0, t2);
            u[4 * q + 2] = _mm512_unpacklo_epi64(t1, t3);
            u[4 * q + 3] = _mm512_unpackhi_epi64(t1, t3);
        }
        // gather chunk k of u[j], u[4 + j], u[8 + j], u[12 + j] into word j + 4k
        let mut m = [_mm512_setzero_si512(); 16];
        for j in 0..4 {
            let x0 = _mm512_shuffle_i32x4::<0x44>(u[j], u[4 + j]);
            let x1 = _mm512_shuffle_i32x4::<0xee>(u[j], u[4 + j]);
            let y0 = _mm512_shuffle_i32x4::<0x44>(u[8 + j], u[12 + j]);
            let y1 = _mm512_shuffle_i32x4::<0xee>(u[8 + j], u[12 + j]);
            m[j] = _mm512_shuffle_i32x4::<0x88>(x0, y0);
            m[j + 4] = _mm512_shuffle_i32x4::<0xdd>(x0, y0);
            m[j + 8] = _mm512_shuffle_i32x4::<0x88>(x1, y1);
            m[j + 12] = _mm512_shuffle_i32x4::<0xdd>(x1, y1);
        }
        m
    }

    /// The 8-lane compress loop in 256-bit registers: loads, transposes, the 64 steps with
    /// the given round functions (`$F`..`$I`, each `(b, c, d) -> __m256i`) and rotate
    /// (`$rol`, `(t, s) -> __m256i`), and the feed-forward. One body for AVX2 and AVX-512VL,
    /// which differ only in those.
    macro_rules! compress8_body {
        ($state:ident, $ptrs:ident, $strides:ident, $n:ident, $F:ident, $G:ident, $H:ident, $I:ident, $rol:ident) => {{
            let mut a = _mm256_loadu_si256($state[0].as_ptr().cast());
            let mut b = _mm256_loadu_si256($state[1].as_ptr().cast());
            let mut c = _mm256_loadu_si256($state[2].as_ptr().cast());
            let mut d = _mm256_loadu_si256($state[3].as_ptr().cast());
            let mut p = *$ptrs;
            for _ in 0..$n {
                let mut lo = [_mm256_setzero_si256(); 8];
                let mut hi = [_mm256_setzero_si256(); 8];
                for i in 0..8 {
                    lo[i] = _mm256_loadu_si256(p[i].cast());
                    hi[i] = _mm256_loadu_si256(p[i].wrapping_add(32).cast());
                    p[i] = p[i].wrapping_add($strides[i]);
                }
                let ml = transpose8(&lo);
                let mh = transpose8(&hi);
                let m: [__m256i; 16] = std::array::from_fn(|w| if w < 8 { ml[w] } else { mh[w - 8] });
                let (a0, b0, c0, d0) = (a, b, c, d);
                macro_rules! step {
                    ($f:ident, $a:ident, $b:ident, $c:ident, $d:ident, $g:expr, $k:expr, $s:expr) => {
                        let t = _mm256_add_epi32($a, _mm256_add_epi32(m[$g], _mm256_set1_epi32($k as u32 as i32)));
                        let t = _mm256_add_epi32(t, $f!($b, $c, $d));
                        $a = _mm256_add_epi32($b, $rol!(t, $s));
                    };
                }
                md5_steps!(step, a, b, c, d);
                a = _mm256_add_epi32(a, a0);
                b = _mm256_add_epi32(b, b0);
                c = _mm256_add_epi32(c, c0);
                d = _mm256_add_epi32(d, d0);
            }
            _mm256_storeu_si256($state[0].as_mut_ptr().cast(), a);
            _mm256_storeu_si256($state[1].as_mut_ptr().cast(), b);
            _mm256_storeu_si256($state[2].as_mut_ptr().cast(), c);
            _mm256_storeu_si256($state[3].as_mut_ptr().cast(), d);
        }};
    }

    /// 8 lanes in AVX2 registers.
    ///
    /// # Safety
    /// The CPU supports AVX2; `ptrs[i] + k * strides[i]` is readable for 64 bytes for every
    /// block `k < n`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn compress8(state: &mut [[u32; 8]; 4], ptrs: &[*const u8; 8], strides: &[usize; 8], n: usize) {
        let ones = _mm256_set1_epi32(-1);
        macro_rules! F {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_xor_si256($d, _mm256_and_si256($b, _mm256_xor_si256($c, $d)))
            };
        }
        macro_rules! G {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_xor_si256($c, _mm256_and_si256($d, _mm256_xor_si256($b, $c)))
            };
        }
        macro_rules! H {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_xor_si256($b, _mm256_xor_si256($c, $d))
            };
        }
        macro_rules! I {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_xor_si256($c, _mm256_or_si256($b, _mm256_xor_si256($d, ones)))
            };
        }
        macro_rules! rol {
            ($t:expr, $s:expr) => {
                _mm256_or_si256(_mm256_slli_epi32::<$s>($t), _mm256_srli_epi32::<{ 32 - $s }>($t))
            };
        }
        compress8_body!(state, ptrs, strides, n, F, G, H, I, rol)
    }

    /// 8 lanes in 256-bit registers with AVX-512VL ternary logic and rotates.
    ///
    /// # Safety
    /// The CPU supports AVX-512F and AVX-512VL; `ptrs[i] + k * strides[i]` is readable for 64
    /// bytes for every block `k < n`.
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    pub unsafe fn compress8_vl(state: &mut [[u32; 8]; 4], ptrs: &[*const u8; 8], strides: &[usize; 8], n: usize) {
        // truth tables as in compress16
        macro_rules! F {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_ternarylogic_epi32::<0xca>($b, $c, $d)
            };
        }
        macro_rules! G {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_ternarylogic_epi32::<0xe4>($b, $c, $d)
            };
        }
        macro_rules! H {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_ternarylogic_epi32::<0x96>($b, $c, $d)
            };
        }
        macro_rules! I {
            ($b:expr, $c:expr, $d:expr) => {
                _mm256_ternarylogic_epi32::<0x39>($b, $c, $d)
            };
        }
        macro_rules! rol {
            ($t:expr, $s:expr) => {
                _mm256_rol_epi32::<$s>($t)
            };
        }
        compress8_body!(state, ptrs, strides, n, F, G, H, I, rol)
    }

    /// 8x8 words: row `i` = 8 words of lane `i` -> vector `w` = word `w` of every lane.
    #[target_feature(enable = "avx2")]
    fn transpose8(r: &[__m256i; 8]) -> [__m256i; 8] {
        let mut t = [_mm256_setzero_si256(); 8];
        for q in 0..4 {
            t[2 * q] = _mm256_unpacklo_epi32(r[2 * q], r[2 * q + 1]);
            t[2 * q + 1] = _mm256_unpackhi_epi32(r[2 * q], r[2 * q + 1]);
        }
        // u[4h + j]: word j (low 128 bits) and j + 4 (high) of rows 4h..4h+3
        let mut u = [_mm256_setzero_si256(); 8];
        for h in 0..2 {
            let (t0, t1, t2, t3) = (t[4 * h], t[4 * h + 1], t[4 * h + 2], t[4 * h + 3]);
            u[4 * h] = _mm256_unpacklo_epi64(t0, t2);
            u[4 * h + 1] = _mm256_unpackhi_epi64(t0, t2);
            u[4 * h + 2] = _mm256_unpacklo_epi64(t1, t3);
            u[4 * h + 3] = _mm256_unpackhi_epi64(t1, t3);
        }
        let mut m = [_mm256_setzero_si256(); 8];
        for j in 0..4 {
            m[j] = _mm256_permute2x128_si256::<0x20>(u[j], u[4 + j]);
            m[j + 4] = _mm256_permute2x128_si256::<0x31>(u[j], u[4 + j]);
        }
        m
    }
}
