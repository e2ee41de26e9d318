//! Issue 15 in katlas-isa: an object the native reader refuses is not handed to an external
//! disassembler, and external disassemblers run under time and memory limits.

use katlas_isa::oracle::{run_limited, ToolLimits};
use katlas_isa::{scan, DisasmMode, ScanOptions};
use katlas_isa::{Disassemblers, Tool};
use std::path::Path;
use std::time::{Duration, Instant};

/// Our gfx1201 code object with its .symtab's sh_size set to 1 TiB (what a hostile or torn file
/// looks like): the metadata notes still read, the symbol table cannot.
fn mutated(dir: &Path) -> std::path::PathBuf {
    let mut d = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels.gfx1201.hsaco")).unwrap();
    let shoff = u64::from_le_bytes(d[0x28..0x30].try_into().unwrap()) as usize;
    let (entsize, num) = (u16::from_le_bytes([d[0x3a], d[0x3b]]) as usize, u16::from_le_bytes([d[0x3c], d[0x3d]]) as usize);
    let mut hit = 0;
    for i in 0..num {
        let o = shoff + i * entsize;
        if u32::from_le_bytes(d[o + 4..o + 8].try_into().unwrap()) == 2 {
            d[o + 0x20..o + 0x28].copy_from_slice(&(1u64 << 40).to_le_bytes());
            hit += 1;
        }
    }
    assert_eq!(hit, 1, "one SHT_SYMTAB");
    let p = dir.join("huge-symtab.hsaco");
    std::fs::write(&p, d).unwrap();
    p
}

#[test]
fn a_refused_object_is_not_handed_to_llvm_objdump() {
    let tmp = tempfile::tempdir().unwrap();
    let obj = mutated(tmp.path());
    // a stand-in llvm-objdump that leaves a mark when it is run
    let mark = tmp.path().join("ran");
    let tool = tmp.path().join("llvm-objdump");
    std::fs::write(&tool, format!("#!/bin/sh\ntouch {}\nsleep 30\n", mark.display())).unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let tools = Disassemblers { amd: Some(Tool { name: "llvm-objdump".into(), path: tool, version: None }), ..Default::default() };
    let started = Instant::now();
    let m = scan(&[obj], ScanOptions { disasm: DisasmMode::Auto, disassemblers: Some(tools), ..Default::default() }).unwrap();
    assert!(!mark.exists(), "llvm-objdump was run on an object the native reader refused");
    assert!(started.elapsed() < Duration::from_secs(20));
    let o = m.objects.first().expect("the metadata still gives an object");
    let status = o.mix_status.as_ref().map(|m| m.to_string()).unwrap_or_default();
    assert!(status.starts_with("failed:native reader refused the object"), "{status}");
    assert!(o.warnings.iter().any(|w| w.contains("not handed to llvm-objdump")), "{:?}", o.warnings);
    assert!(!o.kernels.is_empty(), "the kernels' metadata is kept beside the refusal");
}

#[test]
fn external_tools_are_stopped_at_their_time_limit() {
    let limits = ToolLimits { wall: Duration::from_secs(1), max_mem_bytes: 1 << 30 };
    let started = Instant::now();
    let e = run_limited(std::process::Command::new("sleep").arg("30").stderr(std::process::Stdio::piped()), "sleep", limits).unwrap_err();
    assert!(e.contains("ran past 1 s"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn external_tools_get_a_memory_limit() {
    // a child that asks for 2 GiB under a 256 MiB address-space limit fails to get it
    let limits = ToolLimits { wall: Duration::from_secs(30), max_mem_bytes: 256 << 20 };
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", "b = bytearray(2 << 30)"]).stderr(std::process::Stdio::piped());
    let (status, stderr) = run_limited(&mut cmd, "python3", limits).unwrap();
    assert!(!status.success(), "2 GiB allocated under a 256 MiB limit");
    assert!(String::from_utf8_lossy(&stderr).contains("MemoryError"), "{}", String::from_utf8_lossy(&stderr));
}
