//! CPU references. `oracle_*` are the checks' ground truth: plain f64 arithmetic on the exact
//! dequantised inputs, one weight at a time. `cpu_*` are the CPU backend's kernels: f32
//! arithmetic shaped like the GPU kernels (group sums factored out), scalar or across threads.

use crate::data::{bf16_to_f32, f16_to_f32};
use crate::quant::{row_bytes, unpack_group, GROUP, GROUP_BYTES};
use rayon::prelude::*;

pub const ATT_D: usize = 128;

fn rows_map<F: Fn(usize) -> f64 + Sync + Send>(n: usize, f: F) -> Vec<f64> {
    (0..n).into_par_iter().map(f).collect()
}

pub fn oracle_gemv_hfq4(w: &[u8], x: &[f32], n: usize, k: usize) -> Vec<f64> {
    let rb = row_bytes(k);
    rows_map(n, |r| {
        let mut acc = 0.0f64;
        for g in 0..k / GROUP {
            let off = r * rb + g * GROUP_BYTES;
            let (s, m, q) = unpack_group(&w[off..off + GROUP_BYTES]);
            for i in 0..GROUP {
                let wv = q[i] as f64 * s as f64 + m as f64;
                acc += wv * x[g * GROUP + i] as f64;
            }
        }
        acc
    })
}

pub fn oracle_gemv_bf16(w: &[u16], x: &[f32], n: usize, k: usize) -> Vec<f64> {
    rows_map(n, |r| (0..k).map(|c| bf16_to_f32(w[r * k + c]) as f64 * x[c] as f64).sum())
}

fn silu(g: f64) -> f64 {
    g / (1.0 + (-g).exp())
}

pub fn oracle_swiglu(wg: &[u8], wu: &[u8], x: &[f32], n: usize, k: usize) -> Vec<f64> {
    let g = oracle_gemv_hfq4(wg, x, n, k);
    let u = oracle_gemv_hfq4(wu, x, n, k);
    g.iter().zip(&u).map(|(g, u)| silu(*g) * u).collect()
}

pub fn oracle_rmsnorm(x: &[f32], w: &[f32], rows: usize, d: usize, eps: f32) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows * d);
    for r in 0..rows {
        let xr = &x[r * d..(r + 1) * d];
        let ms: f64 = xr.iter().map(|v| (*v as f64) * (*v as f64)).sum::<f64>() / d as f64;
        let inv = 1.0 / (ms + eps as f64).sqrt();
        out.extend(xr.iter().zip(w).map(|(v, w)| *v as f64 * inv * *w as f64));
    }
    out
}

pub fn rope_angle(pos: usize, i: usize, d: usize, theta: f64) -> f64 {
    pos as f64 * theta.powf(-(2.0 * i as f64) / d as f64)
}

pub fn oracle_rope(v: &[f32], heads: usize, d: usize, pos: usize, theta: f64) -> Vec<f64> {
    let half = d / 2;
    let mut out = vec![0.0f64; heads * d];
    for h in 0..heads {
        for i in 0..half {
            let (s, c) = rope_angle(pos, i, d, theta).sin_cos();
            let a = v[h * d + i] as f64;
            let b = v[h * d + i + half] as f64;
            out[h * d + i] = a * c - b * s;
            out[h * d + i + half] = b * c + a * s;
        }
    }
    out
}

