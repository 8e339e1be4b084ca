//! The CPU's peak f32 throughput, derived from what this machine says about itself: the vector
//! instruction set detected at run time, the clock, and the cores the runtime uses.
//!
//! `peak = cores x clock x FMA units per core x f32 lanes per vector x 2 FLOP per FMA`, the
//! textbook figure (as in Intel's and AMD's optimisation manuals, and the roofline model's
//! compute ceiling). Each factor and where it came from is kept in [`Peak::basis`], so the
//! report says how the number was made:
//!
//! - **instruction set**: `is_x86_feature_detected!` for `avx512f`, then `avx2` with `fma`,
//!   then `avx`, then SSE2 (always there on x86_64); NEON on aarch64 (always there). The
//!   vector width gives the f32 lanes: 16 (AVX-512), 8 (AVX2, AVX), 4 (SSE2, NEON).
//! - **FMA units per core**: assumed 2, the server and desktop cores of the last decade
//!   (Skylake-SP and later Xeons' two 512-bit FMA ports, Zen's two 256-bit FMA pipes,
//!   Neoverse N1's two 128-bit pipes). Some cores have one 512-bit unit (low-end Xeons, Ice
//!   Lake client) or more (Neoverse V1 has four 128-bit): the figure is then off by that
//!   factor, and the basis says it is assumed. One case is known and counted: AMD's Zen 4
//!   (`AuthenticAMD`, `cpu family` 25 with AVX-512F in `/proc/cpuinfo`) runs a 512-bit FMA
//!   on both of its 256-bit pipes (AMD's Zen 4 optimisation guide), so it has one 512-bit unit
//!   per core, 32 FLOP/cycle, not 64 ([`FmaUnits::detect`]). Without FMA (AVX or SSE2 only)
//!   the two units are one adder and one multiplier, 1 FLOP per lane each.
//! - **clock**: `/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq` (the highest clock the
//!   kernel's frequency driver reports, turbo included) when it exists; else the highest
//!   `cpu MHz` of `/proc/cpuinfo` (the clock each core ran at when read; a virtual machine
//!   often shows its host's base clock there, below what turbo reaches, so an achieved figure
//!   can then pass 100% of this peak); else [`FALLBACK_GHZ`], said so.
//! - **cores**: the threads the runtime runs on, at most the logical CPUs available
//!   (`std::thread::available_parallelism`): two hyper-threads of one core share its FMA
//!   units, so on such machines the figure counts each hyper-thread as a core.

use crate::phases::Peak;

/// The clock assumed when neither `/sys` nor `/proc/cpuinfo` gives one, GHz.
pub const FALLBACK_GHZ: f64 = 3.0;

/// FMA (or, without FMA, add + multiply) units per core assumed for every instruction set.
pub const ASSUMED_FMA_UNITS: u32 = 2;

/// The widest f32 vector instruction set a CPU offers that the peak counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorIsa {
    /// x86 AVX-512F (with FMA): 16 f32 lanes.
    Avx512,
    /// x86 AVX2 with FMA3: 8 f32 lanes.
    Avx2Fma,
    /// x86 AVX without FMA: 8 lanes, separate add and multiply.
    Avx,
    /// x86 SSE2: 4 lanes, separate add and multiply.
    Sse2,
    /// aarch64 NEON (Advanced SIMD, with FMA): 4 f32 lanes.
    Neon,
    /// No vector unit lumen knows: 1 lane, separate add and multiply.
    Scalar,
}

impl VectorIsa {
    /// f32 lanes of one vector register.
    pub fn lanes(self) -> u32 {
        match self {
            VectorIsa::Avx512 => 16,
            VectorIsa::Avx2Fma | VectorIsa::Avx => 8,
            VectorIsa::Sse2 | VectorIsa::Neon => 4,
            VectorIsa::Scalar => 1,
        }
    }

    /// Whether one instruction does a fused multiply-add (2 FLOP per lane).
    pub fn fma(self) -> bool {
        matches!(self, VectorIsa::Avx512 | VectorIsa::Avx2Fma | VectorIsa::Neon)
    }

    /// FLOP per lane per unit per cycle: 2 with FMA, else 1 (an add or a multiply).
    pub fn flop_per_lane(self) -> u32 {
        if self.fma() { 2 } else { 1 }
    }

