//! Instruction mix per kernel. AMD objects whose processor the opcode tables cover are decoded
//! in-process ([`crate::amd::decode`], tables generated from LLVM's disassembler); the others,
//! and any object the native decoder refuses, go through an external disassembler
//! (`llvm-objdump` for AMD, `nvdisasm` or `cuobjdump -sass` for NVIDIA) whose listing is split
//! at symbol labels so each kernel gets its own counts.

use crate::category::{amd_category, sass_category, TrailingPad};
use crate::manifest::{CodeObject, InstructionMix, MixStatus, ToolStatus, Vendor};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisasmMode {
    /// Native AMD decoder where covered, else the external disassembler; a missing tool is recorded.
    Auto,
    Never,
    /// As `Auto`, but a vendor whose objects got no mix (tool absent) fails the scan.
    Always,
    /// External disassemblers only (llvm-objdump, nvdisasm/cuobjdump): the oracle path.
    External,
}

/// Name of the in-process AMD decoder in `mix_status` (`disassembled:katlas-amdgpu`) and in
/// the manifest's `disassemblers`.
pub const NATIVE_AMD: &str = "katlas-amdgpu";

#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub path: PathBuf,
    pub version: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Disassemblers {
    pub amd: Option<Tool>,
    pub nvdisasm: Option<Tool>,
    pub cuobjdump: Option<Tool>,
}

fn which(name: &str, extra: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(extra.iter().cloned()).map(|d| d.join(name)).find(|p| p.is_file())
}

fn version_of(path: &Path, arg: &str) -> Option<String> {
    let out = Command::new(path).arg(arg).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines().find(|l| l.to_lowercase().contains("version") || l.contains("release")).map(|l| l.trim().to_string())
}

fn from_env(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_file())
}

impl Disassemblers {
    /// Looks on PATH (and LLVM 22's Debian directory, and KATLAS_LLVM_OBJDUMP / KATLAS_NVDISASM /
    /// KATLAS_CUOBJDUMP) for the tools.
    pub fn discover() -> Disassemblers {
        let llvm_dirs = [PathBuf::from("/usr/lib/llvm-22/bin")];
        let amd = from_env("KATLAS_LLVM_OBJDUMP")
            .or_else(|| which("llvm-objdump-22", &llvm_dirs))
            .or_else(|| which("llvm-objdump", &llvm_dirs))
            .map(|p| Tool { name: "llvm-objdump".into(), version: version_of(&p, "--version"), path: p });
        let nvdisasm = from_env("KATLAS_NVDISASM").or_else(|| which("nvdisasm", &[])).map(|p| Tool {
            name: "nvdisasm".into(),
            version: version_of(&p, "--version"),
            path: p,
        });
        let cuobjdump = from_env("KATLAS_CUOBJDUMP").or_else(|| which("cuobjdump", &[])).map(|p| Tool {
            name: "cuobjdump".into(),
            version: version_of(&p, "--version"),
            path: p,
        });
        Disassemblers { amd, nvdisasm, cuobjdump }
    }

    pub fn for_vendor(&self, v: Vendor) -> Option<&Tool> {
        match v {
            Vendor::Amd => self.amd.as_ref(),
            Vendor::Nvidia => self.nvdisasm.as_ref().or(self.cuobjdump.as_ref()),
        }
    }

    pub fn status(&self, mode: DisasmMode) -> Vec<ToolStatus> {
        let mut out = Vec::new();
        let mut one = |vendor: Vendor, name: &str, t: &Option<Tool>| {
            out.push(ToolStatus {
                vendor,
                name: name.into(),
                path: t.as_ref().map(|t| t.path.display().to_string()),
                version: t.as_ref().and_then(|t| t.version.clone()),
                status: match (mode, t) {
                    (DisasmMode::Never, _) => "disabled".into(),
                    (_, Some(_)) => "found".into(),
                    (_, None) => "absent".into(),
                },
            })
        };
        one(Vendor::Amd, "llvm-objdump", &self.amd);
        one(Vendor::Nvidia, "nvdisasm", &self.nvdisasm);
        one(Vendor::Nvidia, "cuobjdump", &self.cuobjdump);
        out.push(ToolStatus {
            vendor: Vendor::Amd,
            name: NATIVE_AMD.into(),
            path: None,
            version: Some(format!("built in; opcode tables from LLVM {}", crate::amd::decode::table_llvm_version())),
            status: match mode {
                DisasmMode::Never | DisasmMode::External => "disabled".into(),
                _ => "found".into(),
            },
        });
        out
    }
}