/// q: [h][128], kc/vc: [s][hkv][128] f16 bits.
pub fn oracle_attn(q: &[f32], kc: &[u16], vc: &[u16], h: usize, hkv: usize, s: usize) -> Vec<f64> {
    let scale = 1.0 / (ATT_D as f64).sqrt();
    let grp = h / hkv;
    let per_head: Vec<Vec<f64>> = (0..h)
        .into_par_iter()
        .map(|hh| {
            let kvh = hh / grp;
            let scores: Vec<f64> = (0..s)
                .map(|p| {
                    let base = (p * hkv + kvh) * ATT_D;
                    (0..ATT_D).map(|d| q[hh * ATT_D + d] as f64 * f16_to_f32(kc[base + d]) as f64).sum::<f64>() * scale
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|v| (v - m).exp()).collect();
            let l: f64 = e.iter().sum();
            (0..ATT_D).map(|d| (0..s).map(|p| e[p] * f16_to_f32(vc[(p * hkv + kvh) * ATT_D + d]) as f64).sum::<f64>() / l).collect()
        })
        .collect();
    per_head.into_iter().flatten().collect()
}

/// f32, group-factored like the GPU kernels: y = sum_g scale_g * sum(q x) + min_g * sum(x).
fn hfq4_row_f32(w: &[u8], x: &[f32], k: usize, r: usize) -> f32 {
    let rb = row_bytes(k);
    let mut acc = 0.0f32;
    for g in 0..k / GROUP {
        let off = r * rb + g * GROUP_BYTES;
        let s = f32::from_le_bytes(w[off..off + 4].try_into().unwrap());
        let m = f32::from_le_bytes(w[off + 4..off + 8].try_into().unwrap());
        let xs = &x[g * GROUP..(g + 1) * GROUP];
        let (mut dq, mut sx) = (0.0f32, 0.0f32);
        for b in 0..GROUP / 2 {
            let byte = w[off + 8 + b];
            dq += (byte & 0x0F) as f32 * xs[2 * b] + (byte >> 4) as f32 * xs[2 * b + 1];
            sx += xs[2 * b] + xs[2 * b + 1];
        }
        acc += s * dq + m * sx;
    }
    acc
}

/// Four rows per pass, one thread: each activation group is read once for the four rows, its
/// sum once for the whole GEMV (`xsum`), and the four row sums are independent chains, where
/// the scalar row is one dependent chain of adds (the CPU's form of the multi-row GEMV lever).
fn hfq4_rows4_f32(w: &[u8], x: &[f32], xsum: &[f32], k: usize, r0: usize) -> [f32; 4] {
    let rb = row_bytes(k);
    let mut acc = [0.0f32; 4];
    for g in 0..k / GROUP {
        let (xs, sx) = (&x[g * GROUP..(g + 1) * GROUP], xsum[g]);
        let q = |j: usize| &w[(r0 + j) * rb + g * GROUP_BYTES + 8..][..GROUP / 2];
        // Four named sums advance together, so no add waits on the previous one (written out
        // rather than as a loop over rows, so the independence does not depend on unrolling;
        // zipped, so no index needs a bounds check).
        let (mut d0, mut d1, mut d2, mut d3) = (0.0f32, 0.0f32, 0.0f32, 0.0f32);
        let dot = |byte: u8, x: &[f32]| (byte & 0x0F) as f32 * x[0] + (byte >> 4) as f32 * x[1];
        for (((x, &b0), &b1), (&b2, &b3)) in xs.chunks_exact(2).zip(q(0)).zip(q(1)).zip(q(2).iter().zip(q(3))) {
            d0 += dot(b0, x);
            d1 += dot(b1, x);
            d2 += dot(b2, x);
            d3 += dot(b3, x);
        }
        let dq = [d0, d1, d2, d3];
        for (j, a) in acc.iter_mut().enumerate() {
            let off = (r0 + j) * rb + g * GROUP_BYTES;
            let s = f32::from_le_bytes(w[off..off + 4].try_into().unwrap());
            let m = f32::from_le_bytes(w[off + 4..off + 8].try_into().unwrap());
            *a += s * dq[j] + m * sx;
        }
    }
    acc
}

/// How the CPU backend walks the rows of a GEMV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuMode {
    Scalar,
    Par,
    Rows4,
}

fn map_rows<F: Fn(usize) -> f32 + Sync + Send>(n: usize, par: bool, f: F) -> Vec<f32> {
    if par {
        (0..n).into_par_iter().map(f).collect()
    } else {
        (0..n).map(f).collect()
    }
}

