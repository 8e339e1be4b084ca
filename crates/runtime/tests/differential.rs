//! Differential tests over random programs: MLPs of random depth and widths, fused and unfused
//! layers, residual adds, parallel branches from one input, several outputs declared in any
//! order. For each program the planned run, the no-reuse run and the NaN-poisoned run must be
//! bit-identical, a prepared program must give the same bits every time it executes, and the
//! values must match the f64 reference.

mod common;

use common::*;
use lumen_compiler::Epilogue;
use lumen_runtime::{CpuOptions, CpuRuntime, Placement, PreparedProgram, Runtime};
use proptest::prelude::*;

/// Small programs (batch <= 6, widths <= 12); a parallel branch is fused with RELU or not.
const SHAPE: RandomProgramShape = RandomProgramShape {
    max_batch: 6,
    max_width: 12,
    branch_epilogues: [Epilogue::Relu, Epilogue::Default],
};

fn check_program(seed: u64) {
    let (program, desc) = random_program(seed, &SHAPE);
    let weights = weights_for(&program, seed ^ 0x5EED);
    let inputs = inputs_for(&program, seed ^ 0xD00D);
    let other = inputs_for(&program, seed ^ 0xBEEF);

    let planned = run(&program, CpuOptions::default(), &weights, &inputs);
    for (mode, options) in modes() {
        let mut prepared = CpuRuntime::new(options).prepare(&program, &weights).expect("prepare");
        let first = prepared.execute(&inputs).expect("execute");
        assert_eq!(bits(&first), bits(&planned), "{desc}: mode {mode} differs from planned");
        // Other inputs in between must leave no trace: stale buffers or clobbered weights
        // would change the third run.
        let between = prepared.execute(&other).expect("execute");
        let again = prepared.execute(&inputs).expect("execute");
        assert_eq!(bits(&again), bits(&first), "{desc}: mode {mode}, second execute differs");
        assert_eq!(
            bits(&between),
            bits(&run(&program, CpuOptions::default(), &weights, &other)),
            "{desc}: mode {mode}, fresh vs reused preparation"
        );
    }
    // Values: f32 against f64, widths <= 12 and depth <= 4 (residuals double magnitudes).
    let err = max_err_vs_reference(&program, &weights, &inputs, &planned);
    assert!(err < 1e-4, "{desc}: max error {err} vs f64 reference");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn planned_no_reuse_and_poisoned_runs_agree(seed in any::<u64>()) {
        check_program(seed);
    }
}

#[test]
fn fixed_seeds() {
    for seed in 0..32 {
        check_program(seed);
    }
}

#[test]
fn plans_of_random_programs_do_reuse_memory() {
    // The differential test means something only if the planned runs actually share bytes.
    let mut shared = 0;
    let mut reuploads = 0;
    for seed in 0..64 {
        let (program, _) = random_program(seed, &SHAPE);
        if program.plan.slab_bytes < program.plan.naive_bytes {
            shared += 1;
        }
        let weights = weights_for(&program, seed);
        let prepared = CpuRuntime::new(CpuOptions::default())
            .prepare_cpu(&program, &weights)
            .expect("prepare");
        reuploads += usize::from(prepared.reuploaded_weights() > 0);
        let no_reuse =
            CpuRuntime::new(CpuOptions { placement: Placement::NoReuse, ..CpuOptions::default() })
                .prepare_cpu(&program, &weights)
                .expect("prepare");
        assert!(no_reuse.slab_bytes() >= program.plan.naive_bytes);
        assert_eq!(no_reuse.reuploaded_weights(), 0);
    }
    assert!(shared >= 48, "only {shared} of 64 random programs reuse bytes");
    assert!(reuploads >= 8, "only {reuploads} of 64 random programs reuse a weight's bytes");
}
