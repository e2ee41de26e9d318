//! The lab's kernel registry: families (one operation each), their variants (one set of levers
//! each), the shapes they run at, and the bytes and flops one call must move and do.

use anyhow::{bail, Result};
use std::fmt;

/// Kernel sources, embedded so the binary carries exactly what it compiles.
pub const SOURCES: &[(&str, &str)] = &[
    ("gemv_hfq4.cu", include_str!("../../../lab/kernels/gemv_hfq4.cu")),
    ("gemv_hfq4.sm_90.cu", include_str!("../../../lab/kernels/gemv_hfq4.sm_90.cu")),
    ("gemv_bf16.cu", include_str!("../../../lab/kernels/gemv_bf16.cu")),
    ("swiglu_hfq4.cu", include_str!("../../../lab/kernels/swiglu_hfq4.cu")),
    ("rmsnorm.cu", include_str!("../../../lab/kernels/rmsnorm.cu")),
    ("rope.cu", include_str!("../../../lab/kernels/rope.cu")),
    ("attn_decode.cu", include_str!("../../../lab/kernels/attn_decode.cu")),
    ("util.cu", include_str!("../../../lab/kernels/util.cu")),
];
/// Headers the sources include, handed to NVRTC by name.
pub const HEADERS: &[(&str, &str)] =
    &[("lab_cuda.h", include_str!("../../../lab/kernels/lab_cuda.h")), ("hfq4_common.h", include_str!("../../../lab/kernels/hfq4_common.h"))];

/// The arch a source file is tagged for (`name.sm_90.cu` → `sm_90`), if any (katlas-arch's
/// tag convention, the one build and provenance read).
pub fn file_arch(file: &str) -> Option<&str> {
    file.ends_with(".cu").then(|| katlas_arch::FileTag::parse(file)).flatten()?.arch
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    GemvHfq4,
    GemvHfq4Res,
    GemvBf16,
    SwigluHfq4,
    Rmsnorm,
    Rope,
    AttnDecode,
}