pub fn cpu_gemv_hfq4(w: &[u8], x: &[f32], res: Option<&[f32]>, n: usize, k: usize, mode: CpuMode) -> Vec<f32> {
    let res_of = |r: usize| res.map_or(0.0, |v| v[r]);
    if mode != CpuMode::Rows4 {
        return map_rows(n, mode == CpuMode::Par, |r| hfq4_row_f32(w, x, k, r) + res_of(r));
    }
    let xsum: Vec<f32> = x[..k].chunks_exact(GROUP).map(|g| g.iter().sum()).collect();
    let mut out = Vec::with_capacity(n);
    let mut r = 0;
    while r + 4 <= n {
        out.extend(hfq4_rows4_f32(w, x, &xsum, k, r).iter().enumerate().map(|(j, y)| y + res_of(r + j)));
        r += 4;
    }
    out.extend((r..n).map(|r| hfq4_row_f32(w, x, k, r) + res_of(r)));
    out
}

pub fn cpu_gemv_bf16(w: &[u16], x: &[f32], n: usize, k: usize, par: bool) -> Vec<f32> {
    map_rows(n, par, |r| w[r * k..(r + 1) * k].iter().zip(x).map(|(w, x)| bf16_to_f32(*w) * x).sum())
}

pub fn cpu_swiglu(wg: &[u8], wu: &[u8], x: &[f32], n: usize, k: usize, par: bool) -> Vec<f32> {
    map_rows(n, par, |r| {
        let g = hfq4_row_f32(wg, x, k, r);
        let u = hfq4_row_f32(wu, x, k, r);
        g / (1.0 + (-g).exp()) * u
    })
}

pub fn cpu_rmsnorm(x: &[f32], w: &[f32], rows: usize, d: usize, eps: f32) -> Vec<f32> {
    let mut out = Vec::with_capacity(rows * d);
    for r in 0..rows {
        let xr = &x[r * d..(r + 1) * d];
        let inv = 1.0 / (xr.iter().map(|v| v * v).sum::<f32>() / d as f32 + eps).sqrt();
        out.extend(xr.iter().zip(w).map(|(v, w)| v * inv * w));
    }
    out
}

pub fn cpu_rope(v: &[f32], heads: usize, d: usize, pos: usize, theta: f32) -> Vec<f32> {
    let half = d / 2;
    let mut out = vec![0.0f32; heads * d];
    for i in 0..half {
        let inv_freq = (-(2.0 * i as f32 / d as f32) * theta.log2()).exp2();
        let (s, c) = (pos as f32 * inv_freq).sin_cos();
        for h in 0..heads {
            let a = v[h * d + i];
            let b = v[h * d + i + half];
            out[h * d + i] = a * c - b * s;
            out[h * d + i + half] = b * c + a * s;
        }
    }
    out
}

pub fn cpu_attn(q: &[f32], kc: &[u16], vc: &[u16], h: usize, hkv: usize, s: usize, par: bool) -> Vec<f32> {
    let scale = 1.0 / (ATT_D as f32).sqrt();
    let grp = h / hkv;
    let head = |hh: usize| -> Vec<f32> {
        let kvh = hh / grp;
        let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
        let mut acc = vec![0.0f32; ATT_D];
        for p in 0..s {
            let base = (p * hkv + kvh) * ATT_D;
            let sc: f32 = (0..ATT_D).map(|d| q[hh * ATT_D + d] * f16_to_f32(kc[base + d])).sum::<f32>() * scale;
            let mn = m.max(sc);
            let corr = (m - mn).exp();
            let e = (sc - mn).exp();
            l = l * corr + e;
            for d in 0..ATT_D {
                acc[d] = acc[d] * corr + e * f16_to_f32(vc[base + d]);
            }
            m = mn;
        }
        acc.iter().map(|a| a / l).collect()
    };
    let heads: Vec<Vec<f32>> = if par { (0..h).into_par_iter().map(head).collect() } else { (0..h).map(head).collect() };
    heads.into_iter().flatten().collect()
}
