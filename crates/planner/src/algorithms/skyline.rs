//! Exact search for interval problems: can every buffer fit below a slab of `capacity` bytes?
//!
//! When the DAG's closure is a total order, buffer lifetimes are intervals of the timeline and
//! two buffers conflict exactly when their intervals overlap, so placement is dynamic storage
//! allocation: pack rectangles fixed in time, free in offset. The search builds canonical
//! solutions bottom-up, as MiniMalloc does (Moffitt, "MiniMalloc", ASPLOS 2023), with its own
//! branching rule:
//!
//! - Push every buffer of a solution down until it rests on another or on 0 ("gravity"); then
//!   taking buffers by offset, each one lands on the *skyline* (the upper envelope of those
//!   before it), and everything below the skyline is settled.
//! - Take a valley `V` of the skyline: a run of time segments at height `x` whose neighbours
//!   are higher (a local minimum). In a solution, either some buffer sits at offset `x` inside
//!   `V` (the leftmost such one, `b`, lies within `V`, since its neighbours are higher) and the
//!   floor of `V` left of `b` stays empty up to the lower of `b`'s top and the left rim; or
//!   nothing sits at `x` in `V`, and `V` fills up to its lower rim. Branching over "which `b`,
//!   or none" reaches every solution exactly once (buffers with equal interval and size are
//!   tried once). Of all valleys, the one with the fewest feasible options is branched on:
//!   a valley with one option is a forced move, one with none a dead end found at once.
//! - Inference: every segment `t` must satisfy `height(t) + unplaced load(t) <= capacity`,
//!   since all unplaced buffers live at `t` stack above the skyline there. A drop keeps that
//!   sum; only an emptied floor raises it, so the check runs there.
//! - Floor inference (at the peak only): an unplaced buffer rests at or above the highest
//!   skyline point under its whole interval (its `rest`), so segment `t`'s unplaced load stacks
//!   from the least rest among the buffers covering `t`, which must leave it within capacity.
//!   Rests are kept on the trail; after each move only the segments under buffers whose rest
//!   rose (or that were placed) are checked, and only where the buffer's own rest leaves too
//!   little room. MiniMalloc's "unallocated floor" is the same bound.
//! - Decomposition: where no unplaced buffer crosses from one segment to the next, the two
//!   sides are independent; they are solved one after the other, and when one side fails the
//!   search backtracks past the other at once instead of retrying all its arrangements.
//! - Candidates are tried in a value order (no empty floor, top flush with a neighbour, whole
//!   valley spanned, then one of three size/length orders); attempts restart on the Luby
//!   schedule with the order slightly perturbed (fixed seeds), the standard cure for the
//!   heavy-tailed run times of backtracking search (Gomes, Selman and Kautz, AAAI 1998).
//!
//! Work is counted in segment and candidate visits, so a budget cuts the search at the same
//! point on every machine.

use std::time::Instant;

use super::rng::SplitMix64;

/// A height no buffer reaches: marks segments no unplaced buffer covers.
const WALL: usize = usize::MAX;

/// How candidates at a valley are ordered: the first dive of the search is the greedy this
/// order makes, and later dives change the latest choices first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Branching {
    /// Buffers that start at the valley's left end first (no floor left empty), then the
    /// longest interval, then the largest size.
    Longest,
    /// Buffers that start at the valley's left end first, then the largest size, then the
    /// longest interval.
    Largest,
    /// Buffers that start at the valley's left end first, then the largest area (size times
    /// segments covered).
    Area,
}

/// Result of one bounded search.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Offsets (bytes, by buffer) of a solution whose slab is at most the capacity.
    Found(Vec<usize>),
    /// The whole tree was explored: no placement fits the capacity.
    Infeasible,
    /// The work budget or deadline ran out first.
    OutOfBudget,
}

