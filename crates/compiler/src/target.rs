//! Compile targets: what a program compiled for one runtime must reserve in its slab, stated
//! once (the CLI's `--target`, `lumen run`'s runtime and the search all read it here).
//!
//! The LLIR is the same for every target; only the slab differs. A cuBLASLt matmul may use a
//! workspace (scratch memory the library's faster algorithms ask for), which lumen plans as a
//! buffer of the slab like any other (Luminal plans it the same way); the CPU runtime's
//! matmuls use none, so a program compiled for the CPU reserves none: a 7 KB MLP gets a 7 KB
//! slab rather than 1 MiB per matmul. Both targets keep the 256-byte slab alignment (see
//! [`Target::alignment`]).

use std::fmt;

/// The runtime a program is compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Target {
    /// The CUDA runtime (cuBLASLt matmuls with a planned workspace). The default, so
    /// `lumen compile` and `lumen compare` keep the plans (and golden values) they always had.
    #[default]
    Cuda,
    /// The CPU runtime: no cuBLASLt workspace.
    Cpu,
}

/// The cuBLASLt workspace per `lt_matmul` of [`Target::Cuda`], bytes (1 MiB, lumen's default
/// since its first CUDA runtime; the CUDA runtime refuses an algorithm that needs more).
pub const CUDA_WORKSPACE_BYTES: usize = 1 << 20;

/// The slab alignment of every target, bytes: cuBLASLt's pointer alignment.
pub const SLAB_ALIGNMENT: usize = 256;

impl Target {
    /// Every target, in `--help` order.
    pub const ALL: [Target; 2] = [Target::Cpu, Target::Cuda];

    /// The names `--target` takes, in [`Target::ALL`] order.
    pub const NAMES: [&'static str; 2] = ["cpu", "cuda"];

    /// `cpu` or `cuda`: the target's name, also the name of the runtime it is for.
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
        }
    }

    /// The target called `name` (`cpu` or `cuda`), `None` for any other name.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The target a runtime of this name runs (a runtime's `name()`: `cpu` -> [`Target::Cpu`],
    /// `cuda` -> [`Target::Cuda`]). Any other name gets [`Target::Cuda`], the target that
    /// reserves everything a runtime might use.
    pub fn for_runtime(runtime: &str) -> Target {
        Target::from_name(runtime).unwrap_or_default()
    }

    /// cuBLASLt workspace per `lt_matmul`, bytes: [`CUDA_WORKSPACE_BYTES`] for CUDA, 0 for the
    /// CPU (its matmuls need no scratch; a matmul given 0 bytes has no workspace buffer at
    /// all, see [`crate::lower::lower`]).
    pub fn workspace_bytes(self) -> usize {
        match self {
            Target::Cuda => CUDA_WORKSPACE_BYTES,
            Target::Cpu => 0,
        }
    }

    /// Slab alignment, bytes: [`SLAB_ALIGNMENT`] (256) for both. CUDA needs it (every pointer
    /// handed to cuBLASLt is checked). The CPU would accept 4, but 256 keeps every buffer on
    /// its own 64-byte cache lines (an AVX-512 load never splits a line, and two threads
    /// writing neighbouring buffers never share one), it costs at most 252 bytes per buffer,
    /// and it keeps CPU and CUDA plans of one program comparable offset for offset.
    pub fn alignment(self) -> usize {
        SLAB_ALIGNMENT
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CompileOptions;

    #[test]
    fn facts_of_each_target() {
        assert_eq!(Target::default(), Target::Cuda);
        assert_eq!(Target::Cuda.workspace_bytes(), 1_048_576);
        assert_eq!(Target::Cpu.workspace_bytes(), 0);
        assert_eq!([Target::Cpu.alignment(), Target::Cuda.alignment()], [256, 256]);
        // The default options are the CUDA target's, so every golden plan holds.
        let d = CompileOptions::default();
        assert_eq!(Target::Cuda.options(), d);
        assert_eq!(Target::Cpu.options(), CompileOptions { workspace_bytes: 0, ..d });
        for (t, n) in Target::ALL.into_iter().zip(Target::NAMES) {
            assert_eq!(t.name(), n);
            assert_eq!(Target::from_name(n), Some(t));
            assert_eq!(Target::for_runtime(n), t);
            assert_eq!(t.to_string(), n);
        }
        assert_eq!(Target::from_name("tpu"), None);
        assert_eq!(Target::for_runtime("tpu"), Target::Cuda);
    }
}
