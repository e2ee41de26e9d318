//! What one (family, shape) case needs: host inputs that vary along every dimension, the
//! oracle's answer, and the scalars the kernels take.

use crate::data;
use crate::kernels::{Family, Shape};
use crate::reference as r;

pub const ROPE_THETA: f32 = 10000.0;
pub const RMS_EPS: f32 = 1e-5;

pub enum HostBuf {
    U8(Vec<u8>),
    U16(Vec<u16>),
    F32(Vec<f32>),
}

impl HostBuf {
    pub fn bytes(&self) -> usize {
        match self {
            HostBuf::U8(v) => v.len(),
            HostBuf::U16(v) => v.len() * 2,
            HostBuf::F32(v) => v.len() * 4,
        }
    }
    pub fn u8(&self) -> &[u8] {
        match self {
            HostBuf::U8(v) => v,
            _ => panic!("input is not u8"),
        }
    }
    pub fn u16(&self) -> &[u16] {
        match self {
            HostBuf::U16(v) => v,
            _ => panic!("input is not u16"),
        }
    }
    pub fn f32(&self) -> &[f32] {
        match self {
            HostBuf::F32(v) => v,
            _ => panic!("input is not f32"),
        }
    }
}

pub struct Case {
    pub family: Family,
    pub shape: Shape,
    pub inputs: Vec<HostBuf>,
    pub out_len: usize,
    /// Length of one output row, for the bad-cell histogram.
    pub row_len: usize,
    /// RoPE position.
    pub pos: usize,
}

impl Case {
    pub fn new(family: Family, shape: Shape, seed: u64) -> Case {
        let (a, b) = (shape.a, shape.b);
        let s = seed;
        let (inputs, out_len, row_len) = match family {
            Family::GemvHfq4 => (vec![HostBuf::U8(data::hfq4_matrix(a, b, s, 1)), HostBuf::F32(data::vec_f32(b, s, 2))], a, 1),
            Family::GemvHfq4Res => {
                (vec![HostBuf::U8(data::hfq4_matrix(a, b, s, 1)), HostBuf::F32(data::vec_f32(b, s, 2)), HostBuf::F32(data::vec_f32(a, s, 3))], a, 1)
            }
            Family::GemvBf16 => (vec![HostBuf::U16(data::bf16_matrix(a, b, s, 4)), HostBuf::F32(data::vec_f32(b, s, 2))], a, 1),
            Family::SwigluHfq4 => {
                (vec![HostBuf::U8(data::hfq4_matrix(a, b, s, 5)), HostBuf::U8(data::hfq4_matrix(a, b, s, 6)), HostBuf::F32(data::vec_f32(b, s, 2))], a, 1)
            }
            Family::Rmsnorm => (vec![HostBuf::F32(data::vec_f32(a * b, s, 7)), HostBuf::F32(data::vec_f32(b, s, 8))], a * b, b),
            Family::Rope => {
                let pos = rope_pos(shape);
                let half = b / 2;
                let mut cs = Vec::with_capacity(b);
                for i in 0..half {
                    let (sn, c) = r::rope_angle(pos, i, b, ROPE_THETA as f64).sin_cos();
                    cs.push(c as f32);
                    cs.push(sn as f32);
                }
                (vec![HostBuf::F32(data::vec_f32(a * b, s, 9)), HostBuf::F32(cs)], a * b, b)
            }
            Family::AttnDecode => {
                let (seq, h) = (a, b);
                let hkv = h / 4;
                (
                    vec![
                        HostBuf::F32(data::vec_f32(h * r::ATT_D, s, 10)),
                        HostBuf::U16(data::f16_vec(seq * hkv * r::ATT_D, s, 11)),
                        HostBuf::U16(data::f16_vec(seq * hkv * r::ATT_D, s, 12)),
                    ],
                    h * r::ATT_D,
                    r::ATT_D,
                )
            }
        };
        Case { family, shape, inputs, out_len, row_len, pos: rope_pos(shape) }
    }

    pub fn input_bytes(&self) -> usize {
        self.inputs.iter().map(HostBuf::bytes).sum()
    }

    /// The f64 ground truth.
    pub fn oracle(&self) -> Vec<f64> {
        let (a, b) = (self.shape.a, self.shape.b);
        let i = &self.inputs;
        match self.family {
            Family::GemvHfq4 => r::oracle_gemv_hfq4(i[0].u8(), i[1].f32(), a, b),
            Family::GemvHfq4Res => {
                let y = r::oracle_gemv_hfq4(i[0].u8(), i[1].f32(), a, b);
                y.iter().zip(i[2].f32()).map(|(y, r)| y + *r as f64).collect()
            }
            Family::GemvBf16 => r::oracle_gemv_bf16(i[0].u16(), i[1].f32(), a, b),
            Family::SwigluHfq4 => r::oracle_swiglu(i[0].u8(), i[1].u8(), i[2].f32(), a, b),
            Family::Rmsnorm => r::oracle_rmsnorm(i[0].f32(), i[1].f32(), a, b, RMS_EPS),
            Family::Rope => r::oracle_rope(i[0].f32(), a, b, self.pos, ROPE_THETA as f64),
            Family::AttnDecode => r::oracle_attn(i[0].f32(), i[1].u16(), i[2].u16(), b, b / 4, a),
        }
    }

    /// The CPU backend's kernel (f32), scalar or across threads.
    pub fn cpu_run(&self, mode: r::CpuMode) -> Vec<f32> {
        let par = mode == r::CpuMode::Par;
        let (a, b) = (self.shape.a, self.shape.b);
        let i = &self.inputs;
        match self.family {
            Family::GemvHfq4 => r::cpu_gemv_hfq4(i[0].u8(), i[1].f32(), None, a, b, mode),
            Family::GemvHfq4Res => r::cpu_gemv_hfq4(i[0].u8(), i[1].f32(), Some(i[2].f32()), a, b, mode),
            Family::GemvBf16 => r::cpu_gemv_bf16(i[0].u16(), i[1].f32(), a, b, par),
            Family::SwigluHfq4 => r::cpu_swiglu(i[0].u8(), i[1].u8(), i[2].f32(), a, b, par),
            Family::Rmsnorm => r::cpu_rmsnorm(i[0].f32(), i[1].f32(), a, b, RMS_EPS),
            Family::Rope => r::cpu_rope(i[0].f32(), a, b, self.pos, ROPE_THETA),
            Family::AttnDecode => r::cpu_attn(i[0].f32(), i[1].u16(), i[2].u16(), b, b / 4, a, par),
        }
    }
}

/// A late decode position, so angles are large and rounding in them shows.
pub fn rope_pos(shape: Shape) -> usize {
    4093 + shape.a % 7
}
