//! Bad input never panics: wrong weights and inputs, inconsistent programs, and a corrupted
//! plan (a planning error shows up as wrong numbers by default, and is refused at prepare,
//! naming the overlapping pair, in memory-debug mode).

mod common;

use common::*;
use lumen_compiler::{BinaryOp, CompiledProgram, ElemOp, Graph, LlirOp, Operand, View};
use lumen_planner::Reachability;
use lumen_runtime::{
    CpuOptions, CpuRuntime, HostTensor, Runtime, RuntimeError, TensorKind, Tensors,
};
use petgraph::graph::NodeIndex;

fn golden() -> CompiledProgram {
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 256]);
    let w = cx.weight("w", [256, 64]);
    let b = cx.weight("b", [64]);
    (x.matmul(w) + b).relu().output("y");
    compile(&cx, "linear-relu")
}

fn prepare_err(program: &CompiledProgram, weights: &Tensors) -> RuntimeError {
    match CpuRuntime::default().prepare(program, weights) {
        Ok(_) => panic!("prepare accepted bad input"),
        Err(e) => e,
    }
}

#[test]
fn weights_are_checked_at_prepare() {
    let program = golden();
    let good = weights_for(&program, 1);

    let mut missing = good.clone();
    missing.shift_remove("b");
    let err = prepare_err(&program, &missing);
    assert_eq!(
        err,
        RuntimeError::Missing { kind: TensorKind::Weight, name: "b".into(), shape: vec![64] }
    );
    assert_eq!(err.to_string(), "missing weight `b` (shape [64])");

    let mut extra = good.clone();
    extra.insert("w9".into(), tensor(&[1], &[0.0]));
    assert_eq!(
        prepare_err(&program, &extra).to_string(),
        "unexpected weight `w9`: the program has no weight of that name"
    );

    let mut wrong = good.clone();
    wrong.insert("w".into(), HostTensor::zeros([64, 256]).unwrap());
    assert_eq!(
        prepare_err(&program, &wrong).to_string(),
        "weight `w` has shape [64, 256], the program expects [256, 64]"
    );

    // An input is not a weight.
    let mut with_input = good.clone();
    with_input.extend(inputs_for(&program, 2));
    assert!(matches!(
        prepare_err(&program, &with_input),
        RuntimeError::Unexpected { kind: TensorKind::Weight, .. }
    ));
}

#[test]
fn inputs_are_checked_at_execute() {
    let program = golden();
    let mut prepared = CpuRuntime::default().prepare(&program, &weights_for(&program, 1)).unwrap();
    let err = prepared.execute(&Tensors::new()).unwrap_err();
    assert_eq!(err.to_string(), "missing input `x` (shape [64, 256])");
    let mut inputs = inputs_for(&program, 2);
    inputs.insert("x".into(), HostTensor::zeros([256, 64]).unwrap());
    assert_eq!(
        prepared.execute(&inputs).unwrap_err().to_string(),
        "input `x` has shape [256, 64], the program expects [64, 256]"
    );
    let mut inputs = inputs_for(&program, 2);
    inputs.insert("w".into(), HostTensor::zeros([256, 64]).unwrap());
    assert_eq!(
        prepared.execute(&inputs).unwrap_err().to_string(),
        "unexpected input `w`: the program has no input of that name"
    );
    // A failed execute leaves the prepared program usable: it gives what a fresh one gives.
    let good = inputs_for(&program, 2);
    let mut fresh = CpuRuntime::default().prepare(&program, &weights_for(&program, 1)).unwrap();
    assert_eq!(prepared.execute(&good).unwrap(), fresh.execute(&good).unwrap());
    assert!(prepared.last_profile().is_some());
}

fn invalid(program: &CompiledProgram) -> String {
    match prepare_err(program, &weights_for(program, 1)) {
        RuntimeError::InvalidProgram { reason, .. } => reason,
        other => panic!("expected InvalidProgram, got {other}"),
    }
}