/// The problem in segment form: buffer `i` covers time segments `start[i]..end[i]` and needs
/// `size[i]` bytes.
#[derive(Debug, Clone)]
pub(crate) struct Intervals {
    start: Vec<u32>,
    end: Vec<u32>,
    size: Vec<usize>,
    segments: usize,
    /// Peak load: the most bytes live in one segment (the exact lower bound here).
    peak: usize,
}

impl Intervals {
    /// From closed spans `[lo, hi]` of positions on a timeline and sizes in bytes.
    pub(crate) fn new(spans: &[(u32, u32)], sizes: &[usize]) -> Self {
        let mut points: Vec<u64> =
            spans.iter().flat_map(|&(lo, hi)| [lo as u64, hi as u64 + 1]).collect();
        points.sort_unstable();
        points.dedup();
        let index = |p: u64| points.partition_point(|&q| q < p) as u32;
        let start: Vec<u32> = spans.iter().map(|&(lo, _)| index(lo as u64)).collect();
        let end: Vec<u32> = spans.iter().map(|&(_, hi)| index(hi as u64 + 1)).collect();
        let segments = points.len().saturating_sub(1);
        let mut delta = vec![0i128; segments + 1];
        for ((&s, &e), &w) in start.iter().zip(&end).zip(sizes) {
            delta[s as usize] += w as i128;
            delta[e as usize] -= w as i128;
        }
        let (mut load, mut peak) = (0i128, 0i128);
        for d in &delta[..segments] {
            load += d;
            peak = peak.max(load);
        }
        Self { start, end, size: sizes.to_vec(), segments, peak: peak as usize }
    }

    /// Number of elementary time segments.
    pub(crate) fn segments(&self) -> usize {
        self.segments
    }

    /// Peak load in bytes: no placement beats it, and for intervals it is the exact
    /// maximum-weight antichain.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    /// Searches for a placement with slab `<= capacity` bytes, with restarts: attempts are cut
    /// off after `RESTART_UNIT` times the Luby sequence (1, 1, 2, 1, 1, 2, 4, ...) of work,
    /// cycling through the branching orders, randomly perturbed (fixed seeds) from the fourth
    /// attempt on. Each attempt is a complete search, so one that runs to its end proves the
    /// capacity infeasible. Stops after `budget` work or at `deadline`; returns the outcome and
    /// the work spent.
    pub(crate) fn search_restarts(
        &self,
        capacity: usize,
        budget: u64,
        deadline: Option<Instant>,
    ) -> (Outcome, u64) {
        const ORDERS: [Branching; 3] = [Branching::Longest, Branching::Largest, Branching::Area];
        // At the peak, segments at peak load have no slack at all and the floor inference
        // prunes most dives; above it, it rarely fires and its cost only slows the search.
        let tight = capacity <= self.peak;
        let mut searches: Vec<Search<'_>> =
            ORDERS.iter().map(|&b| Search::new(self, capacity, b, tight)).collect();
        let mut used = 0u64;
        let mut k = 0u64;
        while used < budget {
            k += 1;
            let slice = (RESTART_UNIT.saturating_mul(luby(k))).min(budget - used);
            let Some(search) = searches.get_mut((k % 3) as usize) else { break };
            // Each branching order in turn; at the peak also each noise level in turn.
            let level =
                if tight { RESTART_NOISE[((k / 3) % 3) as usize] } else { RESTART_NOISE[0] };
            let noise = if k > 3 { Some((k, level)) } else { None };
            let before = search.work;
            let outcome = search.attempt(slice, deadline, noise);
            used = used.saturating_add(search.work - before);
            match outcome {
                Outcome::OutOfBudget => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return (Outcome::OutOfBudget, used);
                    }
                }
                done => return (done, used),
            }
        }
        (Outcome::OutOfBudget, used)
    }
}

/// Work of the shortest restart, in segment visits.
const RESTART_UNIT: u64 = 500_000;