/// Computes the per-kernel mix of one parsed object and returns its `mix_status`:
/// `disassembled:katlas-amdgpu` (native), `disassembled:<tool>`, `absent:<tool>`,
/// `failed:<why>` or `disabled`. When the native decoder refuses an object, the reason is
/// kept in the object's warnings and llvm-objdump does the work.
pub fn attach(tools: &Disassemblers, mode: DisasmMode, data: &[u8], obj: &mut CodeObject) -> MixStatus {
    if mode == DisasmMode::Never {
        return MixStatus::Disabled;
    }
    if obj.vendor == Vendor::Amd && mode != DisasmMode::External && crate::amd::decode::Decoder::for_arch(&obj.arch).is_some() {
        match crate::amd::decode::object_mix(data, &obj.arch) {
            Ok(mixes) => {
                set_kernel_mixes(obj, &mixes);
                return MixStatus::Disassembled(NATIVE_AMD.into());
            }
            // a hostile object (a .symtab of a terabyte) is not handed on to a tool that may
            // take minutes or gigabytes over it: the refusal is the answer
            Err(e) if e.starts_with(crate::amd::decode::READ_REFUSED) => {
                obj.warnings.push(format!("native AMDGPU reader refused the object ({e}); not handed to llvm-objdump"));
                return MixStatus::Failed(format!("native reader refused the object: {e}"));
            }
            Err(e) => obj.warnings.push(format!("native AMDGPU decoder refused the object ({e}); instruction mix from llvm-objdump")),
        }
    }
    match tools.for_vendor(obj.vendor) {
        None => MixStatus::Absent(if obj.vendor == Vendor::Amd { "llvm-objdump" } else { "nvdisasm/cuobjdump" }.into()),
        Some(tool) => match disassemble(tool, obj.vendor, data) {
            Ok(mixes) => {
                set_kernel_mixes(obj, &mixes);
                MixStatus::Disassembled(tool.name.clone())
            }
            Err(e) => MixStatus::Failed(e),
        },
    }
}

fn set_kernel_mixes(obj: &mut CodeObject, mixes: &HashMap<String, InstructionMix>) {
    for k in &mut obj.kernels {
        k.mix = Some(mixes.get(&k.name).cloned().unwrap_or_default());
    }
}

/// Runs the disassembler on one object and returns per-symbol mixes.
pub fn disassemble(tool: &Tool, vendor: Vendor, object: &[u8]) -> Result<HashMap<String, InstructionMix>, String> {
    let mut f = tempfile::Builder::new()
        .prefix("katlas-isa-")
        .suffix(if vendor == Vendor::Amd { ".o" } else { ".cubin" })
        .tempfile()
        .map_err(|e| format!("temp file: {e}"))?;
    f.write_all(object).map_err(|e| format!("temp file: {e}"))?;
    f.flush().map_err(|e| format!("temp file: {e}"))?;
    let mut cmd = Command::new(&tool.path);
    match (vendor, tool.name.as_str()) {
        // label lines keep their address: it tells a function's entry from a local label
        (Vendor::Amd, _) => cmd.args(["-d", "--no-show-raw-insn"]).arg(f.path()),
        (Vendor::Nvidia, "nvdisasm") => cmd.arg("-c").arg(f.path()),
        (Vendor::Nvidia, _) => cmd.arg("-sass").arg(f.path()),
    };
    // llvm-objdump writes its listing a line per syscall: a file takes that far cheaper than a
    // pipe (measured 0.57 s vs 0.90 s for a 2.7 MB object); the file is then parsed streaming
    let listing = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let out = listing.try_clone().map_err(|e| format!("temp file: {e}"))?;
    cmd.stdout(std::process::Stdio::from(out)).stderr(std::process::Stdio::piped());
    let (status, stderr) = run_limited(&mut cmd, &tool.name, ToolLimits::from_env())?;
    if !status.success() {
        let err = String::from_utf8_lossy(&stderr);
        return Err(format!("{} exited with {status}: {}", tool.name, err.trim().chars().take(300).collect::<String>()));
    }
    use std::io::Seek;
    let mut listing = listing;
    listing.rewind().map_err(|e| format!("temp file: {e}"))?;
    let reader = std::io::BufReader::with_capacity(1 << 20, listing);
    Ok(match vendor {
        Vendor::Amd => split_llvm_objdump_functions(reader, &function_entries(object)),
        Vendor::Nvidia => split_sass_lines(reader),
    })
}

