//! HFQ4G256, hipfire's 4-bit group format: per group of 256 weights an f32 scale, an f32 minimum,
//! then 128 bytes of nibbles, low nibble first (byte b holds weight 2b in bits 0..3 and weight
//! 2b+1 in bits 4..7); weight = q * scale + min. A row of K weights is K/256 groups back to back.

use anyhow::{bail, Result};

pub const GROUP: usize = 256;
pub const GROUP_BYTES: usize = 136;

pub fn check_k(k: usize) -> Result<()> {
    if k == 0 || !k.is_multiple_of(GROUP) {
        bail!("HFQ4G256 needs K to be a positive multiple of 256, got {k}");
    }
    Ok(())
}

pub fn row_bytes(k: usize) -> usize {
    k / GROUP * GROUP_BYTES
}

/// Write one group: `q` holds 256 levels in 0..=15.
pub fn pack_group(q: &[u8], scale: f32, min: f32, out: &mut [u8]) {
    assert_eq!(q.len(), GROUP);
    assert_eq!(out.len(), GROUP_BYTES);
    out[0..4].copy_from_slice(&scale.to_le_bytes());
    out[4..8].copy_from_slice(&min.to_le_bytes());
    for b in 0..GROUP / 2 {
        debug_assert!(q[2 * b] < 16 && q[2 * b + 1] < 16);
        out[8 + b] = (q[2 * b] & 0x0F) | ((q[2 * b + 1] & 0x0F) << 4);
    }
}

/// Read one group back: (scale, min, levels).
pub fn unpack_group(g: &[u8]) -> (f32, f32, [u8; GROUP]) {
    assert_eq!(g.len(), GROUP_BYTES);
    let scale = f32::from_le_bytes(g[0..4].try_into().unwrap());
    let min = f32::from_le_bytes(g[4..8].try_into().unwrap());
    let mut q = [0u8; GROUP];
    for b in 0..GROUP / 2 {
        q[2 * b] = g[8 + b] & 0x0F;
        q[2 * b + 1] = g[8 + b] >> 4;
    }
    (scale, min, q)
}

/// Quantise rows of f32 weights with a min/max affine map per group (16 levels).
pub fn quantize(w: &[f32], n: usize, k: usize) -> Result<Vec<u8>> {
    check_k(k)?;
    if w.len() != n * k {
        bail!("quantize: {} weights for a {n}x{k} matrix", w.len());
    }
    let rb = row_bytes(k);
    let mut out = vec![0u8; n * rb];
    let mut q = [0u8; GROUP];
    for r in 0..n {
        for g in 0..k / GROUP {
            let src = &w[r * k + g * GROUP..r * k + (g + 1) * GROUP];
            let lo = src.iter().cloned().fold(f32::INFINITY, f32::min);
            let hi = src.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let scale = if hi > lo { (hi - lo) / 15.0 } else { 1.0 };
            for (i, v) in src.iter().enumerate() {
                q[i] = (((v - lo) / scale).round()).clamp(0.0, 15.0) as u8;
            }
            let off = r * rb + g * GROUP_BYTES;
            pack_group(&q, scale, lo, &mut out[off..off + GROUP_BYTES]);
        }
    }
    Ok(out)
}

/// Dequantise one row into f32.
pub fn dequant_row(w: &[u8], k: usize, row: usize) -> Vec<f32> {
    let rb = row_bytes(k);
    let mut out = Vec::with_capacity(k);
    for g in 0..k / GROUP {
        let off = row * rb + g * GROUP_BYTES;
        let (s, m, q) = unpack_group(&w[off..off + GROUP_BYTES]);
        out.extend(q.iter().map(|&q| q as f32 * s + m));
    }
    out
}
