//! The environment variables the runtimes honour, read in this one place.
//!
//! The names are Luminal's CUDA debugging switches; the CPU runtime honours the same ones so a
//! user can flip one variable whatever the backend.

/// `LUMINAL_CUDA_MEMORY_DEBUG=1`: verify the plan at prepare (an overlapping pair of live
/// buffers is an `InvalidProgram` error naming them, see [`crate::layout::verify_plan`]),
/// print the memory plan, and poison (NaN-fill) every buffer after its last use.
pub const MEMORY_DEBUG: &str = "LUMINAL_CUDA_MEMORY_DEBUG";
/// `LUMINAL_CUDA_PROFILE_RECAPTURE=1`: print one `*_EXEC_PROFILE` line per execute on stderr.
pub const PROFILE_RECAPTURE: &str = "LUMINAL_CUDA_PROFILE_RECAPTURE";
/// `LUMINAL_LOG_LLIR=1`: during search, print each new fastest candidate's canonical LLIR on
/// stderr between `LLIR_BEST` and `LLIR_BEST_END` lines ([`mod@crate::search`]).
pub const LOG_LLIR: &str = "LUMINAL_LOG_LLIR";

/// `LUMEN_TUNING_CACHE=FILE`: the tuning cache `lumen run` (and `lumen compare --profile`)
/// use when no `--tuning-cache` is given ([`crate::tuning`]); unset or empty: none.
pub const TUNING_CACHE: &str = "LUMEN_TUNING_CACHE";

/// `LUMEN_CPU_PASSIVE_WAIT=1`: the CPU runtime's worker threads sleep as soon as they find no
/// work, instead of spinning for up to [`crate::team::SPIN`] between kernels (OpenMP's
/// `OMP_WAIT_POLICY=passive`, ONNX Runtime's `session.intra_op.allow_spinning=0`): for several
/// processes sharing the cores, where a spinning worker holds a core another process needs.
pub const PASSIVE_WAIT: &str = "LUMEN_CPU_PASSIVE_WAIT";

/// `LUMEN_CPU_NO_WINOGRAD=1`: the CPU runtime runs its dense 3x3 convolutions on the im2col
/// path instead of Winograd F(2x2, 3x3) ([`crate::winograd`]): for side-by-side measurements.
pub const NO_WINOGRAD: &str = "LUMEN_CPU_NO_WINOGRAD";

/// The debugging switches as read from the process environment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeEnv {
    /// [`MEMORY_DEBUG`] is set to a true value.
    pub memory_debug: bool,
    /// [`PROFILE_RECAPTURE`] is set to a true value.
    pub profile_recapture: bool,
    /// [`LOG_LLIR`] is set to a true value.
    pub log_llir: bool,
    /// [`PASSIVE_WAIT`] is set to a true value.
    pub passive_wait: bool,
    /// [`NO_WINOGRAD`] is set to a true value.
    pub no_winograd: bool,
}

impl RuntimeEnv {
    /// Reads [`MEMORY_DEBUG`], [`PROFILE_RECAPTURE`], [`LOG_LLIR`], [`PASSIVE_WAIT`] and
    /// [`NO_WINOGRAD`]. A
    /// variable is on when set to anything
    /// but empty, `0`, `false`, `no` or `off` (case-insensitive).
    pub fn from_env() -> Self {
        Self {
            memory_debug: flag(std::env::var(MEMORY_DEBUG).ok().as_deref()),
            profile_recapture: flag(std::env::var(PROFILE_RECAPTURE).ok().as_deref()),
            log_llir: flag(std::env::var(LOG_LLIR).ok().as_deref()),
            passive_wait: flag(std::env::var(PASSIVE_WAIT).ok().as_deref()),
            no_winograd: flag(std::env::var(NO_WINOGRAD).ok().as_deref()),
        }
    }
}

/// Whether an environment value turns a switch on (`None` = unset = off).
pub fn flag(value: Option<&str>) -> bool {
    match value.map(str::trim) {
        None | Some("") => false,
        Some(v) => !["0", "false", "no", "off"].iter().any(|off| v.eq_ignore_ascii_case(off)),
    }
}

#[cfg(test)]
mod tests {
    use super::flag;

    #[test]
    fn flag_values() {
        assert!(!flag(None));
        for off in ["", "0", "false", "OFF", "No", " 0 "] {
            assert!(!flag(Some(off)), "{off:?}");
        }
        for on in ["1", "true", "yes", "on", "2"] {
            assert!(flag(Some(on)), "{on:?}");
        }
    }
}