impl Family {
    pub const ALL: [Family; 7] =
        [Family::GemvHfq4, Family::GemvHfq4Res, Family::GemvBf16, Family::SwigluHfq4, Family::Rmsnorm, Family::Rope, Family::AttnDecode];
    pub fn name(self) -> &'static str {
        match self {
            Family::GemvHfq4 => "gemv_hfq4g256",
            Family::GemvHfq4Res => "gemv_hfq4g256_res",
            Family::GemvBf16 => "gemv_bf16",
            Family::SwigluHfq4 => "swiglu_hfq4g256",
            Family::Rmsnorm => "rmsnorm",
            Family::Rope => "rope",
            Family::AttnDecode => "attn_decode",
        }
    }
    /// What the two numbers of a shape mean.
    pub fn shape_doc(self) -> &'static str {
        match self {
            Family::GemvHfq4 | Family::GemvHfq4Res | Family::GemvBf16 | Family::SwigluHfq4 => "N x K (output rows x input length)",
            Family::Rmsnorm => "rows x dim",
            Family::Rope => "heads x head_dim",
            Family::AttnDecode => "seq_len x q_heads (kv_heads = q_heads/4, head_dim 128)",
        }
    }
    pub fn quant(self) -> Option<&'static str> {
        match self {
            Family::GemvHfq4 | Family::GemvHfq4Res | Family::SwigluHfq4 => Some("hfq4g256"),
            Family::GemvBf16 => Some("bf16"),
            Family::AttnDecode => Some("f16kv"),
            _ => None,
        }
    }
    pub fn default_shapes(self, gpu: bool) -> Vec<Shape> {
        let s = |a, b| Shape { a, b };
        if gpu {
            match self {
                Family::GemvHfq4 => vec![s(4096, 4096), s(14336, 4096), s(4096, 14336), s(8192, 8192), s(28672, 8192)],
                Family::GemvHfq4Res => vec![s(4096, 4096), s(4096, 14336), s(8192, 28672)],
                Family::GemvBf16 => vec![s(4096, 4096), s(14336, 4096), s(4096, 14336), s(8192, 8192), s(28672, 8192)],
                Family::SwigluHfq4 => vec![s(14336, 4096), s(28672, 8192)],
                Family::Rmsnorm => vec![s(1, 4096), s(1, 8192), s(64, 8192)],
                Family::Rope => vec![s(32, 128), s(64, 128)],
                Family::AttnDecode => vec![s(4096, 32), s(8192, 32), s(28672, 64)],
            }
        } else {
            match self {
                Family::GemvHfq4 | Family::GemvHfq4Res | Family::GemvBf16 => {
                    vec![s(1024, 4096), s(4096, 4096)]
                }
                Family::SwigluHfq4 => vec![s(1024, 4096)],
                Family::Rmsnorm => vec![s(1, 4096), s(64, 4096)],
                Family::Rope => vec![s(32, 128)],
                Family::AttnDecode => vec![s(1024, 32)],
            }
        }
    }
    pub fn validate(self, sh: Shape) -> Result<()> {
        let ok = match self {
            Family::GemvHfq4 | Family::GemvHfq4Res | Family::SwigluHfq4 => sh.a > 0 && sh.b.is_multiple_of(512) && sh.b > 0,
            Family::GemvBf16 => sh.a > 0 && sh.b.is_multiple_of(256) && sh.b > 0,
            Family::Rmsnorm => sh.a > 0 && sh.b.is_multiple_of(4) && sh.b > 0 && sh.b <= 8192,
            Family::Rope => sh.a > 0 && sh.b.is_multiple_of(2) && sh.b > 0,
            Family::AttnDecode => sh.a > 0 && sh.b.is_multiple_of(4) && sh.b > 0,
        };
        if !ok {
            bail!("shape {sh} does not fit {} ({}): K must be a multiple of 512 for 4-bit, 256 for bf16; rmsnorm dim a multiple of 4 up to 8192; attention heads a multiple of 4", self.name(), self.shape_doc());
        }
        Ok(())
    }
    /// Bytes one call must move at least (each input read once, each output written once).
    pub fn bytes(self, sh: Shape) -> f64 {
        let (a, b) = (sh.a as f64, sh.b as f64);
        match self {
            Family::GemvHfq4 => a * (b / 256.0) * 136.0 + b * 4.0 + a * 4.0,
            Family::GemvHfq4Res => a * (b / 256.0) * 136.0 + b * 4.0 + a * 8.0,
            Family::GemvBf16 => a * b * 2.0 + b * 4.0 + a * 4.0,
            Family::SwigluHfq4 => 2.0 * a * (b / 256.0) * 136.0 + b * 4.0 + a * 4.0,
            Family::Rmsnorm => a * b * 8.0 + b * 4.0,
            Family::Rope => a * b * 8.0,
            Family::AttnDecode => {
                let (s, h) = (a, b);
                2.0 * s * (h / 4.0) * 128.0 * 2.0 + 2.0 * h * 128.0 * 4.0
            }
        }
    }
    pub fn flops(self, sh: Shape) -> f64 {
        let (a, b) = (sh.a as f64, sh.b as f64);
        match self {
            Family::GemvHfq4 | Family::GemvHfq4Res | Family::GemvBf16 => 2.0 * a * b,
            Family::SwigluHfq4 => 4.0 * a * b,
            Family::Rmsnorm => 3.0 * a * b,
            Family::Rope => 3.0 * a * b,
            Family::AttnDecode => 4.0 * a * b * 128.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shape {
    pub a: usize,
    pub b: usize,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.a, self.b)
    }
}

impl std::str::FromStr for Shape {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let (a, b) = s.split_once('x').ok_or_else(|| anyhow::anyhow!("shape `{s}`: expected AxB, e.g. 4096x4096"))?;
        let p = |v: &str| v.trim().parse::<usize>().map_err(|e| anyhow::anyhow!("shape `{s}`: `{v}` is not a size: {e}"));
        Ok(Shape { a: p(a)?, b: p(b)? })
    }
}

/// Arithmetic of a variant, which decides its error bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Math {
    F32,
    H2,
    /// x quantised to int8 per 256-group, integer dot products (dp4a).
    Q8,
}

/// One CUDA kernel variant: which function, how it is launched, which levers it embodies.
#[derive(Debug, Clone, Copy)]
pub struct Variant {
    pub family: Family,
    pub name: &'static str,
    pub file: &'static str,
    pub func: &'static str,
    /// Rows per warp.
    pub r: u32,
    /// Warps per block.
    pub wpb: u32,
    /// Warps splitting one row set's K.
    pub sk: u32,
    pub math: Math,
    pub form: Form,
    pub levers: &'static str,
}