    /// `AVX-512F`, `AVX2+FMA`, `AVX`, `SSE2`, `NEON`, `scalar`.
    pub fn name(self) -> &'static str {
        match self {
            VectorIsa::Avx512 => "AVX-512F",
            VectorIsa::Avx2Fma => "AVX2+FMA",
            VectorIsa::Avx => "AVX",
            VectorIsa::Sse2 => "SSE2",
            VectorIsa::Neon => "NEON",
            VectorIsa::Scalar => "scalar",
        }
    }

    /// The widest instruction set this CPU offers, detected at run time.
    pub fn detect() -> VectorIsa {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return VectorIsa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return VectorIsa::Avx2Fma;
            }
            if std::arch::is_x86_feature_detected!("avx") {
                return VectorIsa::Avx;
            }
            if std::arch::is_x86_feature_detected!("sse2") {
                return VectorIsa::Sse2;
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            if std::arch::is_aarch64_feature_detected!("neon") {
                return VectorIsa::Neon;
            }
        }
        VectorIsa::Scalar
    }
}

/// A clock in GHz and where it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Clock {
    /// GHz.
    pub ghz: f64,
    /// Where it came from, in words (`cpufreq cpuinfo_max_freq`, `/proc/cpuinfo cpu MHz`,
    /// `assumed: no clock in /sys or /proc/cpuinfo`).
    pub source: String,
}

impl Clock {
    /// This machine's clock: `/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq` (kHz),
    /// else the highest `cpu MHz` of `/proc/cpuinfo`, else [`FALLBACK_GHZ`].
    pub fn detect() -> Clock {
        let sys =
            std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").ok();
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok();
        Clock::from_sources(sys.as_deref(), cpuinfo.as_deref())
    }

    /// [`Clock::detect`] from the two files' texts (`None`: the file could not be read).
    pub fn from_sources(cpufreq_max_khz: Option<&str>, cpuinfo: Option<&str>) -> Clock {
        if let Some(khz) = cpufreq_max_khz
            .and_then(|t| t.trim().parse::<f64>().ok())
            .filter(|k| k.is_finite() && *k > 0.0)
        {
            return Clock { ghz: khz / 1e6, source: "cpufreq cpuinfo_max_freq".to_string() };
        }
        let mhz = cpuinfo
            .into_iter()
            .flat_map(str::lines)
            .filter_map(|l| l.split_once(':'))
            .filter(|(k, _)| k.trim() == "cpu MHz")
            .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
            .filter(|m| m.is_finite() && *m > 0.0)
            .fold(None, |best: Option<f64>, m| Some(best.map_or(m, |b| b.max(m))));
        match mhz {
            Some(mhz) => Clock {
                ghz: mhz / 1e3,
                source: "/proc/cpuinfo cpu MHz, the clock when read: turbo may pass it".to_string(),
            },
            None => Clock {
                ghz: FALLBACK_GHZ,
                source: "assumed: no clock in /sys cpufreq or /proc/cpuinfo".to_string(),
            },
        }
    }
}

/// FMA units of the widest vector width per core, and where the count comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct FmaUnits {
    /// Units per core.
    pub count: u32,
    /// Where the count comes from, in words (`assumed`, or the CPU it was known for).
    pub source: String,
}

impl FmaUnits {
    /// [`ASSUMED_FMA_UNITS`], said to be assumed.
    pub fn assumed() -> FmaUnits {
        FmaUnits { count: ASSUMED_FMA_UNITS, source: "assumed".to_string() }
    }

    /// This machine's units for `isa`, from `/proc/cpuinfo` ([`FmaUnits::from_cpuinfo`]).
    pub fn detect(isa: VectorIsa) -> FmaUnits {
        FmaUnits::from_cpuinfo(isa, std::fs::read_to_string("/proc/cpuinfo").ok().as_deref())
    }

    /// One 512-bit unit on AMD Zen 4 (`vendor_id: AuthenticAMD`, `cpu family: 25`) with
    /// AVX-512F: it splits each 512-bit FMA over its two 256-bit pipes. Every other CPU, or no
    /// `cpuinfo` text: [`FmaUnits::assumed`].
    pub fn from_cpuinfo(isa: VectorIsa, cpuinfo: Option<&str>) -> FmaUnits {
        let field = |key: &str| {
            cpuinfo?
                .lines()
                .filter_map(|l| l.split_once(':'))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_string())
        };
        let zen4 = field("vendor_id").as_deref() == Some("AuthenticAMD")
            && field("cpu family").as_deref() == Some("25");
        if isa == VectorIsa::Avx512 && zen4 {
            return FmaUnits {
                count: 1,
                source: "AMD Zen 4: a 512-bit FMA takes both 256-bit pipes".to_string(),
            };
        }
        FmaUnits::assumed()
    }
}

