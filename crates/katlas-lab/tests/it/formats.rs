//! The HFQ4G256 format, the CPU references against f64 math, the inputs and the checks.

use katlas_lab::check::compare;
use katlas_lab::data;
use katlas_lab::kernels::{tolerance, Family, Math, Shape, CPU_VARIANTS, VARIANTS};
use katlas_lab::quant::{check_k, dequant_row, pack_group, quantize, row_bytes, unpack_group, GROUP, GROUP_BYTES};
use katlas_lab::reference as r;
use katlas_lab::workload::Case;

#[test]
fn group_layout_is_scale_min_then_low_nibble_first() {
    let mut q = [0u8; GROUP];
    for (i, v) in q.iter_mut().enumerate() {
        *v = ((i * 7 + 3) % 16) as u8;
    }
    let mut g = [0u8; GROUP_BYTES];
    pack_group(&q, 0.25, -1.5, &mut g);
    assert_eq!(&g[0..4], &0.25f32.to_le_bytes());
    assert_eq!(&g[4..8], &(-1.5f32).to_le_bytes());
    // byte b: weight 2b in bits 0..3, weight 2b+1 in bits 4..7
    assert_eq!(g[8], q[0] | (q[1] << 4));
    assert_eq!(g[8 + 127], q[254] | (q[255] << 4));
    let (s, m, back) = unpack_group(&g);
    assert_eq!((s, m), (0.25, -1.5));
    assert_eq!(back, q);
}

#[test]
fn quantize_round_trips_within_half_a_step() {
    let (n, k) = (3, 512);
    let w = data::vec_f32(n * k, 7, 1);
    let packed = quantize(&w, n, k).unwrap();
    assert_eq!(packed.len(), n * row_bytes(k));
    for row in 0..n {
        let back = dequant_row(&packed, k, row);
        for g in 0..k / GROUP {
            let off = row * row_bytes(k) + g * GROUP_BYTES;
            let (scale, _, _) = unpack_group(&packed[off..off + GROUP_BYTES]);
            for i in g * GROUP..(g + 1) * GROUP {
                let err = (back[i] - w[row * k + i]).abs();
                assert!(err <= 0.5 * scale * 1.0001, "row {row} col {i}: {err} > half step {scale}");
            }
        }
    }
}

#[test]
fn k_must_be_a_multiple_of_the_group() {
    assert!(check_k(4096).is_ok());
    assert!(check_k(300).is_err());
    assert!(check_k(0).is_err());
    assert!(quantize(&[0.0; 300], 1, 300).is_err());
}

#[test]
fn inputs_vary_along_every_dimension() {
    let (n, k) = (8, 1024);
    let w = data::hfq4_matrix(n, k, 1, 1);
    let rb = row_bytes(k);
    // rows differ, groups differ, scales and minimums differ, nibbles are not constant
    for row in 1..n {
        assert_ne!(&w[row * rb..(row + 1) * rb], &w[(row - 1) * rb..row * rb], "rows {row} and {} equal", row - 1);
    }
    let (s0, m0, q0) = unpack_group(&w[0..GROUP_BYTES]);
    let (s1, m1, q1) = unpack_group(&w[GROUP_BYTES..2 * GROUP_BYTES]);
    assert!(s0 != s1 && m0 != m1 && q0 != q1);
    assert!(q0.iter().any(|&v| v != q0[0]));
    let x = data::vec_f32(k, 1, 2);
    assert!(x.iter().all(|v| *v != 0.0));
    assert!(x.iter().any(|v| *v != x[0]));
    let b = data::bf16_matrix(4, 256, 1, 3);
    assert!(b[0..256] != b[256..512]);
}

#[test]
fn oracle_matches_naive_dequantised_f64() {
    let (n, k) = (5, 768);
    let w = data::hfq4_matrix(n, k, 3, 1);
    let x = data::vec_f32(k, 3, 2);
    let y = r::oracle_gemv_hfq4(&w, &x, n, k);
    for (row, got) in y.iter().enumerate() {
        let d = dequant_row(&w, k, row);
        let naive: f64 = d.iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
        assert!((naive - got).abs() <= 1e-6 * naive.abs().max(1.0), "row {row}: {naive} vs {got}");
    }
}

#[test]
fn cpu_kernels_match_the_oracle_for_every_family() {
    let shapes = [
        (Family::GemvHfq4, Shape { a: 64, b: 1024 }),
        (Family::GemvHfq4Res, Shape { a: 33, b: 512 }),
        (Family::GemvBf16, Shape { a: 40, b: 768 }),
        (Family::SwigluHfq4, Shape { a: 17, b: 512 }),
        (Family::Rmsnorm, Shape { a: 3, b: 1024 }),
        (Family::Rope, Shape { a: 8, b: 128 }),
        (Family::AttnDecode, Shape { a: 96, b: 8 }),
    ];
    for (f, sh) in shapes {
        let c = Case::new(f, sh, 11);
        let want = c.oracle();
        for v in CPU_VARIANTS.iter().filter(|v| v.serves(f)) {
            let got = c.cpu_run(v.mode);
            let res = compare(&got, &want, c.row_len, tolerance(f, Math::F32));
            assert!(res.pass, "{} {sh} {}: {}", f.name(), v.name, res.summary());
        }
    }
}

#[test]
fn check_finds_planted_errors_and_bins_them() {
    let want: Vec<f64> = (0..256).map(|i| ((i * 37 % 101) as f64 - 50.0) / 10.0).collect();
    let mut got: Vec<f32> = want.iter().map(|v| *v as f32).collect();
    assert!(compare(&got, &want, 1, 1e-5).pass);
    got[19] += 3.0; // row 19: row%16 = 3, lane 19
    got[51] = f32::NAN; // row 51: row%16 = 3, lane 19
    let res = compare(&got, &want, 1, 1e-5);
    assert!(!res.pass);
    assert_eq!(res.bad, 2);
    assert_eq!(res.hist_row_mod16.as_ref().unwrap()[3], 2);
    assert_eq!(res.hist_lane.as_ref().unwrap()[19], 2);
    assert_eq!(res.first_bad.unwrap().0, 19);
    // 2-D outputs bin by row and column
    let res = compare(&got, &want, 32, 1e-5);
    assert_eq!(res.hist_row_mod16.as_ref().unwrap()[0], 1);
    assert_eq!(res.hist_lane.as_ref().unwrap()[19], 2);
    // wrong length never passes
    assert!(!compare(&got[..10], &want, 1, 1.0).pass);
}

#[test]
fn x_resident_variants_resolve_per_k() {
    let xs = VARIANTS.iter().find(|v| v.family == Family::GemvHfq4 && v.name == "xp").unwrap();
    let (f, wpb, rt) = xs.resolve(Shape { a: 28672, b: 8192 }).unwrap();
    assert_eq!(f, "gemv_hfq4g256_xsu_g4w8");
    assert_eq!(wpb, 8);
    assert_eq!(rt, Some(16));
    let (f, wpb, _) = xs.resolve(Shape { a: 4096, b: 28672 }).unwrap();
    assert_eq!((f.as_str(), wpb), ("gemv_hfq4g256_xsu_g7w16", 16));
    assert!(xs.resolve(Shape { a: 4096, b: 512 }).is_err(), "K=512 has no x-resident split");
    let r1 = VARIANTS.iter().find(|v| v.family == Family::GemvHfq4 && v.name == "r1").unwrap();
    assert_eq!(r1.resolve(Shape { a: 1, b: 512 }).unwrap(), ("gemv_hfq4g256_r1".to_string(), 4, None));
}