/// How a variant's function is instantiated and launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// One function for every shape; a block takes [`Variant::rows_per_block`] rows.
    Rows,
    /// x resident in registers: one instantiation per K (`{func}_g{gpw}w{wpb}`, groups per
    /// warp x warps per block, from `splits`), rows walked in `rt`-row tiles.
    XResident { splits: &'static [(usize, usize)], grid: Grid },
}

/// The grid of an x-resident variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grid {
    /// One block per row tile, sized to about two blocks per SM of [`TILE_BOARD`].
    Tiles,
    /// As `Tiles`, with the block stride (`nblk`, here the tile count) passed after `rt`.
    Strided,
    /// As many blocks as fit at once, each walking `tile`-row tiles (`nblk` after `rt`);
    /// `balanced`: the fewest blocks that still finish in the same number of tile rounds.
    Persistent { tile: u32, balanced: bool },
}

const ROWS: Form = Form::Rows;
const XR: Form = Form::XResident { splits: XR_SPLITS, grid: Grid::Tiles };
const XR_STRIDED: Form = Form::XResident { splits: XR_SPLITS, grid: Grid::Strided };
const fn xr_persistent(tile: u32, balanced: bool) -> Form {
    Form::XResident { splits: XR_SPLITS, grid: Grid::Persistent { tile, balanced } }
}
/// The 8-byte-load kernels: their own splits (an even number of groups per warp).
const fn x8_persistent(tile: u32, balanced: bool) -> Form {
    Form::XResident { splits: X8_SPLITS, grid: Grid::Persistent { tile, balanced } }
}

/// The board non-persistent row tiles are sized for (katlas-arch's SM count of it).
pub const TILE_BOARD: &str = "NVIDIA H200";

impl Variant {
    pub fn arch(&self) -> Option<&'static str> {
        file_arch(self.file)
    }
    /// Rows handled by one block.
    pub fn rows_per_block(&self) -> u32 {
        self.wpb / self.sk * self.r
    }
    /// x-resident kernels come in one instantiation per K (groups per warp x warps per block).
    pub fn is_xr(&self) -> bool {
        matches!(self.form, Form::XResident { .. })
    }
    fn grid(&self) -> Option<Grid> {
        match self.form {
            Form::XResident { grid, .. } => Some(grid),
            Form::Rows => None,
        }
    }
    /// Row-tile kernels that take a block stride (`nblk`) after `rt`.
    pub fn takes_nblk(&self) -> bool {
        matches!(self.grid(), Some(Grid::Strided | Grid::Persistent { .. }))
    }
    /// Persistent launch: as many blocks as fit at once, each walking row tiles.
    pub fn persistent(&self) -> bool {
        matches!(self.grid(), Some(Grid::Persistent { .. }))
    }
    /// Balanced persistent grid: the fewest blocks that still finish in the same number of tile
    /// rounds, so every block walks the same number of tiles.
    pub fn balanced(&self) -> bool {
        matches!(self.grid(), Some(Grid::Persistent { balanced: true, .. }))
    }
    /// The function to launch at this shape, its warps per block, and (x-resident) rows per block.
    pub fn resolve(&self, sh: Shape) -> Result<(String, u32, Option<u32>)> {
        let Form::XResident { splits, grid } = self.form else {
            return Ok((self.func.to_string(), self.wpb, None));
        };
        let g = sh.b / 256;
        let (gpw, wpb) = splits.iter().copied().find(|(gpw, wpb)| gpw * wpb == g).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: no x-resident instantiation for K={} (have K = 256*{:?})",
                self.func,
                sh.b,
                splits.iter().map(|(a, b)| a * b).collect::<Vec<_>>()
            )
        })?;
        let rt = match grid {
            Grid::Persistent { tile, .. } => tile as usize,
            // About two blocks per SM; a multiple of the rows in flight (<= 16).
            Grid::Tiles | Grid::Strided => {
                let sms = katlas_arch::ArchDb::builtin()
                    .product(TILE_BOARD)
                    .map(|p| p.units.value as usize)
                    .ok_or_else(|| anyhow::anyhow!("katlas-arch has no {TILE_BOARD}: cannot size {}'s row tiles", self.func))?;
                (sh.a.div_ceil(2 * sms)).div_ceil(16).clamp(1, 4) * 16
            }
        };
        Ok((format!("{}_g{gpw}w{wpb}", self.func), wpb as u32, Some(rt as u32)))
    }
    pub fn tolerance(&self) -> f64 {
        tolerance(self.family, self.math)
    }
}

