//! The slab layout picture of the seed plan, pinned byte for byte.

use std::path::PathBuf;

use lumen_planner::{SlabProblem, layout_svg, layout_svg_with_names};

fn seed() -> SlabProblem {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/plans/seed_unfused.json");
    SlabProblem::load(path).unwrap()
}

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../../../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s
}

#[test]
fn seed_layout_svg() {
    let p = seed();
    let plan = p.plan().unwrap();
    let svg = layout_svg_with_names(&p.dag, &p.buffers, &plan, |n| p.node_name(n).to_string());
    // One rectangle per buffer, with its tooltip; t1 and y reuse x's bytes after lt_matmul.
    assert_eq!(svg.matches("<title>").count(), 7);
    assert!(svg.contains("<title>t1: 16,384 bytes, reserved 16,384, offset 0..16,384</title>"));
    assert!(svg.contains(">slab_bytes 1,196,288</text>"));
    settings().bind(|| insta::assert_snapshot!("planner_seed_layout_svg", svg));
}

#[test]
fn layout_svg_is_deterministic_and_total() {
    let p = seed();
    let plan = p.plan().unwrap();
    assert_eq!(layout_svg(&p.dag, &p.buffers, &plan), layout_svg(&p.dag, &p.buffers, &plan));
    // A plan that does not match the buffers still draws (what it can).
    let mut short = plan.clone();
    short.offsets.truncate(3);
    let svg = layout_svg(&p.dag, &p.buffers, &short);
    assert_eq!(svg.matches("<title>").count(), 3);
    assert_eq!(svg.matches("(not placed)").count(), 4);
    assert!(svg.ends_with("</svg>\n"));
}
