//! Shape and program errors: typed, naming the op, both shapes and the user's line; never a panic.

use lumen_compiler::{CompileError, CompileOptions, Graph, ShapeText, programs};

fn compile(cx: &Graph) -> Result<lumen_compiler::CompiledProgram, CompileError> {
    cx.compile(&CompileOptions::default())
}

#[test]
fn matmul_inner_dimensions_must_agree() {
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 3]);
    let b = cx.weight("b", [4, 5]);
    let line = line!() + 1;
    a.matmul(&b).output("y");
    let err = compile(&cx).unwrap_err();
    match &err {
        CompileError::ShapeMismatch { op, lhs, rhs, location, .. } => {
            assert_eq!(*op, "matmul");
            assert_eq!(lhs, &ShapeText(vec![2, 3]));
            assert_eq!(rhs, &ShapeText(vec![4, 5]));
            // The user's line, not the DSL's.
            assert!(location.file().ends_with("shape_errors.rs"), "{location}");
            assert_eq!(location.line(), line);
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.starts_with("matmul: shapes [2, 3] and [4, 5] do not match"), "{msg}");
    assert!(msg.contains(&format!("shape_errors.rs:{line}:")), "{msg}");
}

#[test]
fn bias_must_match_the_last_axis() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 4]);
    let w = cx.weight("w", [4, 5]);
    let b = cx.weight("b", [3]);
    let line = line!() + 1;
    (x.matmul(w) + b).relu().output("y");
    match compile(&cx).unwrap_err() {
        CompileError::ShapeMismatch { op, lhs, rhs, location, .. } => {
            assert_eq!(op, "add");
            assert_eq!(lhs, ShapeText(vec![2, 5]));
            assert_eq!(rhs, ShapeText(vec![3]));
            assert_eq!(location.line(), line);
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
}

#[test]
fn a_column_broadcasts_but_is_never_a_bias_epilogue() {
    // [2, 1] broadcast over the columns is a legal NumPy add, but not cuBLASLt's bias over the
    // last axis: it compiles, and fusion leaves it an add.
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 2]);
    let c = cx.weight("c", [2, 1]);
    (x.matmul(w) + c).output("y");
    let p = compile(&cx).unwrap();
    let ops: Vec<String> =
        p.llir.nodes.iter().map(|n| lumen_compiler::dump::op_params(&n.op)).collect();
    assert!(ops.iter().any(|o| o.ends_with("epilogue=DEFAULT")), "{ops:?}");
    let add = &p.llir.nodes[2];
    assert_eq!(add.op.name(), "add");
    assert_eq!(add.reads[1].view.strides, [1, 0], "c read once per row");
}

#[test]
fn shapes_that_do_not_broadcast_name_the_axis() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3, 4]);
    let y = cx.input("y", [5, 4]);
    let line = line!() + 1;
    (x * y).output("z");
    let err = compile(&cx).unwrap_err();
    assert!(
        matches!(&err, CompileError::ShapeMismatch { op: "mul", location, .. } if location.line() == line),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(
            "mul: shapes [2, 3, 4] and [5, 4] do not match: they do not broadcast: axis -2 has \
             lengths 3 and 5"
        ),
        "{msg}"
    );
}

#[test]
fn bias_on_the_left_is_accepted_and_read_broadcast() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    (&b + x.matmul(&w)).output("y");
    let p = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    let add = &p.llir.nodes[2];
    assert_eq!(add.op.name(), "add");
    // Operands in the order written; the bias read through a broadcast view.
    let reads: Vec<&str> = add.read_buffers().map(|r| p.llir.buffers[r].id.as_str()).collect();
    assert_eq!(reads, ["b", "t0"]);
    assert_eq!(add.reads[0].view.strides, [0, 1]);
    // With fusion, commutativity still finds the BIAS epilogue.
    let fused = cx.compile(&CompileOptions::default()).unwrap();
    assert_eq!(fused.figures.launches, 1);
}

#[test]
fn matmul_needs_rank_two() {
    let mut cx = Graph::new();
    let v = cx.input("v", [3]);
    let w = cx.weight("w", [3, 4]);
    v.matmul(w).output("y");
    let err = compile(&cx).unwrap_err();
    assert!(
        matches!(&err, CompileError::Rank { op: "matmul", rank: 1, expected: 2, .. }),
        "{err:?}"
    );
}