/// The peak of `cores` cores of `isa` at `clock`: `cores x GHz x` [`ASSUMED_FMA_UNITS`] `x
/// lanes x FLOP per lane`, FLOP/s, with the basis in words. A pure function of its inputs
/// ([`peak_with`] [`FmaUnits::assumed`]).
///
/// ```
/// use lumen_runtime::cpu_peak::{Clock, VectorIsa, peak_of};
/// let clock = Clock { ghz: 2.3, source: "/proc/cpuinfo cpu MHz".into() };
/// let p = peak_of(VectorIsa::Avx512, &clock, 2);
/// assert_eq!(p.flops, 294.4e9); // 2 x 2.3 GHz x 2 x 16 x 2
/// ```
pub fn peak_of(isa: VectorIsa, clock: &Clock, cores: usize) -> Peak {
    peak_with(isa, clock, &FmaUnits::assumed(), cores)
}

/// [`peak_of`] with `units` FMA (or add/mul) units per core instead of the assumed count.
///
/// ```
/// use lumen_runtime::cpu_peak::{Clock, FmaUnits, VectorIsa, peak_with};
/// let clock = Clock { ghz: 3.0, source: "test".into() };
/// let zen4 = FmaUnits { count: 1, source: "AMD Zen 4".into() };
/// assert_eq!(peak_with(VectorIsa::Avx512, &clock, &zen4, 1).flops, 96e9); // 3 x 1 x 16 x 2
/// ```
pub fn peak_with(isa: VectorIsa, clock: &Clock, units: &FmaUnits, cores: usize) -> Peak {
    let cores = cores.max(1);
    let per_cycle = units.count * isa.lanes() * isa.flop_per_lane();
    // Rounded to 1 FLOP/s so the figure prints the same whatever order the factors multiply in.
    let flops = (cores as f64 * clock.ghz * 1e9 * f64::from(per_cycle)).round();
    let kind = match (isa.fma(), units.count) {
        (true, 1) => "FMA unit",
        (true, _) => "FMA units",
        (false, 1) => "add/mul unit",
        (false, _) => "add/mul units",
    };
    let basis = format!(
        "{cores} core{} x {:.2} GHz ({}) x {} {kind} ({}) x {} f32 lanes ({}) x {} FLOP = \
         {per_cycle} FLOP/cycle per core",
        if cores == 1 { "" } else { "s" },
        clock.ghz,
        clock.source,
        units.count,
        units.source,
        isa.lanes(),
        isa.name(),
        isa.flop_per_lane(),
    );
    Peak { flops, basis }
}