/// Percent chances, per candidate, of swapping it with one of the next few after the first
/// restarts: the levels take turns, three attempts (one per branching order) each. On
/// MiniMalloc's suite no single level was best everywhere (5% found `E` at the lower bound
/// only after 875 M work, 30% needed 1.3 G on `I`); taking turns found both within 300 M.
const RESTART_NOISE: [u32; 3] = [5, 15, 30];

/// The Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, ... (Luby, Sinclair and Zuckerman, 1993): the
/// restart schedule that is within a log factor of the best fixed cutoff.
fn luby(i: u64) -> u64 {
    let mut i = i.max(1);
    loop {
        let mut k = 1u32;
        while (1u64 << k) - 1 < i {
            k += 1;
        }
        if (1u64 << k) - 1 == i {
            return 1u64 << (k - 1);
        }
        i -= (1u64 << (k - 1)) - 1;
    }
}

/// One option tried at a valley.
#[derive(Debug, Clone, Copy)]
enum Choice {
    /// Drop this buffer on the valley floor; fill the floor left of it (`from..start`) up to
    /// `fill`.
    Drop { buffer: u32, from: u32, fill: usize },
    /// Fill the whole valley up to `fill`.
    Fill { fill: usize },
}

/// A change to undo.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Segments `from..to` were all at height `old`.
    Height { from: u32, to: u32, old: usize },
    /// This buffer was placed.
    Place { buffer: u32 },
    /// This buffer's rest (lowest offset the skyline allows it) was `old`.
    Rest { buffer: u32, old: usize },
}

/// Why a search stopped without a solution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Infeasible,
    OutOfBudget,
}

#[derive(Debug)]
struct Frame {
    t0: u32,
    t1: u32,
    floor: usize,
    /// Height beside the valley (WALL at the edge of the component being solved).
    left: usize,
    right: usize,
    /// This frame's candidates: `cands[first..last]`.
    first: usize,
    last: usize,
    /// Next option: candidate `first + next`, and after them, filling the valley.
    next: usize,
    /// Trail length before this frame's current option was applied.
    mark: usize,
}

/// Deepest nesting of independent components solved separately; deeper splits are searched
/// as one (still exact, only slower), so the native stack stays small.
const MAX_SPLIT_DEPTH: u32 = 256;

/// The state of one search: the skyline, the unplaced load per segment, and the trail of
/// changes to undo on backtracking.
struct Search<'a> {
    p: &'a Intervals,
    capacity: usize,
    height: Vec<usize>,
    load: Vec<usize>,
    /// `cross[t]`: unplaced buffers covering both segment `t - 1` and segment `t`.
    cross: Vec<u32>,
    placed: Vec<bool>,
    offset: Vec<usize>,
    /// Buffers by start segment, each list ordered for branching, equal buffers adjacent.
    by_start: Vec<Vec<u32>>,
    cands: Vec<u32>,
    room: Vec<usize>,
    /// `rest[b]`: the highest skyline point under unplaced buffer `b`'s interval (bytes).
    rest: Vec<usize>,
    /// `cover[t]`: every buffer covering segment `t`.
    cover: Vec<Vec<u32>>,
    /// Buffers whose rest rose, or that were placed, since the last floor check.
    raised: Vec<u32>,
    seen: Vec<u32>,
    stamp: u32,
    /// Whether rests are kept and floors checked (see [`Search::floors_ok`]).
    floors: bool,
    trail: Vec<Op>,
    work: u64,
    budget: u64,
    deadline: Option<Instant>,
    rng: Option<SplitMix64>,
    noise: u32,
}

