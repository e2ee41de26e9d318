//! The profile ↔ ISA join on real names (fixtures/h200/trace_cubin_names.json): the kernels of
//! an H200 llama decode as its torch trace names them, each with the cubin symbol of the same
//! function among the 4,645 of the modules the run loaded (registers agree with cuobjdump), and
//! for two of them the other instantiation of the same launcher the join took before — which
//! showed 27 registers for an 18-register kernel, and 38 for a 30-register one.

use katlas_advise::names::{match_level, MatchLevel};

#[test]
fn trace_names_join_their_own_symbol_and_never_another_instantiation() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/h200/trace_cubin_names.json");
    let f: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let ks = f["kernels"].as_array().unwrap();
    assert_eq!(ks.len(), 8);
    let mut wrong_before = 0;
    for k in ks {
        let traced = k["traced"].as_str().unwrap();
        let symbol = k["symbol"].as_str().unwrap();
        let lvl = match_level(traced, &[symbol]);
        assert!(matches!(lvl, Some(MatchLevel::Exact | MatchLevel::Demangled)), "{traced}\n  does not join its own symbol {symbol}");
        if let Some(other) = k["joined_before"].as_str() {
            wrong_before += 1;
            assert_eq!(match_level(traced, &[other]), None, "{traced}\n  joins another instantiation {other}");
        }
    }
    assert_eq!(wrong_before, 2);
}