#[test]
fn the_first_error_in_declaration_order_is_reported() {
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 3]);
    let b = cx.weight("b", [4, 5]);
    let c = cx.weight("c", [7]);
    let first = a.matmul(&b); // error 1
    let ok = a.relu();
    (ok + c).output("y"); // error 2
    first.output("z");
    assert!(matches!(compile(&cx).unwrap_err(), CompileError::ShapeMismatch { op: "matmul", .. }));
}

#[test]
fn errors_downstream_of_a_bad_op_are_not_reported_twice() {
    let mut cx = Graph::new();
    let a = cx.input("a", [2, 3]);
    let b = cx.weight("b", [4, 5]);
    (a.matmul(&b).relu() + &a).output("y");
    assert!(matches!(compile(&cx).unwrap_err(), CompileError::ShapeMismatch { op: "matmul", .. }));
}

#[test]
fn names_must_be_unique_nonempty_and_not_reserved() {
    for (names, problem) in [
        (["x", "x", "y"], "already used"),
        (["x", "w", "x"], "already used"),
        (["", "w", "y"], "empty"),
        (
            ["x", "t0", "y"],
            "reserved for compiler buffers (t0, t1, ..., workspace, workspace0, ...)",
        ),
        (
            ["x", "w", "workspace"],
            "reserved for compiler buffers (t0, t1, ..., workspace, workspace0, ...)",
        ),
        (
            ["workspace12", "w", "y"],
            "reserved for compiler buffers (t0, t1, ..., workspace, workspace0, ...)",
        ),
    ] {
        let mut cx = Graph::new();
        let x = cx.input(names[0], [2, 2]);
        let w = cx.weight(names[1], [2, 2]);
        x.matmul(w).output(names[2]);
        match compile(&cx).unwrap_err() {
            CompileError::BadName { problem: p, .. } => assert_eq!(p, problem, "{names:?}"),
            other => panic!("{names:?}: {other:?}"),
        }
    }
    // Names that merely start like reserved ones are fine.
    let mut cx = Graph::new();
    let x = cx.input("tx", [2, 2]);
    let w = cx.weight("workspace_w", [2, 2]);
    x.matmul(w).output("t");
    assert!(compile(&cx).is_ok());
}

#[test]
fn outputs_must_be_computed_and_named_once() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 2]);
    x.output("y");
    assert!(matches!(
        compile(&cx).unwrap_err(),
        CompileError::OutputOfLeaf { name, leaf, .. } if name == "y" && leaf == "x"
    ));

    let mut cx = Graph::new();
    let x = cx.input("x", [2, 2]);
    x.relu().output("a").output("b");
    assert!(matches!(
        compile(&cx).unwrap_err(),
        CompileError::OutputTwice { first, name, .. } if first == "a" && name == "b"
    ));

    let mut cx = Graph::new();
    let x = cx.input("x", [2, 2]);
    let _ = x.relu();
    assert_eq!(compile(&cx).unwrap_err(), CompileError::NoOutputs);
}

#[test]
fn tensors_of_another_graph_are_an_error() {
    let mut cx = Graph::new();
    let mut other = Graph::new();
    let x = cx.input("x", [2, 2]);
    let w = other.weight("w", [2, 2]);
    let line = line!() + 1;
    x.matmul(&w).output("y");
    match compile(&cx).unwrap_err() {
        CompileError::ForeignTensor { op, location } => {
            assert_eq!(op, "matmul");
            assert_eq!(location.line(), line);
        }
        other => panic!("{other:?}"),
    }
    // The snapshot HLIR without the foreign operand is invalid on its own, too.
    assert!(matches!(
        lumen_compiler::compile_hlir(&cx.hlir(), "p", &CompileOptions::default()).unwrap_err(),
        CompileError::Arity { op: "matmul", expected: 2, got: 1, .. }
    ));
}

#[test]
fn huge_shapes_overflow_as_errors() {
    let mut cx = Graph::new();
    let x = cx.input("x", [usize::MAX / 2, 3]);
    x.relu().output("y");
    assert!(matches!(compile(&cx).unwrap_err(), CompileError::ShapeOverflow { .. }));
}

