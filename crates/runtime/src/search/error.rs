//! Why a search returned no winner: [`SearchError`].

use lumen_compiler::CompileError;
use thiserror::Error;

use crate::RuntimeError;

/// Why a search returned no winner.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The candidate list is empty.
    #[error("search needs at least one candidate")]
    NoCandidates,
    /// An option is out of range (`trials` 0, `max_candidates` 0, a negative or non-finite
    /// tolerance).
    #[error("invalid search option: {0}")]
    InvalidOption(String),
    /// Every candidate's slab exceeds the memory budget.
    #[error(
        "every candidate's slab exceeds the memory budget of {budget} bytes (smallest: {smallest} bytes)"
    )]
    OverBudget {
        /// The budget, bytes.
        budget: usize,
        /// The smallest candidate slab, bytes.
        smallest: usize,
    },
    /// No candidate could be prepared and executed: the first candidate's error.
    #[error("no candidate ran: {label}: {source}")]
    NothingRan {
        /// The candidate that failed first.
        label: String,
        /// Its error.
        #[source]
        source: RuntimeError,
    },
    /// Candidates ran, but none that finished its trials agrees with the reference's outputs
    /// (the reference itself failed after its first execute, and every other candidate that
    /// ran disagrees with that execute's outputs).
    #[error(
        "no candidate agrees with the reference {reference}, which did not finish its trials: \
         {mismatched} disagree (first: {first})"
    )]
    NoAgreement {
        /// The reference candidate's label.
        reference: String,
        /// How many candidates disagree with it.
        mismatched: usize,
        /// The first of them: `label: mismatch against ...`.
        first: String,
    },
    /// The selected candidate's dumps could not be written.
    #[error(transparent)]
    Dump(#[from] CompileError),
}
