//! Running a loop compiled for the widest instruction set the CPU has, chosen at run time.
//!
//! The build targets baseline x86-64 (SSE2): a plain loop over f32 is vectorized four lanes
//! wide and `f64::mul_add` is a call into the runtime library. [`widest`] runs a closure
//! inside a function compiled for AVX-512F (else AVX2 + FMA), into which the closure and
//! the `#[inline(always)]` loops it calls are inlined: they vectorize 16 (8) lanes wide and
//! `mul_add` is one instruction (what makes [`lumen_compiler::ops::exp_f32`] and
//! [`lumen_compiler::ops::exp_nonpositive_f32`], and so the `exp` and `gelu` maps, vector
//! loops). The trick the `multiversion` and `pulp` crates are
//! built on. Rust never contracts `a * b + c` into an FMA and IEEE 754 fixes `+ - * / sqrt`
//! and `mul_add` to the bit, so every version of a loop gives the same bits; calls into the
//! C library (`tanhf`, `logf`, `erff`) stay calls. `crate::gemm` keeps its own
//! `widest_isa!` macro, which compiles a named `#[inline(always)]` body into each
//! target-feature function: its epilogue through this closure form stayed a baseline function
//! (too large for LLVM to inline into `widest`), calling `fma()` per element: half of the
//! transformer's execute time.

/// Runs `f` compiled for AVX-512F when the CPU has it, else AVX2 + FMA, else the build's
/// baseline (checked at run time, cached by std). What `f` calls is compiled for that
/// instruction set only where it is inlined: `#[inline(always)]` functions and plain `for`
/// loops (an iterator's `for_each` may stay a baseline call).
#[inline(always)]
pub fn widest<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2,fma")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just now.
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU supports AVX2 and FMA, checked just now.
            return unsafe { avx2(f) };
        }
    }
    f()
}

/// Combines `N` lanes (a power of two) in the one fixed tree every lane-parallel reduction of
/// the CPU runtime uses (sums, maxima, dot products): lane `l` takes `combine(l, l + N/2)`,
/// then `l + N/4`, and so on down to lane 0. The same pairs in the same order on every
/// instruction set, so the result's bits do not depend on it; `log2 N` dependent steps
/// instead of `N - 1`.
#[inline(always)]
pub(crate) fn lane_tree<T: Copy, const N: usize>(
    mut lanes: [T; N],
    combine: impl Fn(T, T) -> T,
) -> T {
    let mut width = N;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            lanes[l] = combine(lanes[l], lanes[l + width]);
        }
    }
    lanes[0]
}

/// Declares `$name`, a safe function that runs `$body` (an `#[inline(always)]` function of
/// the same arguments) compiled for AVX-512F, else AVX2 + FMA, else the build's baseline,
/// whichever the CPU has (checked at run time, cached by std). Plain `*` and `+` are never
/// contracted into FMA, so every version gives the same bits.
macro_rules! widest_isa {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),*) => $body:ident) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) {
                    $body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports AVX-512F, checked just now.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU supports AVX2 and FMA, checked just now.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use widest_isa;
