//! A fork-join team whose workers spin between jobs: the threads behind
//! [`crate::Threads::for_parts`].
//!
//! A job is `parts` calls `f(0) .. f(parts - 1)`; the calling thread and the workers claim
//! parts from one counter until none is left, and the caller returns once every claimed part
//! has finished. A worker that is not running when a job starts (the OS gave its core to
//! another process) costs nothing: the caller claims its parts. Between jobs a worker spins
//! for [`SPIN`] before it sleeps. That is the point of the team: on the 2-core VM the
//! benchmarks ran on, waking a sleeping thread took tens to hundreds of microseconds (its
//! virtual CPU halts), so a rayon pool, whose workers sleep as soon as they find no work, lost
//! much of a split product's gain to the wake-up of the second worker; OpenMP runtimes and
//! ONNX Runtime's thread pool spin for the same reason.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a worker spins for the next job before it sleeps (it burns its core meanwhile).
/// Longer than the gaps between the split kernels of one execute (a serial kernel, a
/// readback) and between the executes of a benchmark loop.
pub const SPIN: Duration = Duration::from_micros(500);

/// A job's closure with its lifetime erased: valid until the job's last part has finished,
/// which [`Team::run`] waits for before it returns.
#[derive(Clone, Copy)]
struct JobRef(*const (dyn Fn(usize) + Sync));

// SAFETY: the closure is `Sync`, and `Team::run` keeps it alive while any thread may call it.
unsafe impl Send for JobRef {}

struct Job {
    /// Bumped for every job; workers claim parts of the job whose epoch they saw.
    epoch: u64,
    f: Option<JobRef>,
    parts: usize,
    next: usize,
    /// A part panicked (the payload is dropped; the caller panics after the job).
    panicked: bool,
}

struct Shared {
    job: Mutex<Job>,
    /// `job.epoch`, readable without the lock: what spinning workers watch.
    epoch: AtomicU64,
    /// Parts of the current job finished (the caller spins on it).
    finished: AtomicUsize,
    /// Set by [`Team::park`]: spinning workers go to sleep now; cleared by the next job.
    park: AtomicBool,
    sleepers: Mutex<usize>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Job> {
        // A part's panic is caught before it could poison the lock; recover regardless.
        self.job.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims and runs parts of job `epoch` until none is left.
    fn work(&self, epoch: u64) {
        loop {
            let (f, part) = {
                let mut job = self.lock();
                if job.epoch != epoch || job.next >= job.parts {
                    return;
                }
                job.next += 1;
                (job.f.expect("a job with parts has a closure"), job.next - 1)
            };
            // SAFETY: this thread claimed `part` of the job, so the job cannot finish (and
            // `Team::run` cannot return and drop the closure) before `finished` counts it.
            let ok =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { (*f.0)(part) }))
                    .is_ok();
            if !ok {
                self.lock().panicked = true;
            }
            self.finished.fetch_add(1, Ordering::Release);
        }
    }
}

/// `workers` threads (the caller makes one more), kept until the process exits.
pub struct Team {
    shared: Arc<Shared>,
    /// How long a thread spins: a worker for the next job, the caller for the parts it waits
    /// on ([`SPIN`], or zero when the team has more threads than the machine has cores: a
    /// spinning thread would then hold a core a working one needs).
    spin: Duration,
    /// Held while a job runs: a second caller (or a nested one) runs its parts alone.
    running: Mutex<()>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Team")
    }
}

impl Team {
    /// Spawns `workers` threads named `lumen-cpu-{i}`. With `spin`, they spin for [`SPIN`]
    /// between jobs when `workers + 1` threads fit the cores `std::thread::available_parallelism`
    /// reports; otherwise they sleep as soon as they find no work.
    ///
    /// # Errors
    /// The OS error when a thread cannot be spawned.
    pub fn new(workers: usize, spin: bool) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            job: Mutex::new(Job { epoch: 0, f: None, parts: 0, next: 0, panicked: false }),
            epoch: AtomicU64::new(0),
            finished: AtomicUsize::new(0),
            park: AtomicBool::new(false),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
        });
        let spins = WorkerWait::of(workers + 1, spin) == Some(WorkerWait::Spin);
        let spin = if spins { SPIN } else { Duration::ZERO };
        for i in 0..workers {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("lumen-cpu-{i}"))
                .spawn(move || worker(&shared, spin))?;
        }
        Ok(Self { shared, spin, running: Mutex::new(()) })
    }

    /// Sends spinning workers to sleep until the next job: called before other threads (a
    /// rayon pool's) need the cores.
    pub fn park(&self) {
        self.shared.park.store(true, Ordering::Relaxed);
    }

    /// Runs `f(0) .. f(parts - 1)`, each exactly once, on the caller and the workers; returns
    /// when all have finished. While the team runs another job (a second thread's, or this
    /// one's: `f` itself splitting work), the caller runs every part itself, in order.
    ///
    /// # Panics
    /// When a part panicked (after every part has finished).
    pub fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        let _one = match self.running.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return (0..parts).for_each(f),
        };
        if parts == 0 {
            return;
        }
        let s = &*self.shared;
        // SAFETY: only the lifetime is erased; the closure outlives the job (see `work`), and
        // `f` is cleared from the slot before this returns.
        let erased: JobRef = JobRef(unsafe {
            std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const (dyn Fn(usize) + Sync)>(
                f,
            )
        });
        let epoch = {
            let mut job = s.lock();
            job.epoch += 1;
            *job = Job { epoch: job.epoch, f: Some(erased), parts, next: 0, panicked: false };
            s.finished.store(0, Ordering::Relaxed);
            s.park.store(false, Ordering::Relaxed);
            s.epoch.store(job.epoch, Ordering::Release);
            job.epoch
        };
        // Wake only as many sleeping workers as there are parts for (beyond the caller's).
        let sleepers = *s.sleepers.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..sleepers.min(parts - 1) {
            s.wake.notify_one();
        }
        s.work(epoch);
        let start = Instant::now();
        while s.finished.load(Ordering::Acquire) < parts {
            // A worker holds a part; it is running, or the OS will run it again soon.
            if start.elapsed() < self.spin {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let panicked = {
            let mut job = s.lock();
            job.f = None;
            job.panicked
        };
        assert!(!panicked, "a part of a split kernel panicked");
    }
}

