//! The random tensor-program generator shared by the CPU differential test
//! (`tests/tensor_differential.rs`) and the CUDA tests (`tests/cuda.rs`, against the CPU
//! runtime): every op kind, drawn from a seed.
#![allow(dead_code)]

use std::collections::BTreeMap;

use lumen_compiler::{DType, Graph, Tensor};
use lumen_runtime::{HostTensor, Tensors};

/// SplitMix64: every choice of a program comes from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    }
}

/// A random program: its graph, the tensors to feed it, and the same values for the HLIR
/// interpreter. Also which op kinds it used, for the coverage check.
pub struct Case {
    /// The program.
    pub graph: Graph,
    /// Its weights.
    pub weights: Tensors,
    /// Its inputs.
    pub inputs: Tensors,
    /// Every leaf's values in f64, by name, for the HLIR interpreter.
    pub leaves: BTreeMap<String, Vec<f64>>,
    /// The op kinds it used.
    pub kinds: Vec<&'static str>,
}

fn leaf(cx: &mut Graph, rng: &mut Rng, case: &mut Case, shape: Vec<usize>) -> Tensor {
    let name = format!("a{}", case.leaves.len());
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
    case.leaves.insert(name.clone(), data.iter().map(|&v| f64::from(v)).collect());
    let t = HostTensor::new(shape.clone(), data).unwrap();
    if rng.below(2) == 0 {
        case.inputs.insert(name.clone(), t);
        cx.input(name, shape)
    } else {
        case.weights.insert(name.clone(), t);
        cx.weight(name, shape)
    }
}

/// The random program of `seed`.
pub fn build(seed: u64) -> Case {
    let mut rng = Rng(seed);
    let mut cx = Graph::new();
    let mut case = Case {
        graph: cx.clone(),
        weights: Tensors::new(),
        inputs: Tensors::new(),
        leaves: BTreeMap::new(),
        kinds: Vec::new(),
    };
    // Every tensor broadcasts to one shape S, so any two combine.
    let rank = 1 + rng.below(4);
    let full: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4)).collect();
    let mut leaves: Vec<Tensor> = Vec::new();
    for _ in 0..2 + rng.below(2) {
        let drop = rng.below(rank);
        let shape: Vec<usize> =
            full[drop..].iter().map(|&d| if rng.below(3) == 0 { 1 } else { d }).collect();
        leaves.push(leaf(&mut cx, &mut rng, &mut case, shape));
    }
    let mut pool: Vec<Tensor> = leaves.clone();
    let mut extra_outputs: Vec<Tensor> = Vec::new();
    let steps = 2 + rng.below(8);
    for _ in 0..steps {
        let x = pool[rng.below(pool.len())].clone();
        let y = pool[rng.below(pool.len())].clone();
        let shape = x.shape().unwrap();
        let r = shape.len();
        let kind = rng.below(11);
        let t = match kind {
            0 => {
                case.kinds.push("unary");
                match rng.below(11) {
                    0 => -&x,
                    1 => x.tanh().exp(),
                    2 => (&x * &x + 0.5).log(),
                    3 => (&x * &x + 0.5).sqrt(),
                    4 => (&x * &x + 0.5).recip(),
                    5 => x.tanh(),
                    6 => x.erf(),
                    7 => x.relu(),
                    8 => x.gelu(),
                    9 => x.contiguous(),
                    _ => 1.0 - &x,
                }
            }
            1 => {
                case.kinds.push("binary");
                match rng.below(5) {
                    0 => &x + &y,
                    1 => &x - &y,
                    2 => &x * &y,
                    3 => &x / (&y * &y + 0.5),
                    _ => x.maximum(&y),
                }
            }
            2 => {
                // Comparisons of leaves only: exact in f32 and f64 alike.
                case.kinds.push("select");
                let (a, b) = (&leaves[rng.below(leaves.len())], &leaves[rng.below(leaves.len())]);
                let cond = if rng.below(2) == 0 { a.less_than(b) } else { a.equal(a.maximum(b)) };
                cond.select(&x, &y)
            }
            3 if r > 0 => {
                case.kinds.push("reduce");
                let axis = rng.below(r) as isize;
                if rng.below(2) == 0 { x.sum(axis, true) * 0.25 } else { x.max(axis, true) }
            }
            4 if r > 1 => {
                case.kinds.push("permute");
                let mut perm: Vec<isize> = (0..r as isize).collect();
                perm.rotate_left(1 + rng.below(r - 1));
                let mut inverse = vec![0isize; r];
                for (i, &p) in perm.iter().enumerate() {
                    inverse[p as usize] = i as isize;
                }
                let moved = x.permute(&perm);
                let n: usize = shape.iter().product();
                // A flat reshape of a permuted view needs a copy; sometimes make one.
                let moved = if rng.below(2) == 0 {
                    let s = moved.shape().unwrap();
                    moved.reshape([n]).exp().reshape(s)
                } else {
                    moved.tanh()
                };
                moved.permute(&inverse)
            }
            5 if shape.iter().any(|&d| d >= 2) => {
                case.kinds.push("slice_concat");
                let axis = shape.iter().position(|&d| d >= 2).unwrap_or(0);
                let cut = 1 + rng.below(shape[axis] - 1);
                let (lo, hi) =
                    (x.slice(axis as isize, 0, cut), x.slice(axis as isize, cut, shape[axis]));
                // The halves swapped: the same shape as x, so it still broadcasts to S.
                cx.concat(&[&hi.relu(), &lo], axis as isize)
            }
            6 => {
                case.kinds.push("expand");
                x.expand(full.clone()) * 0.5
            }
            7 if r >= 2 => {
                case.kinds.push("matmul");
                x.matmul(x.transpose(-1, -2)).matmul(&x) * 0.1
            }
            8 if r >= 1 => {
                case.kinds.push("composite");
                let last = shape[r - 1];
                match rng.below(5) {
                    0 => x.softmax(-1),
                    1 => x.log_softmax((rng.below(r)) as isize),
                    2 => {
                        let g = leaf(&mut cx, &mut rng, &mut case, vec![last]);
                        let b = leaf(&mut cx, &mut rng, &mut case, vec![last]);
                        x.layer_norm(&g, &b, 1e-5)
                    }
                    3 => x.gelu_erf(),
                    _ => x.sigmoid(),
                }
            }
            9 if r >= 1 => {
                case.kinds.push("gather");
                let dim = shape[r - 1];
                let vocab = 2 + rng.below(4);
                let table = leaf(&mut cx, &mut rng, &mut case, vec![vocab, dim]);
                let count = 1 + rng.below(4);
                let ids: Vec<i64> = (0..count).map(|_| rng.below(vocab) as i64).collect();
                let name = format!("ids{}", case.leaves.len());
                case.leaves.insert(name.clone(), ids.iter().map(|&i| i as f64).collect());
                case.inputs.insert(name.clone(), HostTensor::from_i64([count], ids).unwrap());
                let ids = cx.input_typed(name, [count], DType::I64);
                let n: usize = shape.iter().product();
                let scale = x.tanh().reshape([n]).sum(0, true);
                extra_outputs.push(table.gather(&ids) * scale);
                continue;
            }
            _ => {
                case.kinds.push("binary");
                &x + 1.0
            }
        };
        pool.push(t);
    }
    let last = pool.last().cloned().unwrap();
    let y = if pool.len() > leaves.len() { last } else { pool[0].relu() };
    y.output("y");
    for (i, t) in extra_outputs.iter().enumerate() {
        t.output(format!("g{i}"));
    }
    case.graph = cx;
    case
}
