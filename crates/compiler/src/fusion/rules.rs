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
//! | `conv-{act}` | `({act} ?c)`, `?c` a convolution with no activation | the convolution with `act` in its epilogue | `act` an activation ([`crate::ops::UnaryOp::is_activation`]) |
//! | `conv-residual` | `(add ?c ?z)`, `?c` a convolution with no residual nor activation | the convolution with `?z` as its residual operand | `?z` has the output's shape (no broadcast) |
//! | `add-commute` (and `mul-`, `equal-commute`) | `(add ?x ?y)` | `(add ?y ?x)` | |
//! | `relu-idempotent` (optional) | `(relu (relu ?x))` | `(relu ?x)` | |
//!
//! Because egg matches through e-classes, `relu(b + x.matmul(w))` fuses too (commutativity puts
//! `add(matmul, b)` in the same e-class). `add(relu(matmul), b)` never becomes RELU_BIAS: the
//! only way to RELU_BIAS is a `relu` whose operand e-class holds an `lt_bias`, i.e. equals
//! `matmul + b`, and `relu(matmul) + b` is a different value. The activation rules fuse the
//! activation AFTER the bias, the order cuBLASLt's `*_BIAS` epilogues compute.
//!
//! The convolution rules build ONNX Runtime's `FusedConv` (`act(conv + bias + residual)`, the
//! skip connection of a residual block included) in the e-graph: the residual add must come
//! before the activation, so `relu(conv + z)` fuses whole and `relu(conv) + z` keeps its add.
//! They are Rust appliers (a convolution's e-node carries its whole op, [`super::lang::OpData`]).
//!
//! The activation and commutativity rules are generated from the op table
//! ([`crate::ops::UnaryOp::epilogue_activation`], [`crate::ops::ElemOp::is_commutative`]), so
//! erf-GELU, which has no cuBLASLt epilogue, can never fuse. The bias must be `[N]` along the
//! last output axis of a product that is one GEMM (a 2-D right operand): a batched product's
//! `add` stays an `add`.

use egg::{Applier, ConditionalApplier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, Var};

use super::analysis::{ShapeAnalysis, enode_type};
use super::egraph::FusionEGraph;
use super::lang::FusionLang;
use crate::conv::ConvEpilogue;
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

/// The `conv-{act}` rule's applier: every convolution e-node of `?c` without an activation
/// gains one with `act`, in the matched e-class.
#[derive(Debug, Clone)]
pub struct ConvActivation {
    act: UnaryOp,
    c: Var,
}

impl Applier<FusionLang, ShapeAnalysis> for ConvActivation {
    fn apply_one(
        &self,
        egraph: &mut FusionEGraph,
        eclass: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<FusionLang>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let Some(&c) = subst.get(self.c) else { return Vec::new() };
        let fused: Vec<FusionLang> = egraph[c]
            .nodes
            .iter()
            .filter_map(FusionLang::conv_parts)
            .filter(|(_, e, _)| e.activation.is_none())
            .map(|(spec, e, ids)| {
                FusionLang::conv(spec, ConvEpilogue { activation: Some(self.act), ..e }, ids)
            })
            .collect();
        let mut changed = Vec::new();
        for node in fused {
            let id = egraph.add(node);
            if egraph.union(eclass, id) {
                changed.push(id);
            }
        }
        changed
    }

    fn vars(&self) -> Vec<Var> {
        vec![self.c]
    }
}

/// The `conv-residual` rule's applier: every convolution e-node of `?c` with neither a
/// residual nor an activation gains one reading `?z`, when `?z` has the convolution's shape.
#[derive(Debug, Clone)]
pub struct ConvResidual {
    c: Var,
    z: Var,
}

impl Applier<FusionLang, ShapeAnalysis> for ConvResidual {
    fn apply_one(
        &self,
        egraph: &mut FusionEGraph,
        eclass: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<FusionLang>>,
        _rule: Symbol,
    ) -> Vec<Id> {
        let (Some(&c), Some(&z)) = (subst.get(self.c), subst.get(self.z)) else {
            return Vec::new();
        };
        let (cd, zd, sd) = (&egraph[c].data, &egraph[z].data, &egraph[eclass].data);
        let same = cd.shape.is_some()
            && cd.shape == zd.shape
            && cd.shape == sd.shape
            && zd.dtype == cd.dtype;
        if !same || egraph.find(c) == egraph.find(z) {
            return Vec::new();
        }
        let fused: Vec<FusionLang> = egraph[c]
            .nodes
            .iter()
            .filter_map(FusionLang::conv_parts)
            .filter(|(_, e, _)| !e.residual && e.activation.is_none())
            .map(|(spec, e, ids)| {
                let mut children = ids.to_vec();
                children.push(z);
                FusionLang::conv(spec, ConvEpilogue { residual: true, ..e }, &children)
            })
            .collect();
        let mut changed = Vec::new();
        for node in fused {
            let id = egraph.add(node);
            if egraph.union(eclass, id) {
                changed.push(id);
            }
        }
        changed
    }

    fn vars(&self) -> Vec<Var> {
        vec![self.c, self.z]
    }
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
    for act in UnaryOp::ALL.into_iter().filter(|a| a.is_activation()) {
        let var_c = var("?c")?;
        rules.push(
            Rewrite::new(
                format!("conv-{act}"),
                pattern(&format!("({act} ?c)"))?,
                ConvActivation { act, c: var_c },
            )
            .map_err(|e| CompileError::Fusion(format!("bad rule conv-{act}: {e}")))?,
        );
    }
    rules.push(
        Rewrite::new(
            "conv-residual",
            pattern("(add ?c ?z)")?,
            ConvResidual { c: var("?c")?, z: var("?z")? },
        )
        .map_err(|e| CompileError::Fusion(format!("bad rule conv-residual: {e}")))?,
    );
    if set.relu_idempotence {
        rules.push(rule("relu-idempotent", "(relu (relu ?x))", "(relu ?x)")?);
    }
    Ok(rules)
}