/// Bounds on one external disassembler run: wall time, CPU time and address space
/// (`KATLAS_TOOL_TIMEOUT_S`, default 300; `KATLAS_TOOL_MAX_MEM_MB`, default 8192).
#[derive(Debug, Clone, Copy)]
pub struct ToolLimits {
    pub wall: std::time::Duration,
    pub max_mem_bytes: u64,
}

impl ToolLimits {
    pub fn from_env() -> ToolLimits {
        let num = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.trim().parse::<u64>().ok()).filter(|v| *v > 0).unwrap_or(d);
        ToolLimits { wall: std::time::Duration::from_secs(num("KATLAS_TOOL_TIMEOUT_S", 300)), max_mem_bytes: num("KATLAS_TOOL_MAX_MEM_MB", 8192) << 20 }
    }
}

/// Runs `cmd` under `limits`: the child gets RLIMIT_AS and RLIMIT_CPU, and is killed when the
/// wall time runs out. Returns its status and stderr.
pub fn run_limited(cmd: &mut Command, name: &str, limits: ToolLimits) -> Result<(std::process::ExitStatus, Vec<u8>), String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let (mem, cpu) = (limits.max_mem_bytes, limits.wall.as_secs().max(1));
        // SAFETY: only async-signal-safe setrlimit calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let set = |res, v: u64| {
                    let r = libc::rlimit { rlim_cur: v as libc::rlim_t, rlim_max: v as libc::rlim_t };
                    libc::setrlimit(res, &r)
                };
                if set(libc::RLIMIT_AS, mem) != 0 || set(libc::RLIMIT_CPU, cpu) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().map_err(|e| format!("{name}: {e}"))?;
    let mut err_pipe = child.stderr.take();
    // stderr is drained beside the wait so a chatty tool never blocks on a full pipe
    let reader = std::thread::spawn(move || {
        let (mut buf, mut chunk) = (Vec::new(), [0u8; 8192]);
        if let Some(p) = err_pipe.as_mut() {
            // keep the first MiB, drain the rest
            while let Ok(n @ 1..) = std::io::Read::read(p, &mut chunk) {
                if buf.len() < 1 << 20 {
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
        buf
    });
    let deadline = std::time::Instant::now() + limits.wall;
    let status = loop {
        match child.try_wait().map_err(|e| format!("{name}: {e}"))? {
            Some(s) => break s,
            None if std::time::Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = reader.join();
                return Err(format!("{name} ran past {} s (KATLAS_TOOL_TIMEOUT_S) and was stopped", limits.wall.as_secs()));
            }
            None => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    };
    let stderr = reader.join().unwrap_or_default();
    Ok((status, stderr))
}

/// Per-symbol accumulation that only touches the map when the symbol changes.
struct Splitter {
    out: HashMap<String, InstructionMix>,
    current: Option<(String, InstructionMix)>,
    pad: TrailingPad<(String, &'static str)>,
}

impl Splitter {
    fn new() -> Self {
        Splitter { out: HashMap::new(), current: None, pad: TrailingPad::default() }
    }
    fn start(&mut self, name: &str) {
        self.flush();
        let prev = self.out.remove(name).unwrap_or_default();
        self.current = Some((name.to_string(), prev));
    }
    fn flush(&mut self) {
        self.pad.reset();
        if let Some((n, m)) = self.current.take() {
            self.out.insert(n, m);
        }
    }
    fn add(&mut self, op: &str, category: &'static str) {
        if let Some((_, m)) = self.current.as_mut() {
            add(m, op, category);
        }
    }
    /// [`Splitter::add`] for AMD listings: trailing padding after `s_endpgm` is not counted.
    fn add_amd(&mut self, op: &str, category: &'static str) {
        let Splitter { current, pad, .. } = self;
        if let Some((_, m)) = current.as_mut() {
            pad.feed(op, (op.to_string(), category), |(o, c)| add(m, &o, c));
        }
    }
    fn finish(mut self) -> HashMap<String, InstructionMix> {
        self.flush();
        self.out
    }
}

fn each_line(mut r: impl std::io::BufRead, mut f: impl FnMut(&str)) {
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => f(String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r'])),
        }
    }
}

/// Function entries of an AMD object's executable sections: address -> name (of several
/// functions at one address, the last by name, as objdump orders them).
pub fn function_entries(object: &[u8]) -> HashMap<u64, String> {
    let mut out: HashMap<u64, String> = HashMap::new();
    let Ok(elf) = crate::elf::Elf::parse(object, "AMDGPU code object") else {
        return out;
    };
    let Ok(mut syms) = crate::elf::symbols(&elf, "AMDGPU code object") else {
        return out;
    };
    if syms.iter().all(|s| s.name.is_empty()) {
        // as objdump and the native walk do for a stripped object
        syms = crate::amd::decode::dynamic_symbols(&elf).unwrap_or_default();
    }
    use object::read::elf::SectionHeader;
    for s in &syms {
        let exec = elf.section(s.shndx as usize).is_some_and(|sh| sh.sh_flags(elf.endian) & object::elf::SHF_EXECINSTR as u64 != 0);
        if exec && !s.name.is_empty() && crate::amd::decode::is_function(s.st_type) {
            let e = out.entry(s.value).or_insert_with(|| s.name.to_string());
            if s.name > e.as_str() {
                *e = s.name.to_string();
            }
        }
    }
    out
}

/// Splits an AMD listing per function: a label at a function's entry starts that function
/// (even when objdump printed a local label there instead); other labels (Tensile's local
/// `label_*`) stay inside the current function. With no entries every label starts a bucket.
pub fn split_llvm_objdump_functions(r: impl std::io::BufRead, entries: &HashMap<u64, String>) -> HashMap<String, InstructionMix> {
    let mut sp = Splitter::new();
    each_line(r, |line| llvm_objdump_line(&mut sp, line, entries));
    sp.finish()
}

pub fn split_sass_lines(r: impl std::io::BufRead) -> HashMap<String, InstructionMix> {
    let mut sp = Splitter::new();
    each_line(r, |line| sass_line(&mut sp, line));
    sp.finish()
}

fn add(mix: &mut InstructionMix, opcode: &str, category: &'static str) {
    mix.total += 1;
    *mix.categories.entry(category.into()).or_default() += 1;
    match mix.opcodes.get_mut(opcode) {
        Some(n) => *n += 1,
        None => {
            mix.opcodes.insert(opcode.to_string().into(), 1);
        }
    }
}

/// llvm-objdump: `<symbol>:` (with or without a leading address) starts a function;
/// instruction lines are indented.
fn llvm_objdump_line(sp: &mut Splitter, line: &str, entries: &HashMap<u64, String>) {
    if let Some(rest) = line.strip_suffix(">:") {
        if let Some(i) = rest.find('<') {
            let name = &rest[i + 1..];
            if entries.is_empty() {
                sp.start(name);
                return;
            }
            let addr = u64::from_str_radix(rest[..i].trim(), 16).ok();
            match addr.and_then(|a| entries.get(&a)) {
                Some(f) => sp.start(f),
                None if sp.current.is_none() => sp.start(name),
                None => {}
            }
            return;
        }
    }
    if !line.starts_with('\t') && !line.starts_with("  ") {
        return;
    }
    let op = line.split_whitespace().next().unwrap_or("");
    if op.is_empty() || op.starts_with("//") || op.starts_with('.') || op.starts_with('<') {
        return;
    }
    sp.add_amd(op, amd_category(op));
}

/// nvdisasm (`.text.<fn>:` labels) and cuobjdump -sass (`Function : <fn>` headers).
fn sass_line(sp: &mut Splitter, line: &str) {
    let t = line.trim();
    if let Some(name) = t.strip_prefix(".text.").and_then(|r| r.strip_suffix(':')) {
        sp.start(name);
        return;
    }
    if let Some(name) = t.strip_prefix("Function : ") {
        sp.start(name.trim());
        return;
    }
    let Some(i) = t.find("*/") else { return };
    if !t.starts_with("/*") {
        return;
    }
    let mut ins = t[i + 2..].trim().trim_start_matches('{').trim();
    if ins.starts_with('@') {
        ins = ins.split_once(char::is_whitespace).map(|x| x.1).unwrap_or("").trim();
    }
    let mnemonic = ins.split(|c: char| c.is_whitespace() || c == ';').next().unwrap_or("");
    let base = mnemonic.split('.').next().unwrap_or("");
    if base.is_empty() || !base.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
        return;
    }
    sp.add(base, sass_category(base));
}