impl<'a> Search<'a> {
    fn new(p: &'a Intervals, capacity: usize, branching: Branching, floors: bool) -> Self {
        let n = p.size.len();
        let mut load = vec![0usize; p.segments];
        let mut cross = vec![0u32; p.segments + 1];
        for i in 0..n {
            for t in p.start[i]..p.end[i] {
                load[t as usize] += p.size[i];
            }
            for t in p.start[i] + 1..p.end[i] {
                cross[t as usize] += 1;
            }
        }
        let mut cover: Vec<Vec<u32>> = vec![Vec::new(); p.segments];
        for i in 0..n {
            for t in p.start[i]..p.end[i] {
                cover[t as usize].push(i as u32);
            }
        }
        let mut by_start: Vec<Vec<u32>> = vec![Vec::new(); p.segments];
        for i in 0..n {
            if let Some(list) = by_start.get_mut(p.start[i] as usize) {
                list.push(i as u32);
            }
        }
        for list in &mut by_start {
            list.sort_by_key(|&i| {
                let i = i as usize;
                let len = u128::from(p.end[i] - p.start[i]);
                let size = p.size[i] as u128;
                let key = match branching {
                    Branching::Longest => (len, size),
                    Branching::Largest => (size, len),
                    Branching::Area => (size * len, len),
                };
                (std::cmp::Reverse(key), p.end[i], p.size[i], i)
            });
        }
        Self {
            p,
            capacity,
            height: vec![0; p.segments],
            load,
            cross,
            placed: vec![false; n],
            offset: vec![0; n],
            by_start,
            cands: Vec::new(),
            room: Vec::new(),
            rest: vec![0; n],
            cover,
            raised: Vec::new(),
            seen: vec![0; p.segments],
            stamp: 0,
            floors,
            trail: Vec::new(),
            work: 0,
            budget: u64::MAX,
            deadline: None,
            rng: None,
            noise: 0,
        }
    }

    fn level(&self, t: usize) -> usize {
        if self.load[t] == 0 { WALL } else { self.height[t] }
    }

    /// The valley within `a..b` to branch on (fewest options, then lowest, then leftmost) as a
    /// frame with its candidates in value order, or `None` when no unplaced buffer lies there.
    fn valley(&mut self, a: u32, b: u32) -> Option<Frame> {
        let (a, b) = (a as usize, b as usize);
        self.work += (b - a) as u64 + 1;
        // Every local minimum of the skyline is a valid place to branch (its neighbours are
        // higher, so whatever sits on its floor lies inside it). Take the most constrained
        // one: fewest options, then lowest, then leftmost. A valley with one option is a
        // forced move; one with none is a dead end found before descending further.
        let mut chosen: Option<(usize, usize, usize, usize)> = None; // (options, floor, t0, t1)
        let mut t = a;
        while t < b {
            let lvl = self.level(t);
            let mut r1 = t + 1;
            while r1 < b && self.level(r1) == lvl {
                r1 += 1;
            }
            let r0 = t;
            t = r1;
            if lvl == WALL {
                continue;
            }
            let left = if r0 == a { WALL } else { self.level(r0 - 1) };
            let right = if r1 >= b { WALL } else { self.level(r1) };
            if left < lvl || right < lvl {
                continue;
            }
            let cap = chosen.map_or(usize::MAX, |c| c.0);
            let mut options = self.count_candidates(r0, r1, lvl, left, cap);
            if self.can_fill(r0 as u32, r1 as u32, left.min(right)) {
                options += 1;
            }
            if options == 0 {
                // Dead end: branch here to backtrack at once.
                chosen = Some((0, lvl, r0, r1));
                break;
            }
            let better = match chosen {
                None => true,
                Some((o, f, _, _)) => (options, lvl) < (o, f),
            };
            if better {
                chosen = Some((options, lvl, r0, r1));
                if options <= 1 {
                    break;
                }
            }
        }
        let (_, best, t0, t1) = chosen?;
        let left = if t0 == a { WALL } else { self.level(t0 - 1) };
        let right = if t1 >= b { WALL } else { self.level(t1) };
        let first = self.cands.len();
        // Lists are visited from t0 on, so buffers that leave no floor empty come first.
        for t in t0..t1 {
            let mut prev: Option<usize> = None;
            for &c in &self.by_start[t] {
                let ci = c as usize;
                self.work += 1;
                if self.placed[ci] || self.p.end[ci] as usize > t1 {
                    continue;
                }
                // Equal buffers are interchangeable: try one of each.
                if prev.is_some_and(|q| {
                    self.p.end[q] == self.p.end[ci] && self.p.size[q] == self.p.size[ci]
                }) {
                    continue;
                }
                prev = Some(ci);
                self.cands.push(c);
            }
        }
        let last = self.cands.len();
        {
            // Value order: buffers that leave no floor empty, then those whose top is flush with
            // a neighbour (no new step in the skyline), then those spanning the whole valley;
            // the branching order (a stable sort keeps it) breaks the remaining ties.
            let p = self.p;
            let (t0u, t1u) = (t0 as u32, t1 as u32);
            self.cands[first..last].sort_by_key(|&c| {
                let c = c as usize;
                let top = best + p.size[c];
                let starts = p.start[c] == t0u;
                let flush = (starts && top == left) || (p.end[c] == t1u && top == right);
                let spans = starts && p.end[c] == t1u;
                (!starts, !flush, !spans)
            });
        }
        if let Some(rng) = self.rng.as_mut() {
            // Randomized restarts: nudge the heuristic order a little.
            let slice = &mut self.cands[first..last];
            for k in 0..slice.len().saturating_sub(1) {
                if rng.below(100) < self.noise as usize {
                    let j = k + 1 + rng.below((slice.len() - k - 1).min(4));
                    slice.swap(k, j);
                }
            }
        }
        Some(Frame {
            t0: t0 as u32,
            t1: t1 as u32,
            floor: best,
            left,
            right,
            first,
            last,
            next: 0,
            mark: self.trail.len(),
        })
    }