/// Elementwise relative bound (against max(|ref|, rms(ref))) for a family and arithmetic.
pub fn tolerance(f: Family, m: Math) -> f64 {
    match (f, m) {
        (Family::GemvHfq4 | Family::GemvHfq4Res, Math::F32) => 2e-4,
        (Family::GemvHfq4 | Family::GemvHfq4Res, Math::H2) => 1e-2,
        // int8 x (per-group max/127) carries ~4e-3 relative error per element into every dot product.
        (Family::GemvHfq4 | Family::GemvHfq4Res, Math::Q8) => 3e-2,
        (Family::SwigluHfq4, Math::F32) => 2e-4,
        (Family::SwigluHfq4, Math::H2 | Math::Q8) => 2e-2,
        (Family::GemvBf16, _) => 2e-4,
        (Family::Rmsnorm, _) => 1e-4,
        // f32 angles at position ~4096 carry ~3e-3 rad of rounding (pos * exp2(f32)); the table variant is exact.
        (Family::Rope, _) => 1e-2,
        (Family::AttnDecode, _) => 1e-3,
    }
}

macro_rules! v {
    ($fam:ident, $name:literal, $file:literal, $func:literal, $r:expr, $wpb:expr, $sk:expr, $math:ident, $form:expr, $lev:literal) => {
        Variant { family: Family::$fam, name: $name, file: $file, func: $func, r: $r, wpb: $wpb, sk: $sk, math: Math::$math, form: $form, levers: $lev }
    };
}