#[test]
fn inconsistent_programs_are_refused() {
    let base = golden();

    let mut p = base.clone();
    p.plan.offsets.pop();
    assert_eq!(invalid(&p), "the plan has 6 offsets and 7 reserved sizes for 7 buffers");

    let mut p = base.clone();
    p.plan.offsets[6] = p.plan.slab_bytes;
    assert!(invalid(&p).contains("does not fit the 1196288-byte slab"), "{}", invalid(&p));

    let mut p = base.clone();
    p.plan.offsets[6] = 2;
    assert_eq!(invalid(&p), "buffer `y` at offset 2 is not 4-byte aligned for f32");

    // Output over an operand of the same node: refused, never a data race on the slab.
    let mut p = base.clone();
    p.plan.offsets[4] = p.plan.offsets[0]; // t0 (matmul output) onto x (its operand)
    assert_eq!(
        invalid(&p),
        "node 1 (lt_matmul) writes `t0` over the bytes of `x`, which it also uses: the plan is not valid"
    );

    let mut p = base.clone();
    p.llir.buffers[4].shape = vec![64, 65];
    assert_eq!(invalid(&p), "buffer `t0` has shape [64, 65] but 16384 bytes");

    // Node 2 is the bias add: `add` of t0 [64, 64] and b [64] read as [64, 64] with strides
    // [0, 1] (broadcast over the rows).
    assert_eq!(base.llir.nodes[2].op, LlirOp::Map { op: ElemOp::Binary(BinaryOp::Add), len: 4096 });
    assert_eq!(
        base.llir.nodes[2].reads,
        [
            Operand::whole(4, &[64, 64]),
            Operand {
                buffer: 2,
                view: View { shape: vec![64, 64], strides: vec![0, 1], offset: 0 }
            },
        ]
    );
    let mut p = base.clone();
    p.llir.nodes[2].reads.pop();
    assert_eq!(invalid(&p), "node 2 (add) reads 1 buffers, the op needs 2");

    let mut p = base.clone();
    p.llir.nodes[2].reads[1].buffer = 0; // the bias operand := x
    assert!(invalid(&p).starts_with("node 2 (add) uses buffer `x` but its uses"));

    let mut p = base.clone();
    p.llir.nodes[3].reads[0].buffer = 99;
    assert_eq!(invalid(&p), "node 3 (relu) names absent buffer 99");

    let mut p = base.clone();
    p.llir.nodes[1].inputs = vec![3];
    assert_eq!(
        invalid(&p),
        "node 1 (lt_matmul) depends on node 3: nodes are not in topological order"
    );

    let mut p = base.clone();
    p.llir.buffers[2].uses = vec![];
    assert_eq!(invalid(&p), "buffer `b` has no uses");

    let mut p = base.clone();
    p.llir.nodes[0].writes.retain(|&w| w != 2);
    assert_eq!(invalid(&p), "node 2 (add) reads `b` before any node writes it");
}

/// Pairs of tensor buffers that may be live at the same time but share no node.
fn conflicting_pairs(program: &CompiledProgram) -> Vec<(usize, usize)> {
    let reach = Reachability::new(&program.dag).unwrap();
    let uses = |i: usize| -> Vec<NodeIndex> {
        program.llir.buffers[i].uses.iter().map(|&u| NodeIndex::new(u)).collect()
    };
    let bufs = &program.llir.buffers;
    let mut pairs = Vec::new();
    for i in 0..bufs.len() {
        for j in 0..bufs.len() {
            let share_node = bufs[i].uses.iter().any(|u| bufs[j].uses.contains(u));
            if i != j && !share_node && reach.conflicts(&uses(i), &uses(j)) {
                pairs.push((i, j));
            }
        }
    }
    pairs
}

#[test]
fn a_planning_error_shows_up_as_wrong_numbers() {
    // Two branches from one input: t = relu(x w1), u = x w2, y = t + u. Whatever order the
    // branches run in, a buffer of one branch is live while the other branch writes.
    let mut cx = Graph::new();
    let x = cx.input("x", [8, 8]);
    let w1 = cx.weight("w1", [8, 8]);
    let w2 = cx.weight("w2", [8, 8]);
    let t = x.matmul(&w1).relu();
    let u = x.matmul(&w2);
    (t + u).output("y");
    let program = compile(&cx, "branches");
    let weights = weights_for(&program, 3);
    let inputs = inputs_for(&program, 4);
    let good = run(&program, CpuOptions::default(), &weights, &inputs);

    let pairs: Vec<(usize, usize)> = conflicting_pairs(&program)
        .into_iter()
        .filter(|&(i, j)| {
            let role = |k: usize| program.llir.buffers[k].role;
            use lumen_compiler::BufferRole::*;
            matches!(role(i), Intermediate | Output) && matches!(role(j), Intermediate | Output)
        })
        .collect();
    assert!(!pairs.is_empty(), "the program has parallel intermediates");
    let mut wrong = 0;
    for &(i, j) in &pairs {
        // Corrupt the plan: put j on top of i, as a planner that ignored the conflict would.
        let mut bad = program.clone();
        bad.plan.offsets[j] = bad.plan.offsets[i];
        let out = run(&bad, CpuOptions::default(), &weights, &inputs);
        if bits(&out) != bits(&good) {
            wrong += 1;
        }
    }
    assert!(wrong > 0, "no corrupted plan changed the output: {pairs:?}");

    // A workspace put over a weight still to be read by a later node: the CPU never touches a
    // workspace, so the default mode hides the error; memory debug verifies the plan at
    // prepare and names the pair. (Before memory debug checked the plan, this corruption was
    // only seen as NaN when the workspace's matmul ran before the weight's reader and the
    // workspace was poisoned; now every such pair is refused, whatever the node order.)
    let ws_pairs: Vec<(usize, usize)> = conflicting_pairs(&program)
        .into_iter()
        .filter(|&(i, j)| {
            let role = |k: usize| program.llir.buffers[k].role;
            role(i) == lumen_compiler::BufferRole::Weight
                && role(j) == lumen_compiler::BufferRole::Workspace
        })
        .collect();
    assert!(!ws_pairs.is_empty(), "the program has a workspace parallel to a weight");
    for &(i, j) in &ws_pairs {
        let mut bad = program.clone();
        bad.plan.offsets[j] = bad.plan.offsets[i];
        assert_eq!(bits(&run(&bad, CpuOptions::default(), &weights, &inputs)), bits(&good));
        let reason = debug_invalid(&bad, &weights);
        let (a, b) = (&program.llir.buffers[i].id, &program.llir.buffers[j].id);
        assert!(
            reason.starts_with("memory debug: the plan fails verification: buffers ")
                && reason.contains(&format!(" {a} ["))
                && reason.contains(&format!(" {b} ["))
                && reason.ends_with("overlap but their lifetimes conflict"),
            "{reason}"
        );
    }
}

