//! Usage errors found after parsing: a flag clap accepted but the command cannot use (a size of
//! the other built-in program, `--time-budget` with an algorithm that does not search), an
//! unknown program name, a `--layers` list that does not parse. `main` exits with status 2 for
//! them, as for clap's own usage errors (an unknown flag, a value out of range), and 1 for
//! everything else, including values the compiler or planner refuses (`--m 0`,
//! `--alignment 3`, a capacity nothing fits in): the line tells a user to fix the command, not
//! the problem.

use std::error::Error;

/// A misused command line, wrapping the error that says how; its message is that error's,
/// word for word. `main` finds it anywhere in an [`anyhow::Error`]'s chain and exits with
/// status 2 (the status of clap's usage errors, which lumen's README promises for all of them).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(#[source] Box<dyn Error + Send + Sync + 'static>);

impl UsageError {
    /// Wraps `err` (a typed error such as `CompileError::NotApplicable`, kept as the source so
    /// it can still be downcast).
    pub fn new(err: impl Into<Box<dyn Error + Send + Sync + 'static>>) -> Self {
        UsageError(err.into())
    }
}

/// Whether `err` is a usage error: a [`UsageError`] anywhere in its chain.
pub fn is_usage(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.is::<UsageError>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lumen_compiler::CompileError;
    use lumen_compiler::programs::SizeOption;

    #[test]
    fn the_message_is_the_wrapped_errors_and_the_source_stays_typed() {
        let inner =
            CompileError::NotApplicable { option: SizeOption::Layers, program: "lr".into() };
        let text = inner.to_string();
        let err = anyhow::Error::new(UsageError::new(inner));
        assert_eq!(err.to_string(), text);
        assert!(is_usage(&err));
        let source = err.chain().nth(1).and_then(|c| c.downcast_ref::<CompileError>());
        assert!(matches!(source, Some(CompileError::NotApplicable { .. })), "{source:?}");
        // Wrapped in a context, still a usage error; a plain error is not.
        assert!(is_usage(&err.context("while parsing")));
        assert!(!is_usage(&anyhow::anyhow!("slab alignment must be positive")));
    }
}
