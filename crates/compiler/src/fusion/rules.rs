//! The rewrite rules: matmul + bias + activation -> one cuBLASLt epilogue.
//!
//! | rule | from | to | condition |
//! |---|---|---|---|
//! | `fuse-bias` | `(add (matmul ?a ?w) ?b)` | `(lt_bias ?a ?w ?b)` | `?b` is `[N]` and indexes the last output axis |
//! | `fuse-relu-bias` | `(relu (lt_bias ?a ?w ?b))` | `(lt_relu_bias ?a ?w ?b)` | |
//! | `fuse-gelu-bias` | `(gelu (lt_bias ?a ?w ?b))` | `(lt_gelu_bias ?a ?w ?b)` | |
//! | `fuse-relu` | `(relu (matmul ?a ?w))` | `(lt_relu ?a ?w)` | |
//! | `fuse-gelu` | `(gelu (matmul ?a ?w))` | `(lt_gelu ?a ?w)` | |
//! | `fuse-silu` | `(mul ?x (sigmoid ?x))` | `(silu ?x)` | |
//! | `add-commute` (and `mul-`, `equal-commute`) | `(add ?x ?y)` | `(add ?y ?x)` | |
//! | `relu-idempotent` (optional) | `(relu (relu ?x))` | `(relu ?x)` | |
//!
//! Because egg matches through e-classes, `relu(b + x.matmul(w))` fuses too (commutativity puts
//! `add(matmul, b)` in the same e-class). `add(relu(matmul), b)` never becomes RELU_BIAS: the
//! only way to RELU_BIAS is a `relu` whose operand e-class holds an `lt_bias`, i.e. equals
//! `matmul + b`, and `relu(matmul) + b` is a different value. The activation rules fuse the
//! activation AFTER the bias, the order cuBLASLt's `*_BIAS` epilogues compute.
//!
//! The activation and commutativity rules are generated from the op table
//! ([`crate::ops::UnaryOp::epilogue_activation`], [`crate::ops::ElemOp::is_commutative`]), so
//! erf-GELU, which has no cuBLASLt epilogue, can never fuse. The bias must be `[N]` along the
//! last output axis of a product that is one GEMM (a 2-D right operand): a batched product's
//! `add` stays an `add`.

use egg::{ConditionalApplier, Id, Pattern, Rewrite, Subst, Var};

use super::analysis::{ShapeAnalysis, enode_type};
use super::egraph::FusionEGraph;
use super::lang::FusionLang;
use crate::error::CompileError;
use crate::hlir::TensorType;
use crate::llir::Epilogue;
use crate::ops::{BinaryOp, ElemOp, UnaryOp};

/// A fusion rewrite over the HLIR e-graph.
pub type FusionRewrite = Rewrite<FusionLang, ShapeAnalysis>;

/// Which rules to run. `Default` is the rule set `compile` uses: every fusion rule and add
/// commutativity, without relu idempotence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuleSet {
    /// `relu(relu(x)) = relu(x)`: an algebraic simplification, off by default (it changes the
    /// program beyond fusion); its rewrites make self-loops in the e-graph, which the
    /// extraction's strictly monotone cost never picks.
    pub relu_idempotence: bool,
}

fn pattern(text: &str) -> Result<Pattern<FusionLang>, CompileError> {
    text.parse().map_err(|e| CompileError::Fusion(format!("bad rule pattern {text:?}: {e}")))
}

fn var(name: &str) -> Result<Var, CompileError> {
    name.parse().map_err(|e| CompileError::Fusion(format!("bad rule variable {name:?}: {e}")))
}

fn rule(name: &str, from: &str, to: &str) -> Result<FusionRewrite, CompileError> {
    Rewrite::new(name, pattern(from)?, pattern(to)?)
        .map_err(|e| CompileError::Fusion(format!("bad rule {name}: {e}")))
}

/// The legality condition of `fuse-bias`, read from the analysis: `?a x ?w + ?b` is typed as
/// a BIAS-epilogue matmul by the HLIR's own rule (`?b` is `[N]`, `?w` is 2-D: one GEMM), and
/// the sum has the product's shape (the product itself is not broadcast).
#[derive(Debug, Clone)]
pub struct BiasCondition {
    a: Var,
    w: Var,
    b: Var,
}

