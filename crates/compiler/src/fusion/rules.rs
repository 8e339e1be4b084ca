//! The rewrite rules: matmul + bias + activation -> one cuBLASLt epilogue (SPEC section 3).
//!
//! | rule | from | to | condition |
//! |---|---|---|---|
//! | `fuse-bias` | `(add (matmul ?a ?w) ?b)` | `(lt_bias ?a ?w ?b)` | `?b` is `[N]` and indexes the last output axis |
//! | `fuse-relu-bias` | `(relu (lt_bias ?a ?w ?b))` | `(lt_relu_bias ?a ?w ?b)` | |
//! | `fuse-gelu-bias` | `(gelu (lt_bias ?a ?w ?b))` | `(lt_gelu_bias ?a ?w ?b)` | |
//! | `fuse-relu` | `(relu (matmul ?a ?w))` | `(lt_relu ?a ?w)` | |
//! | `fuse-gelu` | `(gelu (matmul ?a ?w))` | `(lt_gelu ?a ?w)` | |
//! | `add-commute` | `(add ?x ?y)` | `(add ?y ?x)` | |
//! | `relu-idempotent` (optional) | `(relu (relu ?x))` | `(relu ?x)` | |
//!
//! Because egg matches through e-classes, `relu(b + x.matmul(w))` fuses too (commutativity puts
//! `add(matmul, b)` in the same e-class). `add(relu(matmul), b)` never becomes RELU_BIAS: the
//! only way to RELU_BIAS is a `relu` whose operand e-class holds an `lt_bias`, i.e. equals
//! `matmul + b`, and `relu(matmul) + b` is a different value. The activation rules fuse the
//! activation AFTER the bias, the order cuBLASLt's `*_BIAS` epilogues compute.

use egg::{ConditionalApplier, Id, Pattern, Rewrite, Subst, Var};

use super::analysis::{ShapeAnalysis, bias_is_fusable, matmul_shape};
use super::lang::{FusionEGraph, FusionLang};
use crate::error::CompileError;

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

/// The legality condition of `fuse-bias`, read from the analysis: `?a x ?w` is a well-shaped
/// `[M, N]` product and `?b` is `[N]`, indexing its last axis ([`bias_is_fusable`]).
#[derive(Debug, Clone)]
pub struct BiasCondition {
    a: Var,
    w: Var,
    b: Var,
}

impl BiasCondition {
    /// Whether the substitution's bias may be fused into the product's epilogue.
    pub fn holds(&self, egraph: &FusionEGraph, subst: &Subst) -> bool {
        let shape = |v: Var| -> Option<&Vec<usize>> {
            let id: Id = *subst.get(v)?;
            egraph[id].data.shape.as_ref()
        };
        match (shape(self.a), shape(self.w), shape(self.b)) {
            (Some(a), Some(w), Some(b)) => {
                matmul_shape(a, w).is_some_and(|out| bias_is_fusable(b, &out))
            }
            _ => false,
        }
    }
}

impl egg::Condition<FusionLang, ShapeAnalysis> for BiasCondition {
    fn check(&self, egraph: &mut FusionEGraph, _eclass: Id, subst: &Subst) -> bool {
        self.holds(egraph, subst)
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
    let mut rules = vec![
        fuse_bias_rule()?,
        rule("fuse-relu-bias", "(relu (lt_bias ?a ?w ?b))", "(lt_relu_bias ?a ?w ?b)")?,
        rule("fuse-gelu-bias", "(gelu (lt_bias ?a ?w ?b))", "(lt_gelu_bias ?a ?w ?b)")?,
        rule("fuse-relu", "(relu (matmul ?a ?w))", "(lt_relu ?a ?w)")?,
        rule("fuse-gelu", "(gelu (matmul ?a ?w))", "(lt_gelu ?a ?w)")?,
        rule("add-commute", "(add ?x ?y)", "(add ?y ?x)")?,
    ];
    if set.relu_idempotence {
        rules.push(rule("relu-idempotent", "(relu (relu ?x))", "(relu ?x)")?);
    }
    Ok(rules)
}