/// How a team's workers wait between jobs, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerWait {
    /// They spin for up to [`SPIN`], then sleep.
    Spin,
    /// They sleep at once: the passive policy was asked for (`LUMEN_CPU_PASSIVE_WAIT`,
    /// `CpuOptions::passive_wait`).
    Passive,
    /// They sleep at once: the team has more threads than the cores
    /// `std::thread::available_parallelism` reports, where a spinning thread would hold a core
    /// a working one needs.
    MoreThreadsThanCores,
}

impl WorkerWait {
    /// The wait of a team of `threads` (the caller included) whose workers may `spin`; `None`
    /// for one thread (no workers).
    pub fn of(threads: usize, spin: bool) -> Option<Self> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match threads {
            0 | 1 => None,
            _ if !spin => Some(Self::Passive),
            t if t > cores => Some(Self::MoreThreadsThanCores),
            _ => Some(Self::Spin),
        }
    }

    /// `workers spin between kernels`, or `workers sleep between kernels (WHY)`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Spin => "workers spin between kernels",
            Self::Passive => "workers sleep between kernels (LUMEN_CPU_PASSIVE_WAIT)",
            Self::MoreThreadsThanCores => "workers sleep between kernels (more threads than cores)",
        }
    }
}

fn worker(s: &Shared, spin: Duration) {
    let mut seen = 0u64;
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let now = s.epoch.load(Ordering::Acquire);
            if now != seen {
                seen = now;
                break;
            }
            spins = spins.wrapping_add(1);
            // The clock is read every 64 spins: a spin is ~10 ns, a clock read ~20 ns.
            let stop = s.park.load(Ordering::Relaxed)
                || (spins.is_multiple_of(64) && start.elapsed() >= spin);
            if stop {
                let mut sleepers = s.sleepers.lock().unwrap_or_else(|p| p.into_inner());
                *sleepers += 1;
                while s.epoch.load(Ordering::Acquire) == seen {
                    sleepers = s.wake.wait(sleepers).unwrap_or_else(|p| p.into_inner());
                }
                *sleepers -= 1;
                drop(sleepers);
                seen = s.epoch.load(Ordering::Acquire);
                break;
            }
            std::hint::spin_loop();
        }
        s.work(seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_even_when_nested_or_concurrent() {
        let team = Team::new(2, true).unwrap();
        for parts in [0, 1, 3, 17] {
            let counts: Vec<AtomicUsize> = (0..parts).map(|_| AtomicUsize::new(0)).collect();
            team.run(parts, &|p| {
                counts[p].fetch_add(1, Ordering::Relaxed);
            });
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "{parts} parts");
        }
        // A part that splits again runs the inner job on its own thread (no deadlock).
        let inner = AtomicUsize::new(0);
        team.run(2, &|_| {
            team.run(3, &|_| {
                inner.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(inner.load(Ordering::Relaxed), 6);
        // Jobs from several threads at once, after the workers have gone to sleep.
        std::thread::sleep(SPIN * 4);
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..50 {
                        team.run(4, &|p| {
                            total.fetch_add(p + 1, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 3 * 50 * 10);
    }

    #[test]
    fn a_panicking_part_panics_the_caller_after_the_job() {
        let team = Team::new(1, false).unwrap();
        let ran = AtomicUsize::new(0);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            team.run(4, &|p| {
                ran.fetch_add(1, Ordering::Relaxed);
                assert!(p != 2, "part 2 fails");
            });
        }));
        assert!(result.is_err());
        assert_eq!(ran.load(Ordering::Relaxed), 4);
        // The team still works.
        let after = AtomicUsize::new(0);
        team.run(3, &|_| {
            after.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(after.load(Ordering::Relaxed), 3);
    }
}
