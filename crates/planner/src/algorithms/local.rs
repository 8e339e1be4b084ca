//! Iterated greedy for DAGs whose buffers are not intervals: a plan is a placement order
//! decoded by first fit or best fit; the search moves one buffer earlier in the order, decodes
//! again, and keeps the new order when the slab does not grow (sideways moves let it cross
//! plateaus). Buffers that end at the top of the slab are moved most often: they are the ones
//! that make it high. This is the iterated greedy of Ruiz and Stützle (EJOR 2007) applied to
//! the decoders the greedy algorithms use; every plan it keeps is a first-fit or best-fit
//! placement, so it respects the DAG rule by construction.

use std::time::Instant;

use super::greedy::{Fit, Greedy};
use super::instance::Instance;
use super::rng::SplitMix64;

/// The best plan so far.
#[derive(Debug, Clone)]
pub(crate) struct Incumbent {
    /// Its slab in bytes (`usize::MAX` before any plan).
    pub(crate) slab: usize,
    /// Its offsets in request order.
    pub(crate) offsets: Vec<usize>,
}

impl Incumbent {
    /// Keeps `offsets` if its `slab` is strictly smaller.
    pub(crate) fn offer(&mut self, slab: usize, offsets: &[usize]) {
        if slab < self.slab {
            self.slab = slab;
            self.offsets.clear();
            self.offsets.extend_from_slice(offsets);
        }
    }
}

/// Work budget of the local search in neighbour visits (one decode of a plan costs its
/// number of conflicting pairs, twice, plus its buffers).
pub(crate) const LOCAL_WORK: u64 = 30_000_000;

/// Most orders tried per buffer, so small programs finish in microseconds.
const TRIES_PER_BUFFER: usize = 400;

/// Improves `incumbent`, starting from `order` (a greedy order, decoded with `fit`), until the
/// plan meets `lower_bound` (bytes), this run's share of the work budget runs out (`1 / share`
/// of [`LOCAL_WORK`] and of the tries per buffer), or the deadline passes (`deadline` replaces
/// the work budget when given).
pub(crate) fn improve(
    inst: &Instance<'_>,
    incumbent: &mut Incumbent,
    order: &[u32],
    fit: Fit,
    lower_bound: usize,
    share: u64,
    deadline: Option<Instant>,
) {
    let n = order.len();
    if n < 2 || incumbent.slab <= lower_bound {
        return;
    }
    let decode_cost = 2 * inst.conflicts.pair_count() as u64 + n as u64;
    let tries = match deadline {
        Some(_) => usize::MAX,
        None => {
            let share = share.max(1);
            let cap = (TRIES_PER_BUFFER * n) as u64 / share;
            (LOCAL_WORK / share / decode_cost.max(1)).min(cap) as usize
        }
    };
    let mut greedy = Greedy::default();
    let mut rng = SplitMix64::new(0x1F0C_A11E_5EED);
    let mut current: Vec<u32> = order.to_vec();
    let mut offsets = vec![0usize; n];
    let Ok(mut current_slab) =
        greedy.place(&inst.conflicts, inst.reserved, &current, fit, usize::MAX, &mut offsets)
    else {
        return;
    };
    let mut tops: Vec<usize> = Vec::new();
    let mut trial: Vec<u32> = Vec::with_capacity(n);
    let mut trial_offsets = vec![0usize; n];
    for k in 0..tries {
        if incumbent.slab <= lower_bound {
            break;
        }
        if k % 64 == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        // Positions (in the order) of buffers that end at the top of the current plan.
        tops.clear();
        tops.extend(current.iter().enumerate().filter_map(|(pos, &b)| {
            let b = b as usize;
            (offsets[b] + inst.reserved[b] == current_slab).then_some(pos)
        }));
        let from = if !tops.is_empty() && rng.below(4) != 0 {
            tops[rng.below(tops.len())]
        } else {
            rng.below(n)
        };
        if from == 0 {
            continue;
        }
        let to = rng.below(from);
        trial.clear();
        trial.extend_from_slice(&current);
        let moved = trial.remove(from);
        trial.insert(to, moved);
        let trial_fit = if k % 2 == 0 { fit } else { other(fit) };
        if let Ok(slab) = greedy.place(
            &inst.conflicts,
            inst.reserved,
            &trial,
            trial_fit,
            usize::MAX,
            &mut trial_offsets,
        ) && slab <= current_slab
        {
            std::mem::swap(&mut current, &mut trial);
            std::mem::swap(&mut offsets, &mut trial_offsets);
            current_slab = slab;
            incumbent.offer(slab, &offsets);
        }
    }
}

fn other(fit: Fit) -> Fit {
    match fit {
        Fit::First => Fit::Best,
        Fit::Best => Fit::First,
    }
}
