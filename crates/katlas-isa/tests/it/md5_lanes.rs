//! The md5 of many messages in SIMD lanes (AVX2, AVX-512VL, AVX-512) against the md-5 crate:
//! every length, every lane offset, the parallel grouping and RFC 1321's vectors.

use katlas_isa::oracle::md5::{md5_many_par, md5_many_with, Backend};
use md5::{Digest, Md5};
use rand::{RngCore, SeedableRng};

fn reference(msgs: &[&[u8]]) -> Vec<[u8; 16]> {
    msgs.iter().map(|m| Md5::digest(m).into()).collect()
}

fn random(len: usize, rng: &mut rand_chacha::ChaCha8Rng) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    v
}

#[test]
fn every_backend_matches_md5_crate_for_every_length_up_to_300() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let data: Vec<Vec<u8>> = (0..=300).map(|n| random(n, &mut rng)).collect();
    let msgs: Vec<&[u8]> = data.iter().map(|v| v.as_slice()).collect();
    let want = reference(&msgs);
    let backends = Backend::supported();
    for b in &backends {
        assert_eq!(md5_many_with(*b, &msgs), want, "backend {b:?}");
        // reversed and in small groups too, so lanes refill at every offset
        let rev: Vec<&[u8]> = msgs.iter().rev().copied().collect();
        let mut want_rev = want.clone();
        want_rev.reverse();
        assert_eq!(md5_many_with(*b, &rev), want_rev, "backend {b:?} reversed");
        for chunk in msgs.chunks(b.lanes() + 3) {
            assert_eq!(md5_many_with(*b, chunk), reference(chunk), "backend {b:?}");
        }
    }
    eprintln!("backends tested: {backends:?}");
}

#[test]
fn large_and_mixed_messages_match_including_parallel_groups() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let mut lens = vec![0usize, 1, 55, 56, 63, 64, 65, 119, 120, 128, 4 << 20];
    for _ in 0..60 {
        lens.push((rng.next_u32() as usize) % 300_000);
    }
    lens.push(3 * 1024 * 1024 + 17);
    let data: Vec<Vec<u8>> = lens.iter().map(|&n| random(n, &mut rng)).collect();
    let msgs: Vec<&[u8]> = data.iter().map(|v| v.as_slice()).collect();
    let want = reference(&msgs);
    for b in Backend::supported() {
        assert_eq!(md5_many_with(b, &msgs), want, "backend {b:?}");
    }
    assert_eq!(md5_many_par(&msgs), want);
    assert_eq!(md5_many_with(Backend::detect(), &msgs), want);
    // identical messages in several lanes, and unaligned starts
    let base = random(70_000, &mut rng);
    let same: Vec<&[u8]> = (0..40).map(|i| &base[i % 7..]).collect();
    assert_eq!(md5_many_with(Backend::detect(), &same), reference(&same));
}

#[test]
fn known_vectors() {
    // RFC 1321 test suite
    let cases: [(&[u8], &str); 4] = [
        (b"", "d41d8cd98f00b204e9800998ecf8427e"),
        (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
        (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        (b"12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
    ];
    let msgs: Vec<&[u8]> = cases.iter().map(|c| c.0).collect();
    for b in Backend::supported() {
        let got = md5_many_with(b, &msgs);
        for (g, (_, hex_want)) in got.iter().zip(cases) {
            assert_eq!(hex::encode(g), hex_want, "backend {b:?}");
        }
    }
}