#[test]
fn planner_errors_are_wrapped() {
    let mut cx = Graph::new();
    let x = cx.input("x", [64, 256]);
    let w = cx.weight("w", [256, 64]);
    x.matmul(w).output("y");
    let err = cx.compile(&CompileOptions { alignment: 0, ..Default::default() }).unwrap_err();
    assert_eq!(err.to_string(), "planning failed: slab alignment must be positive");
    let err = cx.compile(&CompileOptions { capacity: Some(1000), ..Default::default() });
    assert!(matches!(err, Err(CompileError::Plan(_))), "{err:?}");
}

#[test]
fn builtin_programs_reject_bad_arguments() {
    assert!(matches!(programs::linear_relu(0, 2, 2), Err(CompileError::Program { .. })));
    assert!(matches!(programs::mlp(&[], 4), Err(CompileError::Program { .. })));
    assert!(matches!(programs::mlp(&[8], 4), Err(CompileError::Program { .. })));
    assert!(matches!(programs::mlp(&[8, 0, 2], 4), Err(CompileError::Program { .. })));
    assert!(matches!(programs::mlp(&[8, 2], 0), Err(CompileError::Program { .. })));
    assert!(matches!(programs::parse_layers("8,,2"), Err(CompileError::Program { .. })));
    assert_eq!(programs::parse_layers("64, 128,10").unwrap(), [64, 128, 10]);
    assert!(matches!(
        programs::builtin("resnet", &Default::default()),
        Err(CompileError::UnknownProgram { .. })
    ));
}

/// f32 buffers need 4-byte offsets, and every alignment a device asks for (cuBLASLt's 256,
/// 16-byte vector loads) is a power of two: anything else is refused before planning, not by
/// the runtime after it.
#[test]
fn alignment_must_suit_f32_buffers() {
    let cx = programs::linear_relu(64, 256, 64).unwrap();
    for alignment in [1, 2, 3, 6, 12, 100, 257, usize::MAX] {
        for fuse in [false, true] {
            let err = cx.compile(&CompileOptions { alignment, fuse, ..Default::default() });
            assert_eq!(err.unwrap_err(), CompileError::Alignment { alignment }, "{alignment}");
        }
    }
    let err = cx.compile(&CompileOptions { alignment: 3, ..Default::default() }).unwrap_err();
    assert_eq!(
        err.to_string(),
        "slab alignment 3 bytes does not suit f32 buffers: it must be a power of two of at least 4 \
         (4, 8, 16, ..., 256 for cuBLASLt)"
    );
    // Zero keeps the planner's own message (SPEC section 2).
    let err = cx.compile(&CompileOptions { alignment: 0, ..Default::default() }).unwrap_err();
    assert_eq!(err.to_string(), "planning failed: slab alignment must be positive");
    for alignment in [4, 8, 16, 512] {
        let p = cx.compile(&CompileOptions { alignment, fuse: false, ..Default::default() });
        let p = p.unwrap();
        assert!(p.plan.offsets.iter().all(|o| o % alignment == 0), "{alignment}");
    }
    // The candidates of the fusion search are refused the same way.
    let options = CompileOptions { alignment: 6, ..Default::default() };
    let err = lumen_compiler::fusion::candidates(&cx.hlir(), &options).unwrap_err();
    assert_eq!(err, CompileError::Alignment { alignment: 6 });
}

