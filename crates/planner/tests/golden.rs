//! Golden vectors of SPEC section 2.

use lumen_planner::{Dag, SlabBuffer, SlabOptions, plan_slab};

#[test]
fn seed_table_offsets() {
    let mut dag: Dag = Dag::new();
    let [up, mm, ab, relu, rb] =
        ["upload", "lt_matmul", "add_bias", "relu", "readback"].map(|_| dag.add_node(()));
    dag.extend_with_edges([(up, mm), (mm, ab), (ab, relu), (relu, rb)]);
    let bufs = vec![
        SlabBuffer::new("x", 65_536, [up, mm]),
        SlabBuffer::new("w", 65_536, [up, mm]),
        SlabBuffer::new("b", 256, [up, ab]),
        SlabBuffer::new("workspace", 1_048_576, [mm]),
        SlabBuffer::new("t0", 16_384, [mm, ab]),
        SlabBuffer::new("t1", 16_384, [ab, relu]),
        SlabBuffer::new("y", 16_384, [relu, rb]),
    ];
    let plan = plan_slab(&dag, &bufs, &SlabOptions::default()).unwrap();
    assert_eq!(plan.offsets, vec![0, 65_536, 131_072, 131_328, 1_179_904, 0, 16_384]);
    assert_eq!(plan.slab_bytes, 1_196_288);
    assert_eq!(plan.naive_bytes, 1_229_056);
}