    /// Distinct unplaced buffers lying within `t0..t1`, counting no further than `cap`.
    fn count_candidates(
        &mut self,
        t0: usize,
        t1: usize,
        floor: usize,
        left: usize,
        cap: usize,
    ) -> usize {
        // room[k]: how far the floor may rise over t0..t0 + k (the least slack there); a
        // buffer starting at t0 + k leaves that stretch empty up to its own top or the left rim.
        self.room.clear();
        let mut least = usize::MAX;
        self.room.push(least);
        for t in t0..t1 {
            least = least.min(self.capacity.saturating_sub(floor + self.load[t]));
            self.room.push(least);
        }
        self.work += (t1 - t0) as u64;
        let mut count = 0usize;
        for t in t0..t1 {
            let room = self.room[t - t0];
            let mut prev: Option<usize> = None;
            for &c in &self.by_start[t] {
                let ci = c as usize;
                self.work += 1;
                if self.placed[ci] || self.p.end[ci] as usize > t1 {
                    continue;
                }
                if prev.is_some_and(|q| {
                    self.p.end[q] == self.p.end[ci] && self.p.size[q] == self.p.size[ci]
                }) {
                    continue;
                }
                prev = Some(ci);
                if t > t0 && left.min(floor + self.p.size[ci]) - floor > room {
                    continue;
                }
                count += 1;
                if count > cap {
                    return count;
                }
            }
        }
        count
    }

    /// `true` if filling `from..to` up to `fill` keeps every segment's stack within capacity.
    fn can_fill(&mut self, from: u32, to: u32, fill: usize) -> bool {
        if fill == WALL {
            return false;
        }
        self.work += u64::from(to - from);
        (from..to).all(|t| fill.saturating_add(self.load[t as usize]) <= self.capacity)
    }

    fn set_height(&mut self, from: u32, to: u32, h: usize, old: usize) {
        if from < to {
            self.work += u64::from(to - from);
            self.height[from as usize..to as usize].fill(h);
            self.trail.push(Op::Height { from, to, old });
            if !self.floors {
                return;
            }
            // Unplaced buffers over the raised stretch now rest at least at `h`.
            // They are the ones covering `from` and those starting inside the stretch.
            let (f, e) = (from as usize, to as usize);
            let first = self.cover[f].iter();
            let rest = self.by_start[f + 1..e].iter().flatten();
            for &c in first.chain(rest) {
                let b = c as usize;
                self.work += 1;
                if !self.placed[b] && self.rest[b] < h {
                    self.trail.push(Op::Rest { buffer: c, old: self.rest[b] });
                    self.rest[b] = h;
                    self.raised.push(c);
                }
            }
        }
    }

