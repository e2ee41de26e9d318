//! Instruction categories (`matrix`, `lds`, `vmem_load`, ...) and the AMD trailing-padding
//! rule: shared by the native AMD decoder ([`crate::amd::decode`]) and the external
//! disassemblers' listing splitters ([`crate::mix`]), which must count the same way.

/// AMD alignment padding after a kernel's last `s_endpgm` (`s_code_end`, `s_nop`) is not part
/// of the kernel: it is held back and counted only when real code follows it (a second exit
/// path), and dropped at the function's end. One rule for the native decoder and llvm-objdump.
pub(crate) struct TrailingPad<T> {
    after_end: bool,
    pending: Vec<T>,
}

impl<T> Default for TrailingPad<T> {
    fn default() -> Self {
        TrailingPad { after_end: false, pending: Vec::new() }
    }
}

impl<T> TrailingPad<T> {
    pub(crate) fn feed(&mut self, op: &str, item: T, mut count: impl FnMut(T)) {
        if self.after_end && (op == "s_code_end" || op.starts_with("s_nop")) {
            self.pending.push(item);
            return;
        }
        for p in self.pending.drain(..) {
            count(p);
        }
        self.after_end = op == "s_endpgm";
        count(item);
    }
    pub(crate) fn reset(&mut self) {
        self.after_end = false;
        self.pending.clear();
    }
}

pub fn amd_category(op: &str) -> &'static str {
    let has = |s: &str| op.contains(s);
    if has("mfma") || has("wmma") || has("swmmac") {
        return "matrix";
    }
    if op.starts_with("v_dot") {
        return "dot";
    }
    if op.starts_with("ds_") {
        return "lds";
    }
    // flat-scratch loads and stores are the spills (and private arrays) of the kernel
    if op.starts_with("scratch_") {
        return if has("_store") { "scratch_store" } else { "scratch_load" };
    }
    let vmem = ["global_", "buffer_", "flat_", "tbuffer_", "image_"];
    if vmem.iter().any(|p| op.starts_with(p)) {
        return if has("_store") || has("_atomic") || op.starts_with("image_atomic") { "vmem_store" } else { "vmem_load" };
    }
    if op.starts_with("s_load")
        || op.starts_with("s_buffer_")
        || op.starts_with("s_store")
        || op.starts_with("s_scratch_")
        || op.starts_with("s_dcache")
        || op.starts_with("s_atomic")
        || op.starts_with("s_prefetch")
    {
        return "smem";
    }
    if op.starts_with("s_branch") || op.starts_with("s_cbranch") || op.starts_with("s_setpc") || op.starts_with("s_swappc") || op.starts_with("s_call") {
        return "branch";
    }
    // gfx12 splits s_waitcnt into s_wait_loadcnt, s_wait_dscnt, ...: still waits, not scalar ALU
    if op.starts_with("s_waitcnt") || op.starts_with("s_wait_") || op.starts_with("s_barrier") || op == "s_sleep" {
        return "wait";
    }
    if op == "s_nop" || op == "s_endpgm" || op == "s_code_end" || op.starts_with("s_trap") {
        return "other";
    }
    if op.starts_with("s_") {
        return "salu";
    }
    if op.starts_with("v_") {
        return "valu";
    }
    "other"
}

pub fn sass_category(op: &str) -> &'static str {
    match op {
        "HMMA" | "HGMMA" | "IMMA" | "IGMMA" | "QGMMA" | "BMMA" | "BGMMA" | "DMMA" | "OMMA" | "QMMA" => "matrix",
        o if o.starts_with("UTC") && o.ends_with("MMA") => "matrix",
        "IDP" | "IDP4A" => "dot",
        "LDG" | "LD" | "LDL" | "LDGSTS" | "UBLKCP" | "UTMALDG" | "LDGDEPBAR" | "TLD" | "TEX" | "TLD4" | "SULD" => "vmem_load",
        "STG" | "ST" | "STL" | "RED" | "REDG" | "ATOM" | "ATOMG" | "UTMASTG" | "UTMAREDG" | "SUST" | "SUATOM" | "SURED" => "vmem_store",
        "LDC" | "ULDC" => "smem",
        "LDS" | "STS" | "LDSM" | "STSM" | "ATOMS" | "LDSU" => "lds",
        "BRA" | "BRX" | "JMP" | "JMX" | "CALL" | "RET" | "EXIT" | "BSSY" | "BSYNC" | "BREAK" | "BRXU" | "JMXU" | "KILL" => "branch",
        "BAR" | "DEPBAR" | "MEMBAR" | "WARPSYNC" | "SYNCS" | "ERRBAR" | "NANOSLEEP" | "CCTL" | "FENCE" => "wait",
        "NOP" | "S2R" | "CS2R" | "S2UR" | "PMTRIG" | "BPT" => "other",
        o if o.starts_with('U') => "salu",
        _ => "valu",
    }
}
