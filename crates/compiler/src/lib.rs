//! lumen-compiler (built by the compiler issue).