    fn apply(&mut self, frame: &Frame, choice: Choice) {
        match choice {
            Choice::Drop { buffer, from, fill } => {
                let b = buffer as usize;
                let (s, e, w) = (self.p.start[b], self.p.end[b], self.p.size[b]);
                self.set_height(from, s, fill, frame.floor);
                self.set_height(s, e, frame.floor + w, frame.floor);
                for t in s..e {
                    self.load[t as usize] -= w;
                }
                for t in s + 1..e {
                    self.cross[t as usize] -= 1;
                }
                self.placed[b] = true;
                if self.floors {
                    self.raised.push(buffer);
                }
                self.offset[b] = frame.floor;
                self.trail.push(Op::Place { buffer });
            }
            Choice::Fill { fill } => self.set_height(frame.t0, frame.t1, fill, frame.floor),
        }
    }

    /// Undoes every change after trail position `mark`.
    fn undo_to(&mut self, mark: usize) {
        while self.trail.len() > mark {
            match self.trail.pop() {
                Some(Op::Height { from, to, old }) => {
                    self.height[from as usize..to as usize].fill(old);
                }
                Some(Op::Rest { buffer, old }) => self.rest[buffer as usize] = old,
                Some(Op::Place { buffer }) => {
                    let b = buffer as usize;
                    let (s, e, w) = (self.p.start[b], self.p.end[b], self.p.size[b]);
                    for t in s..e {
                        self.load[t as usize] += w;
                    }
                    for t in s + 1..e {
                        self.cross[t as usize] += 1;
                    }
                    self.placed[b] = false;
                }
                None => break,
            }
        }
    }

    /// The next feasible option of `frame`, advancing its cursor; `None` when exhausted.
    fn next_choice(&mut self, frame: &mut Frame) -> Option<Choice> {
        let options = frame.last - frame.first;
        while frame.next <= options {
            let k = frame.next;
            frame.next += 1;
            if k < options {
                let c = self.cands[frame.first + k];
                let s = self.p.start[c as usize];
                if s > frame.t0 {
                    let fill = frame.left.min(frame.floor + self.p.size[c as usize]);
                    if !self.can_fill(frame.t0, s, fill) {
                        continue;
                    }
                    return Some(Choice::Drop { buffer: c, from: frame.t0, fill });
                }
                return Some(Choice::Drop { buffer: c, from: s, fill: 0 });
            }
            let fill = frame.left.min(frame.right);
            if self.can_fill(frame.t0, frame.t1, fill) {
                return Some(Choice::Fill { fill });
            }
        }
        None
    }

    /// Independent parts of `a..b`: maximal runs of segments some unplaced buffer covers,
    /// joined wherever an unplaced buffer crosses from one segment to the next.
    fn parts(&mut self, a: u32, b: u32, out: &mut Vec<(u32, u32)>) {
        out.clear();
        self.work += u64::from(b - a);
        let mut open: Option<u32> = None;
        for t in a..b {
            let ti = t as usize;
            if self.load[ti] == 0 {
                if let Some(p) = open.take() {
                    out.push((p, t));
                }
                continue;
            }
            match open {
                Some(p) if self.cross[ti] == 0 => {
                    out.push((p, t));
                    open = Some(t);
                }
                Some(_) => {}
                None => open = Some(t),
            }
        }
        if let Some(p) = open {
            out.push((p, b));
        }
    }