#[test]
fn builtin_program_messages_name_the_layer_and_hide_lumen_source_lines() {
    let e = programs::mlp(&[5, 0, 3], 4).unwrap_err().to_string();
    assert_eq!(
        e,
        "mlp: layer 1 of [5, 0, 3] has size 0 (layer 0 is the input; every size must be positive)"
    );
    let e = programs::parse_layers("99999999999999999999,3").unwrap_err().to_string();
    assert_eq!(
        e,
        "mlp: layer size \"99999999999999999999\" in --layers \"99999999999999999999,3\" is too \
         large (at most 18446744073709551615)"
    );
    let e = programs::parse_layers("8,,2").unwrap_err().to_string();
    assert_eq!(e, "mlp: --layers \"8,,2\" has an empty entry at position 1");
    let e = programs::parse_layers("8,-2").unwrap_err().to_string();
    assert_eq!(e, "mlp: layer size \"-2\" in --layers \"8,-2\" is not a whole number");

    // A byte size that overflows is the program's error, in its own words, not a DSL error
    // pointing at programs.rs.
    let e = programs::linear_relu(usize::MAX, 256, 64).unwrap_err().to_string();
    assert_eq!(
        e,
        "linear-relu: x is [m, k] = [18446744073709551615, 256]: too large (its byte size \
         overflows usize)"
    );
    let e = programs::linear_relu(1 << 40, 4, 1 << 22).unwrap_err().to_string();
    assert_eq!(
        e,
        "linear-relu: y is [m, n] = [1099511627776, 4194304]: too large (its byte size overflows \
         usize)"
    );
    let e = programs::mlp(&[4, 1 << 62, 2], 1).unwrap_err().to_string();
    assert_eq!(
        e,
        "mlp: w1 is [d0, d1] = [4, 4611686018427387904]: too large (its byte size overflows usize)"
    );
    let e = programs::mlp(&[4, 8, 2], 1 << 61).unwrap_err().to_string();
    assert_eq!(
        e,
        "mlp: x is [batch, d0] = [2305843009213693952, 4]: too large (its byte size overflows \
         usize)"
    );
    for e in [programs::linear_relu(usize::MAX, 1, 1), programs::mlp(&[usize::MAX, 1], 1)] {
        let e = e.unwrap_err().to_string();
        assert!(!e.contains(".rs:"), "{e}");
    }
}

/// A size that belongs to the other program is refused, not silently ignored.
#[test]
fn builtin_sizes_must_apply_to_the_program() {
    use programs::{BuiltinArgs, SizeOption};
    let layers = BuiltinArgs { layers: Some(vec![5, 3]), ..Default::default() };
    let e = programs::builtin("linear-relu", &layers).unwrap_err();
    assert_eq!(
        e,
        CompileError::NotApplicable {
            option: SizeOption::Layers,
            program: "linear-relu".to_string()
        }
    );
    assert_eq!(e.to_string(), "--layers applies to mlp and transformer, not linear-relu");
    let m = BuiltinArgs { m: Some(5), ..Default::default() };
    assert_eq!(
        programs::builtin("mlp", &m).unwrap_err().to_string(),
        "--m applies to linear-relu, not mlp"
    );
    let batch = BuiltinArgs { batch: Some(5), ..Default::default() };
    assert_eq!(
        programs::builtin("linear-relu", &batch).unwrap_err().to_string(),
        "--batch applies to mlp and transformer, not linear-relu"
    );
    let seq = BuiltinArgs { seq: Some(8), ..Default::default() };
    assert_eq!(
        programs::builtin("mlp", &seq).unwrap_err().to_string(),
        "--seq applies to transformer, not mlp"
    );
    let two = BuiltinArgs { layers: Some(vec![2, 3]), ..Default::default() };
    let e = programs::builtin("transformer", &two).unwrap_err().to_string();
    assert!(e.contains("--layers is the number of encoder blocks"), "{e}");
    let heads = BuiltinArgs { heads: Some(5), ..Default::default() };
    assert_eq!(
        programs::builtin("transformer", &heads).unwrap_err().to_string(),
        "transformer: width 64 is not a multiple of 5 heads"
    );
    assert!(matches!(
        programs::check_applicable("resnet", &[]),
        Err(CompileError::UnknownProgram { .. })
    ));
    // Defaults applied in code: linear-relu 64x256x64 is the golden program.
    let p = programs::builtin("linear-relu", &BuiltinArgs::default()).unwrap();
    let p = p.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    assert_eq!(p.plan.slab_bytes, 1_196_288);
    let own = BuiltinArgs { layers: Some(vec![4, 2]), batch: Some(3), ..Default::default() };
    let p = programs::builtin("mlp", &own).unwrap().compile(&CompileOptions::default()).unwrap();
    assert_eq!(p.llir.buffer("x").unwrap().bytes, 3 * 4 * 4);
}
