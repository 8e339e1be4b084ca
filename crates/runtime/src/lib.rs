//! lumen-runtime (built by the runtime issue).