pub const VARIANTS: &[Variant] = &[
    v!(GemvHfq4, "r1", "gemv_hfq4.cu", "gemv_hfq4g256_r1", 1, 4, 1, F32, ROWS, "baseline: 1 row/warp, 4-byte loads, f32 dequant, 4 groups of loads in flight"),
    v!(GemvHfq4, "r2", "gemv_hfq4.cu", "gemv_hfq4g256_r2", 2, 4, 1, F32, ROWS, "multi-row R=2"),
    v!(GemvHfq4, "r4", "gemv_hfq4.cu", "gemv_hfq4g256_r4", 4, 4, 1, F32, ROWS, "multi-row R=4"),
    v!(GemvHfq4, "r8", "gemv_hfq4.cu", "gemv_hfq4g256_r8", 8, 4, 1, F32, ROWS, "multi-row R=8"),
    v!(GemvHfq4, "r1_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r1_h2", 1, 4, 1, H2, ROWS, "f16x2 dequant"),
    v!(GemvHfq4, "r2_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r2_h2", 2, 4, 1, H2, ROWS, "multi-row R=2, f16x2 dequant"),
    v!(GemvHfq4, "r4_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r4_h2", 4, 4, 1, H2, ROWS, "multi-row R=4, f16x2 dequant"),
    v!(GemvHfq4, "r8_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r8_h2", 8, 4, 1, H2, ROWS, "multi-row R=8, f16x2 dequant"),
    v!(GemvHfq4, "r2_v8_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r2_v8_h2", 2, 4, 1, H2, ROWS, "8-byte loads, R=2, f16x2"),
    v!(GemvHfq4, "r4_v8_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r4_v8_h2", 4, 4, 1, H2, ROWS, "8-byte loads, R=4, f16x2"),
    v!(GemvHfq4, "r1_v16_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r1_v16_h2", 1, 4, 1, H2, ROWS, "16-byte loads over 272-byte group pairs, f16x2"),
    v!(GemvHfq4, "r2_v16_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r2_v16_h2", 2, 4, 1, H2, ROWS, "16-byte loads, R=2, f16x2"),
    v!(GemvHfq4, "r2_v16", "gemv_hfq4.cu", "gemv_hfq4g256_r2_v16", 2, 4, 1, F32, ROWS, "16-byte loads, R=2, f32"),
    v!(GemvHfq4, "r2_pf_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r2_pf_h2", 2, 4, 1, H2, ROWS, "register double-buffered prefetch, R=2, f16x2"),
    v!(GemvHfq4, "r4_pf_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r4_pf_h2", 4, 4, 1, H2, ROWS, "register double-buffered prefetch, R=4, f16x2"),
    v!(GemvHfq4, "r1_sk4", "gemv_hfq4.cu", "gemv_hfq4g256_r1_sk4", 1, 8, 4, F32, ROWS, "split-K over 4 warps"),
    v!(GemvHfq4, "r2_sk2_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r2_sk2_h2", 2, 8, 2, H2, ROWS, "split-K over 2 warps, R=2, f16x2"),
    v!(GemvHfq4, "r4_sk2_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r4_sk2_h2", 4, 8, 2, H2, ROWS, "split-K over 2 warps, R=4, f16x2"),
    v!(GemvHfq4, "r1_u8_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r1_u8_h2", 1, 4, 1, H2, ROWS, "8 groups of loads in flight, f16x2"),
    v!(GemvHfq4, "r2_u8_h2", "gemv_hfq4.cu", "gemv_hfq4g256_r2_u8_h2", 2, 4, 1, H2, ROWS, "8 groups of loads in flight, R=2, f16x2"),
    v!(GemvHfq4, "xr", "gemv_hfq4.cu", "gemv_hfq4g256_xr", 1, 8, 1, F32, XR, "x resident in registers: warps own K slices, rows streamed, f32 dequant"),
    v!(GemvHfq4, "xr_h2", "gemv_hfq4.cu", "gemv_hfq4g256_xrh", 1, 8, 1, H2, XR, "x resident in registers (f16x2), warps own K slices, rows streamed"),
    v!(GemvHfq4, "xr_h2_u", "gemv_hfq4.cu", "gemv_hfq4g256_xrhu", 1, 8, 1, H2, XR, "x resident (f16x2), half the rows in flight"),
    v!(GemvHfq4, "xq", "gemv_hfq4.cu", "gemv_hfq4g256_xq", 1, 8, 1, Q8, XR, "x resident as int8 per group, dp4a dot products, rows streamed"),
    v!(GemvHfq4, "xq_u", "gemv_hfq4.cu", "gemv_hfq4g256_xqu", 1, 8, 1, Q8, XR, "x resident as int8, dp4a, half the rows in flight"),
    v!(
        GemvHfq4,
        "xs",
        "gemv_hfq4.cu",
        "gemv_hfq4g256_xs",
        1,
        8,
        1,
        Q8,
        XR_STRIDED,
        "xq + one header per lane shared by shuffle, rows reduced together: more rows in flight"
    ),
    v!(GemvHfq4, "xs_u", "gemv_hfq4.cu", "gemv_hfq4g256_xsu", 1, 8, 1, Q8, XR_STRIDED, "xs with half the rows in flight"),
    v!(
        GemvHfq4,
        "xp",
        "gemv_hfq4.cu",
        "gemv_hfq4g256_xsu",
        1,
        8,
        1,
        Q8,
        xr_persistent(16, false),
        "xs_u on a persistent grid: resident blocks walk 16-row tiles, x prepared once per block"
    ),
    v!(GemvHfq4, "xp_t8", "gemv_hfq4.cu", "gemv_hfq4g256_xsu", 1, 8, 1, Q8, xr_persistent(8, false), "xp with 8-row tiles: finer static balance across SMs"),
    v!(
        GemvHfq4,
        "xp_t8_st",
        "gemv_hfq4.cu",
        "gemv_hfq4g256_xst",
        1,
        8,
        1,
        Q8,
        xr_persistent(8, false),
        "xp_t8 with streaming loads: L1 bypass and 256-byte L2 prefetch per request"
    ),
    v!(
        GemvHfq4,
        "xp_t4_st",
        "gemv_hfq4.cu",
        "gemv_hfq4g256_xst",
        1,
        8,
        1,
        Q8,
        xr_persistent(4, false),
        "xp_t8_st with 4-row tiles: finer balance at the end of the persistent walk"
    ),
    v!(GemvHfq4, "xp_st", "gemv_hfq4.cu", "gemv_hfq4g256_xst", 1, 8, 1, Q8, xr_persistent(16, false), "xp with streaming loads (16-row tiles)"),
    v!(
        GemvHfq4,
        "xp_t8_st_b",
        "gemv_hfq4.cu",
        "gemv_hfq4g256_xst",
        1,
        8,
        1,
        Q8,
        xr_persistent(8, true),
        "xp_t8_st on a balanced grid: every block walks the same number of tiles"
    ),
    v!(
        GemvHfq4,
        "x8_t8_b",
        "gemv_hfq4.cu",
        "gemv_hfq4g256_x8",
        1,
        8,
        1,
        Q8,
        x8_persistent(8, true),
        "8-byte lane loads (a warp-load covers two groups), persistent 8-row tiles, balanced grid"
    ),
    v!(GemvHfq4, "x8_t8_st_b", "gemv_hfq4.cu", "gemv_hfq4g256_x8s", 1, 8, 1, Q8, x8_persistent(8, true), "x8_t8_b with streaming loads"),
    v!(GemvHfq4, "x8_t4_st_b", "gemv_hfq4.cu", "gemv_hfq4g256_x8s", 1, 8, 1, Q8, x8_persistent(4, true), "x8_t8_st_b with 4-row tiles"),
    v!(GemvHfq4, "x8_t16_st_b", "gemv_hfq4.cu", "gemv_hfq4g256_x8s", 1, 8, 1, Q8, x8_persistent(16, true), "x8_t8_st_b with 16-row tiles"),
    v!(GemvHfq4, "xp8", "gemv_hfq4.cu", "gemv_hfq4g256_xs", 1, 8, 1, Q8, xr_persistent(16, false), "xs on a persistent grid (8 rows in flight)"),
    v!(GemvHfq4, "bulk_r2", "gemv_hfq4.sm_90.cu", "gemv_hfq4g256_bulk_r2", 2, 4, 1, H2, ROWS, "sm_90 cp.async.bulk + mbarrier, 3 stages of 8 groups x 8 rows"),
    v!(GemvHfq4, "bulk_r1", "gemv_hfq4.sm_90.cu", "gemv_hfq4g256_bulk_r1", 1, 8, 1, H2, ROWS, "sm_90 cp.async.bulk + mbarrier, 4 stages of 4 groups x 8 rows"),
    v!(GemvHfq4Res, "r1", "gemv_hfq4.cu", "gemv_hfq4g256_res_r1", 1, 4, 1, F32, ROWS, "baseline + residual add"),
    v!(GemvHfq4Res, "r2_h2", "gemv_hfq4.cu", "gemv_hfq4g256_res_r2_h2", 2, 4, 1, H2, ROWS, "R=2, f16x2, residual add"),
    v!(GemvHfq4Res, "r4_h2", "gemv_hfq4.cu", "gemv_hfq4g256_res_r4_h2", 4, 4, 1, H2, ROWS, "R=4, f16x2, residual add"),
    v!(GemvHfq4Res, "r2_sk2_h2", "gemv_hfq4.cu", "gemv_hfq4g256_res_r2_sk2_h2", 2, 8, 2, H2, ROWS, "split-K 2, R=2, f16x2, residual add"),
    v!(GemvHfq4Res, "xr", "gemv_hfq4.cu", "gemv_hfq4g256_res_xr", 1, 8, 1, F32, XR, "x resident, residual add"),
    v!(GemvHfq4Res, "xr_h2", "gemv_hfq4.cu", "gemv_hfq4g256_res_xrh", 1, 8, 1, H2, XR, "x resident (f16x2), residual add"),
    v!(GemvHfq4Res, "xq", "gemv_hfq4.cu", "gemv_hfq4g256_res_xq", 1, 8, 1, Q8, XR, "x resident as int8, dp4a, residual add"),
    v!(GemvHfq4Res, "xs", "gemv_hfq4.cu", "gemv_hfq4g256_res_xs", 1, 8, 1, Q8, XR_STRIDED, "xs, residual add"),
    v!(GemvHfq4Res, "xp", "gemv_hfq4.cu", "gemv_hfq4g256_res_xsu", 1, 8, 1, Q8, xr_persistent(16, false), "xp, residual add"),
    v!(GemvHfq4Res, "xp_t8", "gemv_hfq4.cu", "gemv_hfq4g256_res_xsu", 1, 8, 1, Q8, xr_persistent(8, false), "xp_t8, residual add"),
    v!(GemvHfq4Res, "x8_t8_st_b", "gemv_hfq4.cu", "gemv_hfq4g256_res_x8s", 1, 8, 1, Q8, x8_persistent(8, true), "x8_t8_st_b, residual add"),
    v!(GemvBf16, "r1", "gemv_bf16.cu", "gemv_bf16_r1", 1, 4, 1, F32, ROWS, "baseline: 1 row/warp, 16-byte loads"),
    v!(GemvBf16, "r2", "gemv_bf16.cu", "gemv_bf16_r2", 2, 4, 1, F32, ROWS, "multi-row R=2"),
    v!(GemvBf16, "r4", "gemv_bf16.cu", "gemv_bf16_r4", 4, 4, 1, F32, ROWS, "multi-row R=4"),
    v!(GemvBf16, "r1_u8", "gemv_bf16.cu", "gemv_bf16_r1_u8", 1, 4, 1, F32, ROWS, "8 steps of loads in flight"),
    v!(GemvBf16, "r2_sk2", "gemv_bf16.cu", "gemv_bf16_r2_sk2", 2, 8, 2, F32, ROWS, "split-K 2, R=2"),
    v!(GemvBf16, "r1_sk4", "gemv_bf16.cu", "gemv_bf16_r1_sk4", 1, 8, 4, F32, ROWS, "split-K 4"),
    v!(SwigluHfq4, "r1", "swiglu_hfq4.cu", "swiglu_hfq4g256_r1", 1, 4, 1, F32, ROWS, "baseline fused gate+up+SwiGLU, f32 dequant"),
    v!(SwigluHfq4, "r2_h2", "swiglu_hfq4.cu", "swiglu_hfq4g256_r2_h2", 2, 4, 1, H2, ROWS, "R=2, f16x2 dequant"),
    v!(Rmsnorm, "v1", "rmsnorm.cu", "rmsnorm_v1", 1, 8, 1, F32, ROWS, "baseline: scalar loads, two passes over memory"),
    v!(Rmsnorm, "v4", "rmsnorm.cu", "rmsnorm_v4", 1, 8, 1, F32, ROWS, "16-byte loads, row kept in registers"),
    v!(Rope, "exact", "rope.cu", "rope_exact", 1, 4, 1, F32, ROWS, "baseline: angles by sincos"),
    v!(Rope, "cache", "rope.cu", "rope_cache", 1, 4, 1, F32, ROWS, "cos/sin from a table"),
    v!(AttnDecode, "split", "attn_decode.cu", "attn_decode_split", 1, 4, 1, F32, ROWS, "flash-decoding split over the sequence + combine"),
];

