//! How fusion is configured: the rules, the runner's bounds ([`Limits`]) and the cost model.

use std::time::Duration;

use super::cost::CostModel;
use super::rules::RuleSet;

/// Bounds of the equality-saturation runner, so any rule set (cyclic ones included) stops,
/// and its e-graph grows at most linearly with the program.
///
/// The count limits scale with the program: each applies as the larger of its value and
/// [`GROWTH`] x the loaded program's e-nodes, and the time limit as the larger of its value and
/// [`TIME_PER_ENODE`] x those e-nodes, so a program of any size gets every rewrite of the
/// built-in rules and the same result on any machine. Why these numbers: the built-in rules
/// add at most one e-node per loaded e-node and rule (a commuted `add`/`mul`/`equal`, an
/// `lt_bias` over a matmul and an add, an `lt_*` over an activation), so the saturated e-graph
/// of any program holds at most about 3 x its loaded e-nodes (the 96-block transformer: 7,493
/// HLIR nodes, 10,181 e-nodes saturated; the 10,000-layer MLP: 80,000 from about 50,000) and a
/// rule matches at most that many times in an iteration; they saturate in at most 4
/// iterations whatever the size (a rule needs at most the previous rule's result: commute,
/// bias, activation, then a check). A rule set that does grow (associativity with
/// commutativity, exponential on a long sum) stops at [`Limits::node_limit`] instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Stop once the e-graph holds more e-nodes than this, or than [`GROWTH`] x the loaded
    /// program's e-nodes when that is larger (default 10,000).
    pub node_limit: usize,
    /// Stop after this many iterations (default 30; the built-in rules saturate in at most 4
    /// at any program size).
    pub iter_limit: usize,
    /// The matches a rule may find in one iteration before egg's backoff scheduler bans it
    /// for a few iterations (egg's default 1,000), or [`GROWTH`] x the loaded program's
    /// e-nodes when that is larger, so the built-in rules are never banned: a ban on a large
    /// program cost extra iterations, each a search over the whole e-graph (a 10,000-layer
    /// MLP took 11 iterations instead of 4), and on a larger one could reach the iteration
    /// limit before the bias rule ever ran.
    pub match_limit: usize,
    /// Stop after this much wall-clock time (default 1 s), or [`TIME_PER_ENODE`] x the loaded
    /// program's e-nodes when that is longer. Hitting it makes the result depend on the
    /// machine's speed; the other limits do not, and the built-in rules never come near it.
    pub time_limit: Duration,
}

/// How many times its loaded e-nodes a program's e-graph may grow to, and the matches per rule
/// and iteration allowed before a ban: [`Limits`] apply at least this many times the program.
pub const GROWTH: usize = 16;

/// The wall-clock time a program may saturate for, per loaded e-node, when that is more than
/// [`Limits::time_limit`]: 100 us, about 20 times what the built-in rules take per e-node in a
/// release build (about 5 us on a 10,000-layer MLP), so an unoptimized build stays under it too.
pub const TIME_PER_ENODE: Duration = Duration::from_micros(100);

impl Default for Limits {
    fn default() -> Self {
        Self {
            node_limit: 10_000,
            iter_limit: 30,
            match_limit: 1_000,
            time_limit: Duration::from_secs(1),
        }
    }
}

impl Limits {
    /// The limits as they apply to a program of `loaded` e-nodes: `(node limit, match limit,
    /// time limit)` (see [`Limits`]).
    pub fn applied(&self, loaded: usize) -> (usize, usize, Duration) {
        let scaled = loaded.saturating_mul(GROWTH);
        let time = TIME_PER_ENODE.saturating_mul(u32::try_from(loaded).unwrap_or(u32::MAX));
        (self.node_limit.max(scaled), self.match_limit.max(scaled), self.time_limit.max(time))
    }
}

/// Everything fusion can be configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FusionConfig {
    /// Which rules run.
    pub rules: RuleSet,
    /// The runner's bounds.
    pub limits: Limits,
    /// The cost model of extraction and of the pick.
    pub cost: CostModel,
}