/// This machine's peak on `threads` threads: [`peak_of`] the detected instruction set and
/// clock, with `threads` cores at most the logical CPUs available.
pub fn detect(threads: usize) -> Peak {
    let available = std::thread::available_parallelism().map_or(1, |n| n.get());
    let isa = VectorIsa::detect();
    peak_with(isa, &Clock::detect(), &FmaUnits::detect(isa), threads.min(available))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(ghz: f64) -> Clock {
        Clock { ghz, source: "test".into() }
    }

    #[test]
    fn golden_peaks() {
        // 1 core x 2.3 GHz x 2 x 16 x 2 = 147.2 GFLOP/s; 2 cores twice that.
        assert_eq!(peak_of(VectorIsa::Avx512, &clock(2.3), 1).flops, 147.2e9);
        assert_eq!(peak_of(VectorIsa::Avx512, &clock(2.3), 2).flops, 294.4e9);
        // AVX2+FMA at 4 GHz: 2 x 8 x 2 = 32 FLOP/cycle, 128 GFLOP/s (the old nominal figure).
        assert_eq!(peak_of(VectorIsa::Avx2Fma, &clock(4.0), 1).flops, 128e9);
        // Without FMA: an adder and a multiplier, 8 lanes each: 16 FLOP/cycle.
        assert_eq!(peak_of(VectorIsa::Avx, &clock(3.0), 1).flops, 48e9);
        assert_eq!(peak_of(VectorIsa::Sse2, &clock(3.0), 4).flops, 96e9);
        assert_eq!(peak_of(VectorIsa::Neon, &clock(3.0), 8).flops, 384e9);
        assert_eq!(peak_of(VectorIsa::Scalar, &clock(1.0), 1).flops, 2e9);
        // Zero cores counts as one.
        assert_eq!(peak_of(VectorIsa::Avx512, &clock(1.0), 0).flops, 64e9);
    }

    #[test]
    fn basis_names_every_factor() {
        let p = peak_of(VectorIsa::Avx512, &clock(2.3), 2);
        assert_eq!(
            p.basis,
            "2 cores x 2.30 GHz (test) x 2 FMA units (assumed) x 16 f32 lanes (AVX-512F) x 2 \
             FLOP = 64 FLOP/cycle per core"
        );
        let p = peak_of(VectorIsa::Sse2, &clock(3.0), 1);
        assert!(p.basis.starts_with("1 core x 3.00 GHz (test) x 2 add/mul units (assumed)"));
    }

    #[test]
    fn zen4_counts_one_512_bit_unit() {
        let zen4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n";
        let u = FmaUnits::from_cpuinfo(VectorIsa::Avx512, Some(zen4));
        assert_eq!(u.count, 1);
        let p = peak_with(VectorIsa::Avx512, &clock(2.6), &u, 1);
        assert!((p.flops - 83.2e9).abs() < 1.0, "{p:?}"); // 2.6 GHz x 1 x 16 x 2
        assert!(p.basis.contains("x 1 FMA unit (AMD Zen 4: "), "{}", p.basis);
        // AVX2 on the same core: two 256-bit pipes, the assumed two.
        assert_eq!(FmaUnits::from_cpuinfo(VectorIsa::Avx2Fma, Some(zen4)).count, 2);
        // Zen 5 (family 26), Intel, or nothing to read: assumed.
        let zen5 = zen4.replace(": 25", ": 26");
        assert_eq!(FmaUnits::from_cpuinfo(VectorIsa::Avx512, Some(&zen5)), FmaUnits::assumed());
        let intel = "vendor_id\t: GenuineIntel\ncpu family\t: 6\n";
        assert_eq!(FmaUnits::from_cpuinfo(VectorIsa::Avx512, Some(intel)).count, 2);
        assert_eq!(FmaUnits::from_cpuinfo(VectorIsa::Avx512, None).count, 2);
    }

    #[test]
    fn clock_sources_in_order() {
        let cpuinfo =
            "processor\t: 0\ncpu MHz\t\t: 2299.998\nprocessor\t: 1\ncpu MHz\t\t: 3100.5\n";
        let c = Clock::from_sources(Some("3500000\n"), Some(cpuinfo));
        assert_eq!((c.ghz, c.source.as_str()), (3.5, "cpufreq cpuinfo_max_freq"));
        // No cpufreq (a virtual machine): the highest cpu MHz.
        let c = Clock::from_sources(None, Some(cpuinfo));
        assert!((c.ghz - 3.1005).abs() < 1e-12, "{c:?}");
        assert!(c.source.starts_with("/proc/cpuinfo cpu MHz"));
        // Unparsable cpufreq falls through; nothing at all is the fallback, said so.
        let c = Clock::from_sources(Some("n/a"), Some("model name: x\n"));
        assert_eq!(c.ghz, FALLBACK_GHZ);
        assert!(c.source.starts_with("assumed"));
        assert_eq!(Clock::from_sources(None, None).ghz, FALLBACK_GHZ);
    }

    #[test]
    fn lanes_and_fma() {
        assert_eq!(
            [VectorIsa::Avx512, VectorIsa::Avx2Fma, VectorIsa::Avx, VectorIsa::Sse2]
                .map(|i| (i.lanes(), i.fma())),
            [(16, true), (8, true), (8, false), (4, false)]
        );
        assert_eq!((VectorIsa::Neon.lanes(), VectorIsa::Neon.fma()), (4, true));
        // Detection always gives something, and the peak of this machine is positive.
        let p = detect(1);
        assert!(p.flops > 0.0, "{p:?}");
    }
}
