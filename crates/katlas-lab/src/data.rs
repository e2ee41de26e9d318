//! Deterministic inputs that vary along every dimension: every row, column, group, head and
//! position gets its own values, never zero, never constant, never repeated across rows.

use crate::quant::{pack_group, row_bytes, GROUP, GROUP_BYTES};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// Nonzero values in about [-1, 1] with a slow drift along the index.
pub fn vec_f32(len: usize, seed: u64, stream: u64) -> Vec<f32> {
    let mut r = rng(seed, stream);
    (0..len)
        .map(|i| {
            let v: f32 = r.random_range(-1.0f32..1.0) + 0.1 * ((i as f32) * 0.013).sin();
            if v.abs() < 1e-3 {
                0.01 + v
            } else {
                v
            }
        })
        .collect()
}

/// A random HFQ4G256 matrix: random levels, scale and minimum different in every group and row.
pub fn hfq4_matrix(n: usize, k: usize, seed: u64, stream: u64) -> Vec<u8> {
    let rb = row_bytes(k);
    let mut out = vec![0u8; n * rb];
    let mut r = rng(seed, stream);
    let mut q = [0u8; GROUP];
    for row in 0..n {
        let row_f = 1.0 + 0.05 * (row % 13) as f32;
        for g in 0..k / GROUP {
            for v in q.iter_mut() {
                *v = r.random_range(0..16u8);
            }
            let scale = (0.004 + 0.004 * r.random::<f32>()) * row_f;
            let min = -scale * (7.0 + r.random::<f32>());
            let off = row * rb + g * GROUP_BYTES;
            pack_group(&q, scale, min, &mut out[off..off + GROUP_BYTES]);
        }
    }
    out
}

/// bf16 bits of values in about [-1, 1] scaled per row.
pub fn bf16_matrix(n: usize, k: usize, seed: u64, stream: u64) -> Vec<u16> {
    let mut r = rng(seed, stream);
    let mut out = Vec::with_capacity(n * k);
    for row in 0..n {
        let f = 0.02 * (1.0 + 0.1 * (row % 7) as f32);
        for _ in 0..k {
            let v: f32 = r.random_range(-1.0f32..1.0);
            let v = if v.abs() < 1e-3 { 0.01 } else { v };
            out.push(half::bf16::from_f32(v * f).to_bits());
        }
    }
    out
}

/// f16 bits of values in about [-1, 1].
pub fn f16_vec(len: usize, seed: u64, stream: u64) -> Vec<u16> {
    vec_f32(len, seed, stream).into_iter().map(|v| half::f16::from_f32(v).to_bits()).collect()
}

pub fn bf16_to_f32(b: u16) -> f32 {
    half::bf16::from_bits(b).to_f32()
}
pub fn f16_to_f32(b: u16) -> f32 {
    half::f16::from_bits(b).to_f32()
}