    /// Checks the segments whose floor may have risen since the last check: every unplaced
    /// buffer rests at or above `rest` (the highest skyline point under its interval), so
    /// segment `t`'s unplaced load stacks from the least `rest` among the buffers covering it.
    fn floors_ok(&mut self) -> bool {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
        let mut ok = true;
        let mut k = 0;
        while k < self.raised.len() {
            let b = self.raised[k] as usize;
            k += 1;
            // An unplaced `b` bounds the floor of every segment it covers by its own rest, so
            // only segments where even that leaves too little room need the full scan.
            let bound = if self.placed[b] { WALL } else { self.rest[b] };
            let (s, e) = (self.p.start[b] as usize, self.p.end[b] as usize);
            self.work += (e - s) as u64;
            for t in s..e {
                if self.seen[t] == self.stamp {
                    continue;
                }
                self.seen[t] = self.stamp;
                if self.load[t] == 0 || bound.saturating_add(self.load[t]) <= self.capacity {
                    continue;
                }
                let mut floor = WALL;
                for &c in &self.cover[t] {
                    if !self.placed[c as usize] {
                        floor = floor.min(self.rest[c as usize]);
                    }
                }
                self.work += self.cover[t].len() as u64;
                if floor.saturating_add(self.load[t]) > self.capacity {
                    ok = false;
                    break;
                }
            }
            if !ok {
                break;
            }
        }
        self.raised.clear();
        ok
    }

    fn out_of_budget(&self) -> bool {
        self.work > self.budget
            || (self.work & 0xFFFF < 64 && self.deadline.is_some_and(|d| Instant::now() >= d))
    }

    /// Places every unplaced buffer within `a..b` (a part no unplaced buffer leaves), or
    /// proves it cannot be done. On success the placements stay applied.
    fn solve(&mut self, a: u32, b: u32, depth: u32) -> Result<(), Stop> {
        let mut parts = Vec::new();
        self.parts(a, b, &mut parts);
        if parts.len() > 1 && depth < MAX_SPLIT_DEPTH {
            return self.solve_parts(&parts, depth);
        }
        let Some(root) = self.valley(a, b) else { return Ok(()) };
        let mut frames = vec![root];
        while let Some(frame) = frames.last_mut() {
            let mark = frame.mark;
            self.undo_to(mark);
            if self.out_of_budget() {
                return Err(Stop::OutOfBudget);
            }
            let mut frame = match frames.pop() {
                Some(f) => f,
                None => break,
            };
            let Some(choice) = self.next_choice(&mut frame) else {
                self.cands.truncate(frame.first);
                continue;
            };
            frame.mark = self.trail.len();
            self.apply(&frame, choice);
            frames.push(frame);
            if self.floors && !self.floors_ok() {
                continue;
            }
            if depth < MAX_SPLIT_DEPTH {
                self.parts(a, b, &mut parts);
                if parts.len() > 1 {
                    match self.solve_parts(&parts, depth) {
                        Ok(()) => return Ok(()),
                        Err(Stop::OutOfBudget) => return Err(Stop::OutOfBudget),
                        Err(Stop::Infeasible) => continue,
                    }
                }
            }
            match self.valley(a, b) {
                Some(child) => frames.push(child),
                None => return Ok(()),
            }
        }
        Err(Stop::Infeasible)
    }

    /// Solves independent parts one after the other: if one fails, no choice in the others
    /// can help, so the caller backtracks past all of them at once.
    fn solve_parts(&mut self, parts: &[(u32, u32)], depth: u32) -> Result<(), Stop> {
        let mark = self.trail.len();
        let first = self.cands.len();
        for &(pa, pb) in parts {
            if let Err(stop) = self.solve(pa, pb, depth + 1) {
                self.undo_to(mark);
                self.cands.truncate(first);
                return Err(stop);
            }
        }
        Ok(())
    }

