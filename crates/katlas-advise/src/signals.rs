//! The fit view's signals: one table says each signal's name, type, the evidence it needs and
//! what it means. The rules files may name these or what a fired rule `emits`; `evidence_for`
//! (the missing-evidence list), the timeline metrics a row carries and the docs table
//! (docs/fit.md "Signals", checked by a test) all read it.

/// The type of a signal's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Number,
    Flag,
    Word,
    List,
}

/// The evidence a signal is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Profile,
    Bytes,
    Flops,
    Counters,
    Launch,
    Isa,
    Occupancy,
    Mix,
    Op,
    Row,
    Arch,
    /// A row metric of the phase timeline (torch-trace parser, data/timeline.toml).
    Timeline,
    /// A timeline metric that needs host launch calls and step markers.
    Host,
    /// Triton launch records or cache entries joined to the kernel (suggest reads them).
    Triton,
}

use Kind::*;
use Source::*;

impl Source {
    /// The evidence that would give signals of this source, as the missing list says it.
    pub fn evidence(self) -> &'static str {
        match self {
            Profile => "a profile (per-kernel calls and times)",
            Bytes => "bytes moved per call (profiler DRAM counters or bytes) and a product bandwidth ceiling",
            Flops => "FLOPs per call and a product peak rate",
            Counters => "Nsight Compute counters",
            Launch => "launch geometry (grid and block size) and a product unit count",
            Isa => "an ISA manifest entry for the kernel",
            Occupancy => "kernel resources (ISA manifest entry or profiler registers/shared memory)",
            Mix => "an instruction mix (ISA scan with a disassembler)",
            Op => "the row's phase and op class",
            Row => "the row's route and env",
            Arch => "the arch atom",
            Timeline => "a timeline of the phase (a trace with per-launch kernel start times: torch-trace, nsys, rocprofv3 kernel trace)",
            Host => "host launch calls and step markers in the trace (CUPTI runtime events, ProfilerStep#)",
            Triton => "Triton launch records or cache entries joined to the kernel (num_warps, num_stages, constexprs, autotune, the jit function's file:line)",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Profile => "profile",
            Bytes => "bytes",
            Flops => "flops",
            Counters => "ncu counters",
            Launch => "launch",
            Isa => "ISA",
            Occupancy => "occupancy",
            Mix => "instruction mix",
            Op => "phase and op",
            Row => "row",
            Arch => "arch",
            Timeline => "timeline",
            Host => "timeline (host)",
            Triton => "Triton",
        }
    }
}

/// One signal the fit view computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalDef {
    pub name: &'static str,
    pub kind: Kind,
    pub from: Source,
    pub doc: &'static str,
}

const fn def(name: &'static str, kind: Kind, from: Source, doc: &'static str) -> SignalDef {
    SignalDef { name, kind, from, doc }
}

