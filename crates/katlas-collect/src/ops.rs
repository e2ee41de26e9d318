//! Op classification: kernel name -> family.role and phase hint, by ordered
//! rules kept as data (`data/ops.toml`, overridable from the project's
//! `.katlas/rules/ops.toml`, whose rules are tried first).

use katlas_model::OpClass;
use regex::Regex;
use serde::Deserialize;
use std::path::Path;

const BUILTIN: &str = include_str!("../../../data/ops.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    name: String,
    #[serde(rename = "match")]
    pattern: String,
    #[serde(default)]
    not: Option<String>,
    family: String,
    role: String,
    #[serde(default)]
    phase_hint: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

#[derive(Debug)]
pub struct Rule {
    pub name: String,
    re: Regex,
    not: Option<Regex>,
    pub family: String,
    pub role: String,
    pub phase_hint: Option<String>,
}

#[derive(Debug)]
pub struct OpRules {
    pub rules: Vec<Rule>,
}

#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {message}")]
pub struct RulesError {
    pub source_name: String,
    pub message: String,
}

impl katlas_fs::class::Classify for RulesError {
    fn class(&self) -> katlas_fs::class::Class {
        katlas_fs::class::Class::Input
    }
}

fn compile(pat: &str, source: &str, rule: &str, field: &str) -> Result<Regex, RulesError> {
    Regex::new(&format!("(?i){pat}"))
        .map_err(|e| RulesError { source_name: source.into(), message: format!("rule `{rule}`: field `{field}`: invalid regex: {e}") })
}

impl OpRules {
    pub fn from_toml(text: &str, source: &str) -> Result<Self, RulesError> {
        let file: RuleFile = toml::from_str(text).map_err(|e| RulesError { source_name: source.into(), message: e.to_string() })?;
        let mut rules = Vec::with_capacity(file.rule.len());
        for r in file.rule {
            rules.push(Rule {
                re: compile(&r.pattern, source, &r.name, "match")?,
                not: r.not.as_deref().map(|n| compile(n, source, &r.name, "not")).transpose()?,
                name: r.name,
                family: r.family,
                role: r.role,
                phase_hint: r.phase_hint,
            });
        }
        Ok(Self { rules })
    }

    /// The rules shipped with katlas.
    pub fn builtin() -> Self {
        Self::from_toml(BUILTIN, "data/ops.toml").expect("builtin data/ops.toml is valid (tested)")
    }

    /// Project rules from `rules_dir/ops.toml` (when present) before the builtin ones.
    pub fn with_project(rules_dir: &Path) -> Result<Self, RulesError> {
        let mut all = Self::builtin();
        let p = rules_dir.join("ops.toml");
        match std::fs::read_to_string(&p) {
            Ok(text) => {
                let mut project = Self::from_toml(&text, &p.display().to_string())?;
                project.rules.append(&mut all.rules);
                Ok(project)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(all),
            Err(e) => Err(RulesError { source_name: p.display().to_string(), message: e.to_string() }),
        }
    }

    /// Class of a kernel; `other.unknown` when no rule matches.
    pub fn classify(&self, name: &str, demangled: Option<&str>) -> OpClass {
        for r in &self.rules {
            let hit = |s: &str| r.re.is_match(s) && !r.not.as_ref().is_some_and(|n| n.is_match(s));
            if hit(name) || demangled.is_some_and(hit) {
                return OpClass { family: r.family.clone(), role: r.role.clone(), phase_hint: r.phase_hint.clone(), rule: Some(r.name.clone()) };
            }
        }
        OpClass { family: "other".into(), role: "unknown".into(), phase_hint: None, rule: None }
    }

    /// Fill `op` (and `demangled`) on every kernel of a table.
    pub fn classify_all(&self, kernels: &mut [katlas_model::KernelSample]) {
        for k in kernels {
            if k.demangled.is_none() {
                k.demangled = katlas_names::demangle(&k.name);
            }
            k.op = Some(self.classify(&k.name, k.demangled.as_deref()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr(name: &str) -> String {
        let c = OpRules::builtin().classify(name, katlas_names::demangle(name).as_deref());
        format!("{}.{}", c.family, c.role)
    }

    #[test]
    fn hipfire_names() {
        assert_eq!(fr("fused_rmsnorm_mq_rotate"), "norm.rmsnorm_rotate");
        assert_eq!(fr("mq_rotate_f16"), "rotation.mq_rotate");
        assert_eq!(fr("fused_qkvza_hfq4g256"), "linear.qkv_projection");
        assert_eq!(fr("gemm_qkvza_hfq4g256_wmma"), "linear.qkv_projection");
        assert_eq!(fr("kv_cache_write_asym3"), "kv_cache.cache_write");
        assert_eq!(fr("fused_gate_up_hfq4g256"), "linear.gate_up_projection");
        assert_eq!(fr("gemv_hfq4g256_residual"), "linear.residual_gemv");
        assert_eq!(fr("gemv_hfq4g256_multirow_default_r2"), "linear.gemv");
        assert_eq!(fr("attention_flash_asym3"), "attention.flash_attention");
        assert_eq!(fr("attention_q8_0_kv"), "attention.decode_attention");
        assert_eq!(fr("fused_qk_l2_norm_scale_f32"), "norm.l2norm");
        assert_eq!(fr("argmax_f32"), "sampling.select");
        assert_eq!(fr("embedding_q8f16"), "embedding.lookup");
        assert_eq!(fr("rope_apply_f16"), "position.rope");
    }

    #[test]
    fn library_names() {
        assert_eq!(fr("nvjet_sm90_tst_64x8_64x16_2x4_h_bz_TNT"), "linear.gemm");
        assert_eq!(fr("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)"), "linear.gemm");
        assert_eq!(fr("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"), "linear.gemm");
        assert_eq!(fr("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false>(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, float>, float, float)"), "linear.gemv");
        assert_eq!(fr("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0"), "linear.gemm");
        assert_eq!(
            fr("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t> >(Flash_fwd_params)"),
            "attention.flash_attention"
        );
        assert_eq!(fr("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, float const*, int)"), "softmax.softmax");
        assert_eq!(fr("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"), "reduction.reduce");
        assert_eq!(fr("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, std::array<char*, 1ul> >(int, at::native::FillFunctor<bool>, std::array<char*, 1ul>)"), "elementwise.elementwise");
        assert_eq!(fr("void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"), "elementwise.activation");
        assert_eq!(fr("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*)"), "position.rope");
        assert_eq!(fr("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*)"), "norm.rmsnorm");
        assert_eq!(fr("_Z13layernorm_fwdPfPKfi"), "norm.layernorm");
        assert_eq!(fr("totally_custom_thing"), "other.unknown");
    }

    #[test]
    fn project_rules_first_and_errors_name_rule() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ops.toml"), "[[rule]]\nname='mine'\nmatch='^gemv_hfq4'\nfamily='linear'\nrole='hfq4_gemv'\n").unwrap();
        let r = OpRules::with_project(dir.path()).unwrap();
        assert_eq!(r.classify("gemv_hfq4g256_residual", None).role, "hfq4_gemv");
        std::fs::write(dir.path().join("ops.toml"), "[[rule]]\nname='bad'\nmatch='('\nfamily='x'\nrole='y'\n").unwrap();
        let e = OpRules::with_project(dir.path()).unwrap_err().to_string();
        assert!(e.contains("rule `bad`") && e.contains("ops.toml"), "{e}");
    }
}