    /// One search from the empty slab with `budget` more work; `noise` = (seed, percent)
    /// perturbs the branching order.
    fn attempt(
        &mut self,
        budget: u64,
        deadline: Option<Instant>,
        noise: Option<(u64, u32)>,
    ) -> Outcome {
        self.undo_to(0);
        self.cands.clear();
        self.raised.clear();
        // The root must already fit: every segment's load within the capacity.
        if self.load.iter().any(|&l| l > self.capacity) {
            return Outcome::Infeasible;
        }
        self.budget = self.work.saturating_add(budget);
        self.deadline = deadline;
        self.rng = noise.map(|(seed, _)| SplitMix64::new(seed));
        self.noise = noise.map_or(0, |(_, p)| p);
        match self.solve(0, self.p.segments as u32, 0) {
            Ok(()) => Outcome::Found(self.offset.clone()),
            Err(Stop::Infeasible) => Outcome::Infeasible,
            Err(Stop::OutOfBudget) => Outcome::OutOfBudget,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Exhaustive: some offsets (multiples of 1 byte) put every buffer within `capacity`
    /// with no two overlapping in both time and bytes.
    fn brute(spans: &[(u32, u32)], sizes: &[usize], capacity: usize) -> bool {
        fn go(
            k: usize,
            spans: &[(u32, u32)],
            sizes: &[usize],
            cap: usize,
            at: &mut Vec<usize>,
        ) -> bool {
            if k == sizes.len() {
                return true;
            }
            if sizes[k] > cap {
                return false;
            }
            for o in 0..=cap - sizes[k] {
                let clash = (0..k).any(|j| {
                    spans[j].0 <= spans[k].1
                        && spans[k].0 <= spans[j].1
                        && at[j] < o + sizes[k]
                        && o < at[j] + sizes[j]
                });
                if !clash {
                    at.push(o);
                    if go(k + 1, spans, sizes, cap, at) {
                        return true;
                    }
                    at.pop();
                }
            }
            false
        }
        go(0, spans, sizes, capacity, &mut Vec::new())
    }

    fn valid(spans: &[(u32, u32)], sizes: &[usize], capacity: usize, offsets: &[usize]) -> bool {
        let n = sizes.len();
        (0..n).all(|i| offsets[i] + sizes[i] <= capacity)
            && (0..n).all(|i| {
                (i + 1..n).all(|j| {
                    spans[i].1 < spans[j].0
                        || spans[j].1 < spans[i].0
                        || offsets[i] + sizes[i] <= offsets[j]
                        || offsets[j] + sizes[j] <= offsets[i]
                })
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The exact search, with and without the floor inference, finds a placement exactly
        /// when brute force does, and every placement it returns is valid.
        #[test]
        fn exact_search_matches_brute_force(
            raw in prop::collection::vec((0u32..6, 0u32..4, 1usize..5), 1..6),
            extra in 0usize..3,
        ) {
            let spans: Vec<(u32, u32)> = raw.iter().map(|&(s, l, _)| (s, s + l)).collect();
            let sizes: Vec<usize> = raw.iter().map(|&(_, _, w)| w).collect();
            let p = Intervals::new(&spans, &sizes);
            let capacity = p.peak() + extra;
            let feasible = brute(&spans, &sizes, capacity);
            for floors in [false, true] {
                for branching in [Branching::Longest, Branching::Largest, Branching::Area] {
                    let mut search = Search::new(&p, capacity, branching, floors);
                    match search.attempt(u64::MAX, None, None) {
                        Outcome::Found(offsets) => {
                            prop_assert!(feasible);
                            prop_assert!(valid(&spans, &sizes, capacity, &offsets));
                        }
                        Outcome::Infeasible => prop_assert!(!feasible, "{floors} {branching:?}"),
                        Outcome::OutOfBudget => prop_assert!(false, "unbounded search ran out"),
                    }
                }
            }
            // With restarts (floor inference and noise levels at the peak).
            match p.search_restarts(capacity, u64::MAX, None).0 {
                Outcome::Found(offsets) => {
                    prop_assert!(feasible);
                    prop_assert!(valid(&spans, &sizes, capacity, &offsets));
                }
                Outcome::Infeasible => prop_assert!(!feasible),
                Outcome::OutOfBudget => prop_assert!(false, "unbounded search ran out"),
            }
        }
    }
}