/// Every signal the fit view computes (rules may also `emit` flags of their own).
pub const SIGNALS: &[SignalDef] = &[
    def("kernel", Word, Profile, "the view's short name of the kernel (rule texts quote it)"),
    def("share_pct", Number, Profile, "percent of the phase's GPU time"),
    def("calls", Number, Profile, "launches of the kernel in the phase"),
    def("avg_us", Number, Profile, "mean time per call, us"),
    def("total_us", Number, Profile, "time of all calls, us"),
    def("bw_gbps", Number, Bytes, "achieved bandwidth, GB/s (counters, bytes per call, shapes or the workload's own figure)"),
    def("bw_pct", Number, Bytes, "bw_gbps as % of the product's bandwidth ceiling"),
    def("bw_peak_gbps", Number, Bytes, "the ceiling, GB/s"),
    def("bw_peak_label", Word, Bytes, "`measured` or `datasheet`"),
    def("bw_source", Word, Bytes, "where the bytes came from (`dram counters`, `bytes per call`, `from shapes`, `reported by workload`)"),
    def(
        "bytes_source",
        Word,
        Bytes,
        "what the bytes per call were estimated from (`launch operands by loads/stores`, `launch operands`, `op operands`, shape formulas), when not counted",
    ),
    def("headroom_pct", Number, Bytes, "share x (1 - bw_pct/100): phase time left if it reached the ceiling"),
    def("bw_unknown", Flag, Profile, "the profile gives the kernel no bytes and no bandwidth"),
    def("bytes_how", Word, Profile, "how to get the kernel's bytes: the parser's note on why it has none, else the counters command"),
    def("graph_replayed_calls", Number, Profile, "calls replayed from a CUDA/HIP graph (torch trace: no op, so no shapes)"),
    def("tflops", Number, Flops, "achieved TFLOP/s"),
    def("compute_pct", Number, Flops, "tflops as % of the product's peak rate (or ncu's sm__throughput)"),
    def("compute_peak", Number, Flops, "the peak rate, TFLOP/s"),
    def("compute_peak_key", Word, Flops, "which peak (`bf16_matrix`, `fp16_matrix`, `fp32`)"),
    def("compute_source", Word, Flops, "how compute_pct was read"),
    def("memory_sol_pct", Number, Counters, "ncu's memory speed of light, percent"),
    def("achieved_occupancy_pct", Number, Counters, "ncu's sm__warps_active, percent"),
    def("launch_waves", Number, Launch, "waves (warps) the launch puts on the GPU"),
    def("simds", Number, Launch, "SIMDs (AMD) or SM sub-partitions (NVIDIA) of the product"),
    def("launch_waves_per_simd", Number, Launch, "launch_waves / simds"),
    def("vgpr", Number, Isa, "registers (AMD VGPRs, NVIDIA registers/thread)"),
    def("sgpr", Number, Isa, "AMD scalar registers"),
    def("agpr", Number, Isa, "AMD accumulation registers"),
    def("spills", Number, Isa, "registers spilled (AMD) or spill bytes (NVIDIA ptxas log)"),
    def("scratch_bytes", Number, Isa, "scratch / local memory per lane, bytes"),
    def("lds_bytes", Number, Isa, "static LDS / shared memory per workgroup, bytes"),
    def("wave_size", Number, Isa, "wave (warp) size the kernel was built for"),
    def("occupancy_waves", Number, Occupancy, "resident waves per SIMD (NVIDIA: warps per SM sub-partition)"),
    def("occupancy_max", Number, Occupancy, "the hardware maximum in the same unit"),
    def("occupancy_pct", Number, Occupancy, "occupancy_waves / occupancy_max, percent"),
    def("occupancy_limiter", Word, Occupancy, "the bounding resource (`vgpr`, `lds`, `registers`, `shared_memory` …)"),
    def("occupancy_error", Word, Occupancy, "why occupancy could not be computed"),
    def("mix_total", Number, Mix, "instructions in the kernel"),
    def("matrix_ops", Number, Mix, "matrix (WMMA/MFMA/MMA) instructions"),
    def("valu_frac", Number, Mix, "vector ALU share of instructions (0-1)"),
    def("valu_frac_pct", Number, Mix, "the same in percent"),
    def("vmem_loads", Number, Mix, "vector memory loads"),
    def("vmem_wide_frac", Number, Mix, "share of loads that are 128-bit (0-1)"),
    def("vmem_wide_frac_pct", Number, Mix, "the same in percent"),
    def("phase", Word, Op, "the row's phase"),
    def("phase_prefill", Flag, Op, "the phase is a prefill"),
    def("phase_decode", Flag, Op, "the phase is a decode"),
    def("is_gemm", Flag, Op, "a GEMM/GEMV by op or name"),
    def("decode_gemv", Flag, Op, "a one-token GEMV (M = 1 from shapes, or a decode GEMV by phase and op)"),
    def("gemv_evidence", Word, Op, "what says it is a one-token GEMV"),
    def("projection", Flag, Op, "a projection by op role or name"),
    def("op_family", Word, Op, "the op family (data/ops.toml)"),
    def("op_role", Word, Op, "the op role"),
    def("is_elementwise", Flag, Op, "an elementwise op (`[settings] elementwise_families`)"),
    def("is_reduction", Flag, Op, "a reduction (`[settings] reduction_families`)"),
    def(
        "memory_class",
        Flag,
        Op,
        "an op class whose time is its bytes over bandwidth: a one-token GEMV, a GEMM or attention of a decode phase (no batched word), an elementwise op, a reduction or norm",
    ),
    def("memory_class_evidence", Word, Op, "what makes it one"),
    def("library_kernel", Flag, Op, "a vendor/framework library kernel (`[settings] library_prefixes`)"),
    def("small_transform", Flag, Op, "a transform whose bytes and time per call, where known, are small"),
    def("transform_evidence", Word, Op, "what made it a small transform"),
    def("fusion_neighbour", Word, Op, "the heavy kernel next to the transform in the phase's kernel list"),
    def("fusion_neighbour_share_pct", Number, Op, "that neighbour's share of the phase"),
    def("graph_enabled", Flag, Row, "the row's route ran with graph capture"),
    def("route_knobs", Flag, Row, "the row's env holds a knob that can change a route"),
    def("route_knob_list", Word, Row, "those knobs, `NAME=value`"),
    def("dispatch_knobs", Flag, Row, "dispatch provenance exposes env controls for the kernel (suggest)"),
    def("arch", Word, Arch, "the arch atom"),
    def("arch_class", Word, Arch, "its class"),
    def("arch_family", Word, Arch, "its family"),
    def("vendor", Word, Arch, "`amd` or `nvidia`"),
    def("caps", List, Arch, "capabilities of the atom"),
    def("wave_sizes", List, Arch, "wave sizes the atom supports"),
    def("wave_size_choices", Number, Arch, "how many"),
    def("matrix_capable", Flag, Arch, "the atom has matrix units"),
    def("matrix_units", Word, Arch, "their names"),
    def("gpu_busy_pct", Number, Timeline, "kernel time over the trace window, percent"),
    def("gpu_busy_us", Number, Timeline, "kernel time (overlap once), us"),
    def("timeline_window_us", Number, Timeline, "first kernel start to last kernel end, us"),
    def("timeline_window_ms", Number, Timeline, "the same in ms"),
    def("gap_median_us", Number, Timeline, "median idle gap between kernels, us"),
    def("gap_p90_us", Number, Timeline, "90th percentile gap, us"),
    def("launches", Number, Timeline, "launches the host issued in the window: a kernel launched on its own is one, a graph launch is one"),
    def("kernel_avg_us", Number, Timeline, "mean kernel duration, us"),
    def("graph_launches", Number, Timeline, "CUDA/HIP graph launches in the phase, each one of `launches` (0 on a timeline without any)"),
    def("graph_replayed_kernels", Number, Timeline, "kernels those graph launches replayed (no op in the trace, so no shapes)"),
    def("host_launch_us", Number, Host, "host time per launch API call, us"),
    def("steps", Number, Host, "steps (ProfilerStep# or the first step op's calls)"),
    def("launches_per_step", Number, Host, "launches / steps"),
    def("step_us", Number, Host, "window / steps, us"),
    def("framework", Word, Row, "`torch` for torch traces, else `other`"),
    def("counters_command", Word, Arch, "the command that gets per-kernel DRAM bytes on the arch's vendor (ncu or rocprofv3 counters through `katlas collect --profile`)"),
    def(
        "launch_limited",
        Flag,
        Launch,
        "launch-bound by the fit rule, or shorter than `[settings] short_kernel_us` (levers.toml) while moving under 10% of peak bandwidth (suggest)",
    ),
    def("grid_blocks", Number, Launch, "programs (blocks) in the launch's grid (suggest)"),
    def("grid", Word, Launch, "the launch's grid `[x, y, z]` (suggest)"),
    def("sms", Number, Launch, "SMs (CUs) of the product (suggest)"),
    def("blocks_per_sm", Number, Launch, "resident blocks of this kernel per SM, from occupancy (suggest)"),
    def("grid_fill_pct", Number, Launch, "grid_blocks / (sms x blocks_per_sm), percent: how much of the machine's resident slots one launch fills (suggest)"),
    def("triton", Flag, Triton, "a Triton kernel: launch records or a cache entry were joined to it (false without them)"),
    def("triton.num_warps", Number, Triton, "num_warps of the launch (fit, from `extra.triton`)"),
    def("triton.num_stages", Number, Triton, "num_stages of the launch (fit)"),
    def("triton.shared", Number, Triton, "dynamic shared memory per block, bytes (fit)"),
    def("triton.constexprs", Word, Triton, "the launch's constexprs as fit shows them"),
    def("triton.autotune_configs", Number, Triton, "configs the autotuner chose among (fit)"),
    def("num_warps", Number, Triton, "the launch's num_warps"),
    def("num_warps_alt", Number, Triton, "the num_warps a first step tries: half from 8 up, else double"),
    def("num_stages", Number, Triton, "the launch's num_stages (software-pipelining depth)"),
    def("num_stages_alt", Number, Triton, "one stage deeper (at most 5)"),
    def("num_stages_lower", Number, Triton, "one stage shallower (at least 1)"),
    def("triton_source", Word, Triton, "file:line of the `@triton.jit` function (site-packages prefix dropped)"),
    def("constexprs", Word, Triton, "the launch's numeric constexprs (`BK=64, BV=64`: block sizes are the autotune winner)"),
    def("split_constexpr", Word, Triton, "the smallest block constexpr (`BV`, `BLOCK_SIZE`): halving it adds programs along its axis"),
    def("split_value", Number, Triton, "its value"),
    def("split_half", Number, Triton, "half of it"),
    def("tile_constexpr", Word, Triton, "the largest block constexpr: the tile that holds the most registers"),
    def("tile_value", Number, Triton, "its value"),
    def("tile_half", Number, Triton, "half of it"),
    def("autotuned", Flag, Triton, "an `@triton.autotune` kernel (an autotune record was joined)"),
    def("autotune_configs", Number, Triton, "configs the autotuner chose among"),
    def("autotune_key", Word, Triton, "the autotune key names"),
    def("autotune_best", Word, Triton, "the winning config (`BK=64, BV=64, num_warps=4, num_stages=3`)"),
    def("autotune_next", Word, Triton, "the winner's neighbour the list lacks, as `triton.Config` takes it (last block doubled, one stage deeper)"),
];