impl BiasCondition {
    /// Whether the substitution's bias may be fused into the product's epilogue of the sum
    /// e-class `sum`.
    pub fn holds(&self, egraph: &FusionEGraph, sum: Id, subst: &Subst) -> bool {
        let ty = |id: Id| -> Option<TensorType> {
            let d = &egraph[id].data;
            d.shape.clone().zip(d.dtype).map(|(shape, dtype)| TensorType { shape, dtype })
        };
        let var = |v: Var| subst.get(v).copied().and_then(ty);
        let zero = Id::from(0usize);
        let fused = FusionLang::LtBias([zero, zero, zero]);
        match enode_type(&fused, &[var(self.a), var(self.w), var(self.b)]) {
            Some(t) => ty(sum).is_some_and(|s| s == t),
            None => false,
        }
    }
}

impl egg::Condition<FusionLang, ShapeAnalysis> for BiasCondition {
    fn check(&self, egraph: &mut FusionEGraph, eclass: Id, subst: &Subst) -> bool {
        self.holds(egraph, eclass, subst)
    }

    fn vars(&self) -> Vec<Var> {
        vec![self.a, self.w, self.b]
    }
}

/// The `fuse-bias` rule with its legality condition.
///
/// # Errors
/// [`CompileError::Fusion`] only if the built-in patterns fail to parse (a bug).
pub fn fuse_bias_rule() -> Result<FusionRewrite, CompileError> {
    let applier = ConditionalApplier {
        condition: BiasCondition { a: var("?a")?, w: var("?w")?, b: var("?b")? },
        applier: pattern("(lt_bias ?a ?w ?b)")?,
    };
    Rewrite::new("fuse-bias", pattern("(add (matmul ?a ?w) ?b)")?, applier)
        .map_err(|e| CompileError::Fusion(format!("bad rule fuse-bias: {e}")))
}

/// The rules of `set`, in the table's order.
///
/// # Errors
/// [`CompileError::Fusion`] only if the built-in patterns fail to parse (a bug).
pub fn rules(set: &RuleSet) -> Result<Vec<FusionRewrite>, CompileError> {
    let mut rules = vec![fuse_bias_rule()?];
    let fused_name = |e: Epilogue| match e {
        Epilogue::Default => "matmul",
        Epilogue::Bias => "lt_bias",
        Epilogue::Relu => "lt_relu",
        Epilogue::ReluBias => "lt_relu_bias",
        Epilogue::Gelu => "lt_gelu",
        Epilogue::GeluBias => "lt_gelu_bias",
    };
    let activations: Vec<UnaryOp> =
        UnaryOp::ALL.into_iter().filter_map(UnaryOp::epilogue_activation).collect();
    for &act in &activations {
        if let Some(e) = Epilogue::from_parts(true, Some(act)) {
            rules.push(rule(
                &format!("fuse-{act}-bias"),
                &format!("({act} (lt_bias ?a ?w ?b))"),
                &format!("({} ?a ?w ?b)", fused_name(e)),
            )?);
        }
    }
    for &act in &activations {
        if let Some(e) = Epilogue::from_parts(false, Some(act)) {
            rules.push(rule(
                &format!("fuse-{act}"),
                &format!("({act} (matmul ?a ?w))"),
                &format!("({} ?a ?w)", fused_name(e)),
            )?);
        }
    }
    // SiLU as exporters write it (PyTorch's `x * torch.sigmoid(x)`, ONNX `Mul(x, Sigmoid(x))`):
    // one map instead of two; `mul-commute` puts the other operand order in the same e-class.
    rules.push(rule("fuse-silu", "(mul ?x (sigmoid ?x))", "(silu ?x)")?);
    for op in BinaryOp::ALL.into_iter().filter(|&op| ElemOp::Binary(op).is_commutative()) {
        rules.push(rule(
            &format!("{op}-commute"),
            &format!("({op} ?x ?y)"),
            &format!("({op} ?y ?x)"),
        )?);
    }
    if set.relu_idempotence {
        rules.push(rule("relu-idempotent", "(relu (relu ?x))", "(relu ?x)")?);
    }
    Ok(rules)
}
