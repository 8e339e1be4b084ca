//! Random programs for the property tests (`reorder.rs`, `fusion_props.rs`): ops over the input
//! x [4, 8], a weight w [8, 8] and a bias b [8], every value [4, 8] so every op is valid, built
//! in any topological declaration order.

#![allow(dead_code)]

use lumen_compiler::{Graph, Tensor};
use proptest::prelude::*;

/// One op of a random program; operands index earlier values (value 0 is x; op `i` makes value
/// `i + 1`).
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Matmul(usize),
    /// `v + b`, or `b + v` when the flag is set.
    Bias(usize, bool),
    Add(usize, usize),
    Relu(usize),
    Gelu(usize),
}

impl Op {
    fn operands(&self) -> Vec<usize> {
        match *self {
            Op::Matmul(a) | Op::Bias(a, _) | Op::Relu(a) | Op::Gelu(a) => vec![a],
            Op::Add(a, c) => vec![a, c],
        }
    }
}

/// How [`program`] draws ops.
pub struct Draw {
    /// Programs have 1 to `max_ops` ops.
    pub max_ops: usize,
    /// Relative weights of matmul, bias, add, relu and gelu.
    pub weights: [u32; 5],
    /// Whether a bias may be added on the left (`b + v`); otherwise always `v + b`.
    pub bias_either_side: bool,
}

/// Random programs: the ops, which of them are outputs (the last always is) and the priority
/// that picks the declaration order (see [`build`]).
pub fn program(draw: Draw) -> impl Strategy<Value = (Vec<Op>, Vec<bool>, Vec<u32>)> {
    let Draw { max_ops, weights: [mm, bias, add, relu, gelu], bias_either_side } = draw;
    (1usize..=max_ops).prop_flat_map(move |n| {
        let ops: Vec<BoxedStrategy<Op>> = (0..n)
            .map(|i| {
                let v = 0..=i; // values available to op i
                let bias_op = if bias_either_side {
                    (v.clone(), any::<bool>()).prop_map(|(a, l)| Op::Bias(a, l)).boxed()
                } else {
                    v.clone().prop_map(|a| Op::Bias(a, false)).boxed()
                };
                prop_oneof![
                    mm => v.clone().prop_map(Op::Matmul),
                    bias => bias_op,
                    add => (v.clone(), v.clone()).prop_map(|(a, c)| Op::Add(a, c)),
                    relu => v.clone().prop_map(Op::Relu),
                    gelu => v.prop_map(Op::Gelu),
                ]
                .boxed()
            })
            .collect();
        (
            ops,
            proptest::collection::vec(any::<bool>(), n),
            proptest::collection::vec(any::<u32>(), n),
        )
    })
}

/// Builds the program, declaring ops in the topological order `priority` picks.
pub fn build(ops: &[Op], outputs: &[bool], priority: &[u32]) -> Graph {
    let n = ops.len();
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 8]);
    let w = cx.weight("w", [8, 8]);
    let b = cx.weight("b", [8]);
    let mut values: Vec<Option<Tensor>> = vec![Some(x)];
    values.resize(n + 1, None);
    let mut done = vec![false; n];
    for _ in 0..n {
        let Some(next) = (0..n)
            .filter(|&i| !done[i] && ops[i].operands().iter().all(|&v| values[v].is_some()))
            .min_by_key(|&i| (priority[i], i))
        else {
            break;
        };
        done[next] = true;
        let get = |v: usize| values[v].clone().unwrap();
        let t = match ops[next] {
            Op::Matmul(a) => get(a).matmul(&w),
            Op::Bias(a, false) => get(a) + &b,
            Op::Bias(a, true) => &b + get(a),
            Op::Add(a, c) => get(a) + get(c),
            Op::Relu(a) => get(a).relu(),
            Op::Gelu(a) => get(a).gelu(),
        };
        if outputs[next] || next == n - 1 {
            t.output(format!("y{next}"));
        }
        values[next + 1] = Some(t);
    }
    cx
}
