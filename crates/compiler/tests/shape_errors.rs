//! Shape and program errors: typed, naming the op, both shapes and the user's line; never a panic.

use lumen_compiler::{CompileError, CompileOptions, Graph, ShapeText};

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
fn a_column_is_not_a_bias() {
    // [2, 1] broadcast over the columns is not a bias over the last axis: lumen refuses it.
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 2]);
    let c = cx.weight("c", [2, 1]);
    (x.matmul(w) + c).output("y");
    let err = compile(&cx).unwrap_err();
    assert!(
        matches!(&err, CompileError::ShapeMismatch { op: "add", lhs, rhs, .. }
            if *lhs == ShapeText(vec![2, 2]) && *rhs == ShapeText(vec![2, 1])),
        "{err:?}"
    );
    assert!(err.to_string().contains("[2, 2] and [2, 1]"), "{err}");
}

#[test]
fn bias_on_the_left_is_accepted_and_lowered_as_add_bias() {
    let mut cx = Graph::new();
    let x = cx.input("x", [2, 3]);
    let w = cx.weight("w", [3, 5]);
    let b = cx.weight("b", [5]);
    (&b + x.matmul(&w)).output("y");
    let p = cx.compile(&CompileOptions { fuse: false, ..Default::default() }).unwrap();
    let add = &p.llir.nodes[2];
    assert_eq!(add.op, lumen_compiler::LlirOp::AddBias { m: 2, n: 5 });
    // Matrix first, bias second, whichever side the user wrote it on.
    let reads: Vec<&str> = add.reads.iter().map(|&r| p.llir.buffers[r].id.as_str()).collect();
    assert_eq!(reads, ["t0", "b"]);
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
    use lumen_compiler::programs;
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