/// The definition of a computed signal.
pub fn get(name: &str) -> Option<&'static SignalDef> {
    SIGNALS.iter().find(|d| d.name == name)
}

/// Evidence a signal stands for, for the `missing` list.
pub fn evidence_for(name: &str) -> &'static str {
    get(name).map(|d| d.from.evidence()).unwrap_or("further evidence")
}

/// Row metrics that are phase-timeline signals (`timeline_window_ms` is derived, not a metric).
pub fn timeline_metrics() -> impl Iterator<Item = &'static str> {
    SIGNALS.iter().filter(|d| matches!(d.from, Timeline | Host) && d.name != "timeline_window_ms").map(|d| d.name)
}

/// Whether a row metric is a timeline signal.
pub fn is_timeline_metric(name: &str) -> bool {
    timeline_metrics().any(|n| n == name)
}

/// The docs table (docs/fit.md "Signals"): one row per signal, in table order.
pub fn markdown_table() -> String {
    let mut out = String::from("| signal | type | from | meaning |\n|---|---|---|---|\n");
    for d in SIGNALS {
        let kind = match d.kind {
            Number => "number",
            Flag => "flag",
            Word => "word",
            List => "list",
        };
        out.push_str(&format!("| `{}` | {kind} | {} | {} |\n", d.name, d.from.name(), d.doc));
    }
    out
}