/// (groups per warp, warps per block) of the x-resident instantiations.
pub const XR_SPLITS: &[(usize, usize)] = &[(2, 8), (4, 8), (7, 8), (7, 16)];
/// Splits of the 8-byte-load kernels: an even number of groups per warp.
pub const X8_SPLITS: &[(usize, usize)] = &[(2, 8), (4, 8), (4, 14), (8, 14)];

pub fn variants_of(f: Family) -> impl Iterator<Item = &'static Variant> {
    VARIANTS.iter().filter(move |v| v.family == f)
}

/// A CPU backend variant: the same families through the Rust references.
pub struct CpuVariant {
    pub name: &'static str,
    pub doc: &'static str,
    pub mode: crate::reference::CpuMode,
    /// The families it has a form for (`None`: all of them).
    pub families: Option<&'static [Family]>,
}

pub const CPU_VARIANTS: &[CpuVariant] = &[
    CpuVariant { name: "scalar", doc: "one thread", mode: crate::reference::CpuMode::Scalar, families: None },
    CpuVariant { name: "par", doc: "rows across threads (rayon)", mode: crate::reference::CpuMode::Par, families: None },
    CpuVariant {
        name: "r4",
        doc: "multi-row R=4, one thread: the activation group read once for four rows, four independent sums",
        mode: crate::reference::CpuMode::Rows4,
        families: Some(&[Family::GemvHfq4, Family::GemvHfq4Res]),
    },
];

impl CpuVariant {
    pub fn serves(&self, f: Family) -> bool {
        self.families.is_none_or(|fs| fs.contains(&f))
    }
}