fn debug_invalid(program: &CompiledProgram, weights: &Tensors) -> String {
    let debug = CpuRuntime::new(CpuOptions { memory_debug: true, ..CpuOptions::default() });
    match debug.prepare(program, weights) {
        Ok(_) => panic!("memory debug accepted an overlapping plan"),
        Err(RuntimeError::InvalidProgram { reason, .. }) => reason,
        Err(other) => panic!("expected InvalidProgram, got {other}"),
    }
}

#[test]
fn memory_debug_verifies_the_plan() {
    // The library user's repro: linear-relu 4x3x5 unfused, two buffers that are read by the
    // same node put on the same bytes. Neither is the node's output, so the layout's own check
    // (output against operands) passes; only the planner's verify sees the conflict.
    let mut cx = Graph::new();
    let x = cx.input("x", [4, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    (x.matmul(w) + b).relu().output("y");
    let program = compile(&cx, "linear-relu");
    let weights = weights_for(&program, 11);
    let inputs = inputs_for(&program, 12);
    let good = run(&program, CpuOptions::default(), &weights, &inputs);
    let index = |id: &str| program.llir.buffers.iter().position(|b| b.id == id).unwrap();
    let cases = [
        ("w", "x", "buffers x [0, 256) and w [0, 256) overlap but their lifetimes conflict"),
        ("t0", "b", "buffers b [512, 768) and t0 [512, 768) overlap but their lifetimes conflict"),
    ];
    for (moved, onto, want) in cases {
        let mut bad = program.clone();
        bad.plan.offsets[index(moved)] = bad.plan.offsets[index(onto)];
        // The default mode trusts the plan: the corruption shows up as wrong numbers (with
        // the input copied into the slab, as Luminal does: read in place, `x` has no bytes
        // there for `w` to land on).
        let copied = CpuOptions { copied_inputs: true, ..CpuOptions::default() };
        let wrong = run(&bad, copied, &weights, &inputs);
        assert_ne!(bits(&wrong), bits(&good), "{moved} onto {onto}");
        // Memory debug checks it at prepare, naming the pair.
        assert_eq!(
            debug_invalid(&bad, &weights),
            format!("memory debug: the plan fails verification: {want}"),
            "{moved} onto {onto}"
        );
        // No reuse ignores the plan's offsets, so there is nothing to refuse.
        let no_reuse = CpuOptions {
            memory_debug: true,
            placement: lumen_runtime::Placement::NoReuse,
            ..CpuOptions::default()
        };
        assert_eq!(bits(&run(&bad, no_reuse, &weights, &inputs)), bits(&good));
    }
    // A valid plan still runs in memory debug, with the same bits as the default mode.
    let debug = CpuOptions { memory_debug: true, ..CpuOptions::default() };
    assert_eq!(bits(&run(&program, debug, &weights, &inputs)), bits(&good));
    // The plan's other figures are checked too: a lower bound the plan does not have.
    let mut bad = program.clone();
    bad.plan.lower_bound -= 256;
    assert!(
        debug_invalid(&bad, &weights).contains("lower_bound"),
        "{}",
        debug_invalid(&bad, &weights)
    );
}

#[test]
fn duplicate_buffer_ids_are_refused() {
    // Two outputs sharing a name would come back as one tensor.
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 4]);
    let t = x.matmul(w);
    t.relu().output("y");
    t.gelu().output("z");
    let program = compile(&cx, "two-outputs");
    let z = program.llir.buffers.iter().position(|b| b.id == "z").unwrap();
    let y = program.llir.buffers.iter().position(|b| b.id == "y").unwrap();
    let mut p = program.clone();
    p.llir.buffers[z].id = "y".into();
    let (lo, hi) = (y.min(z), y.max(z));
    let want = format!("buffers {lo} and {hi} are both named `y`: buffer ids must be unique");
    assert_eq!(invalid(&p), want);
    for options in [
        CpuOptions::default(),
        CpuOptions { memory_debug: true, ..CpuOptions::default() },
        CpuOptions { placement: lumen_runtime::Placement::NoReuse, ..CpuOptions::default() },
    ] {
        let err = CpuRuntime::new(options).prepare(&p, &weights_for(&p, 1)).err();
        assert_eq!(
            err.map(|e| e.to_string()),
            Some(format!("invalid program `two-outputs-unfused`: {want}"))
        );
    }
    // The reference refuses it too, rather than returning one of the two.
    let err =
        lumen_runtime::reference::execute_f64(&p.llir, &weights_for(&p, 1), &inputs_for(&p, 2));
    assert_eq!(
        err.err().map(|e| e.to_string()),
        Some(format!("invalid program `reference`: {want}"))
    );

    // Two inputs sharing a name would both be fed the one tensor of that name.
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 2]);
    let b = cx.input("b", [2, 2]);
    (a + b).output("y");
    let mut p = compile(&cx, "two-inputs");
    p.llir.buffers[1].id = "a".into();
    assert_eq!(invalid(&p), "buffers 0 and 1 are both named `a`: buffer ids must be unique");
}

