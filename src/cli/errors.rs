//! Error messages as the CLI prints them: byte counts grouped by thousands (`1,463,296`), as
//! the tables print them ([`lumen_planner::svg::group`]), so a number in an error line can be
//! matched against a table by eye.
//!
//! The library errors keep their plain `Display` (a contract other code matches); the CLI
//! re-renders the ones that carry byte counts a user can hit: the search's memory budget error
//! and the runtime's slab allocation error. The planner's errors are printed as the planner's words
//! them (`slab capacity {capacity} exceeded while placing request {i} ({bytes} bytes)`, plain
//! numbers): that text is the contract scripts match.

use std::error::Error;

use lumen_planner::svg::group;
use lumen_runtime::RuntimeError;
use lumen_runtime::search::SearchError;

/// `err`'s message with the byte counts of it and of every error in its source chain grouped:
/// `slab capacity 1,196,287 exceeded while placing request 4 (16,384 bytes)`. A wrapping error
/// that embeds its source's text (`planning failed: {0}`) gets the grouped text in its place.
pub fn message(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(grouped) = grouped(e) {
            text = text.replace(&e.to_string(), &grouped);
        }
        cause = e.source();
    }
    text
}

/// The grouped message of an error that carries byte counts; `None` for any other.
fn grouped(err: &(dyn Error + 'static)) -> Option<String> {
    if let Some(SearchError::OverBudget { budget, smallest, .. }) = err.downcast_ref() {
        return Some(format!(
            "every candidate's slab exceeds the memory budget of {} bytes (smallest: {} bytes)",
            group(*budget),
            group(*smallest)
        ));
    }
    if let Some(RuntimeError::Alloc { bytes, .. }) = err.downcast_ref() {
        return Some(format!("cannot allocate a slab of {} bytes", group(*bytes)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumen_compiler::CompileError;
    use lumen_planner::PlanError;

    #[test]
    fn byte_counts_are_grouped_through_the_chain() {
        // The planner's errors keep the planner's words and plain numbers, wrapped or not.
        let plan = PlanError::CapacityExceeded { capacity: 1_196_287, index: 4, bytes: 16_384 };
        assert_eq!(
            message(&plan),
            "slab capacity 1196287 exceeded while placing request 4 (16384 bytes)"
        );
        let wrapped = CompileError::Plan(plan);
        assert_eq!(
            message(&wrapped),
            "planning failed: slab capacity 1196287 exceeded while placing request 4 (16384 bytes)"
        );
        let budget = SearchError::OverBudget { budget: 0, smallest: 1_463_296 };
        assert_eq!(
            message(&budget),
            "every candidate's slab exceeds the memory budget of 0 bytes (smallest: 1,463,296 \
             bytes)"
        );
        let alloc = RuntimeError::Alloc { bytes: 1 << 40 };
        assert_eq!(message(&alloc), "cannot allocate a slab of 1,099,511,627,776 bytes");
        // Anything else is its own Display.
        assert_eq!(message(&PlanError::ZeroAlignment), "slab alignment must be positive");
    }
}