#[test]
fn memory_plan_lines_of_the_golden_program() {
    let program = golden();
    let prepared = CpuRuntime::new(CpuOptions { memory_debug: true, ..CpuOptions::default() })
        .prepare_cpu(&program, &weights_for(&program, 1))
        .unwrap();
    assert_eq!(
        prepared.memory_plan().join("\n"),
        "CPU_MEMORY_PLAN label=linear-relu-unfused placement=planned buffers=7 slab_bytes=1196288 naive_bytes=1229056 lower_bound=1196288\n\
         CPU_MEMORY_BUFFER id=x role=input bytes=65536 reserved=65536 offset=0 uses=0,1 last_use=1\n\
         CPU_MEMORY_BUFFER id=w role=weight bytes=65536 reserved=65536 offset=65536 uses=0,1 last_use=1\n\
         CPU_MEMORY_BUFFER id=b role=weight bytes=256 reserved=256 offset=131072 uses=0,2 last_use=2\n\
         CPU_MEMORY_BUFFER id=workspace role=workspace bytes=1048576 reserved=1048576 offset=131328 uses=1 last_use=1\n\
         CPU_MEMORY_BUFFER id=t0 role=intermediate bytes=16384 reserved=16384 offset=1179904 uses=1,2 last_use=2\n\
         CPU_MEMORY_BUFFER id=t1 role=intermediate bytes=16384 reserved=16384 offset=0 uses=2,3 last_use=3\n\
         CPU_MEMORY_BUFFER id=y role=output bytes=16384 reserved=16384 offset=16384 uses=3,4 last_use=4"
    );
    // Memory debug poisons weights after their last use, so it uploads them on every execute.
    assert_eq!(prepared.reuploaded_weights(), 2);
}

#[test]
fn exec_profile_counts() {
    let program = golden();
    let mut prepared = CpuRuntime::default().prepare(&program, &weights_for(&program, 1)).unwrap();
    prepared.execute(&inputs_for(&program, 2)).unwrap();
    let p = prepared.last_profile().unwrap().clone();
    assert_eq!(p.launches, 3);
    assert_eq!(p.flops, 2 * 64 * 64 * 256 + 2 * 64 * 64);
    // Nothing: x is read in place, w and b stay resident.
    assert_eq!(p.upload_bytes, 0);
    assert_eq!(p.readback_bytes, 16_384);
    assert_eq!(p.sync_ms, 0.0);
    assert!(p.total_ms >= p.launch_ms + p.upload_ms + p.readback_ms);
    let line = p.line("CPU", prepared.label(), 1.5);
    assert!(line.starts_with("CPU_EXEC_PROFILE label=linear-relu-unfused total_ms="), "{line}");
    assert!(line.contains(" prepare_ms=1.500 "), "{line}");
    assert!(
        line.contains(" launches=3 flops=2105344 upload_bytes=0 readback_bytes=16384 gflops="),
        "{line}"
    );
    let keys: Vec<&str> = line.split(' ').skip(1).map(|kv| kv.split('=').next().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "label",
            "total_ms",
            "prepare_ms",
            "upload_ms",
            "launch_ms",
            "sync_ms",
            "readback_ms",
            "poison_ms",
            "launches",
            "flops",
            "upload_bytes",
            "readback_bytes",
            "gflops"
        ]
    );
}
