//! Typed errors of the compiler.
//!
//! DSL calls never fail (like Luminal's graph builders); everything a user can get wrong is
//! recorded and reported by `compile` as a [`CompileError`], naming the op, the shapes and the
//! user's source line (captured with `#[track_caller]` and [`std::panic::Location`]).

use std::fmt;
use std::panic::Location;
use std::path::PathBuf;

use lumen_planner::PlanError;
use thiserror::Error;

use crate::dtype::DType;
use crate::names::MAX_PROGRAM_NAME_BYTES;
use crate::sizes::SizeOption;

/// A shape as it appears in messages: `[64, 256]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShapeText(pub Vec<usize>);

impl fmt::Display for ShapeText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The user's source line of a DSL call: `file:line:column`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceLocation(pub &'static Location<'static>);

impl SourceLocation {
    /// The location of the caller (follows `#[track_caller]` chains up to the user's code).
    #[track_caller]
    pub fn caller() -> Self {
        Self(Location::caller())
    }

    /// The source file path as the compiler saw it.
    pub fn file(&self) -> &'static str {
        self.0.file()
    }

    /// 1-based line number.
    pub fn line(&self) -> u32 {
        self.0.line()
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.0.file(), self.0.line(), self.0.column())
    }
}

/// Why a program did not compile.
///
/// Shape and naming errors come from the user's DSL program; [`CompileError::Plan`] wraps the
/// planner's typed error (for example a slab capacity that first fit could not meet);
/// [`CompileError::Dump`] is an I/O failure while writing `LLIR_DUMP_DIR` files.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CompileError {
    /// Two operand shapes that the op cannot combine, e.g. `matmul` of [2, 3] and [4, 5].
    #[error("{op}: shapes {lhs} and {rhs} do not match: {reason} (at {location})")]
    ShapeMismatch {
        /// The op: `matmul`, `add`, `lt_matmul bias`.
        op: &'static str,
        /// Shape of the first operand.
        lhs: ShapeText,
        /// Shape of the second operand.
        rhs: ShapeText,
        /// What was expected, in words.
        reason: String,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// An op whose operands have the wrong rank, e.g. `matmul` of a vector.
    #[error("{op}: operand of shape {shape} has rank {rank}, expected {expected} (at {location})")]
    Rank {
        /// The op.
        op: &'static str,
        /// The offending shape.
        shape: ShapeText,
        /// Its rank.
        rank: usize,
        /// The rank the op needs.
        expected: usize,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// An axis that the operand does not have (`sum` over axis 3 of a matrix, `transpose(0,
    /// -3)` of a matrix). Negative axes count from the last, as the user wrote them.
    #[error("{op}: axis {axis} is out of range for rank {rank} (at {location})")]
    AxisOutOfRange {
        /// The op.
        op: &'static str,
        /// The axis as given.
        axis: isize,
        /// The operand's rank.
        rank: usize,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// A reshape to a shape with another element count.
    #[error("reshape: cannot view {from} as {to}: element counts differ (at {location})")]
    ReshapeCount {
        /// The operand's shape.
        from: ShapeText,
        /// The requested shape.
        to: ShapeText,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// A permute whose axes are not a permutation of the operand's axes.
    #[error("permute: {perm:?} is not a permutation of the {rank} axes (at {location})")]
    BadPermutation {
        /// The axes as given.
        perm: Vec<isize>,
        /// The operand's rank.
        rank: usize,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// A slice whose range does not fit its axis.
    #[error(
        "slice: {start}..{end} of axis {axis} is out of range for its length {len} (at {location})"
    )]
    SliceRange {
        /// The axis.
        axis: usize,
        /// First element asked for.
        start: usize,
        /// One past the last element asked for.
        end: usize,
        /// The axis' length.
        len: usize,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// An operand of the wrong element type (an f32 tensor as gather ids, integer ids into an
    /// elementwise op).
    #[error("{op}: operand {operand} is {got}, expected {expected} (at {location})")]
    DType {
        /// The op.
        op: &'static str,
        /// Which operand (0-based).
        operand: usize,
        /// What the op takes.
        expected: &'static str,
        /// What it got.
        got: DType,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// An op's parameter out of its range (a window of size 0, a convolution whose groups do
    /// not divide its channels, a kernel larger than the padded input).
    #[error("{op}: {reason} (at {location})")]
    BadArgument {
        /// The op.
        op: &'static str,
        /// What is wrong, naming the parameter and its value.
        reason: String,
        /// The user's source line of the op.
        location: SourceLocation,
    },
    /// A tensor whose size in bytes overflows `usize`.
    #[error("{name}: shape {shape} is too large ({op}, at {location})")]
    ShapeOverflow {
        /// What the tensor is (input/weight name, or the op).
        name: String,
        /// The op that made it.
        op: &'static str,
        /// The shape.
        shape: ShapeText,
        /// The user's source line.
        location: SourceLocation,
    },
    /// An HLIR node with the wrong number of operands (a malformed rewrite).
    #[error("{op}: expected {expected} operands, got {got} (at {location})")]
    Arity {
        /// The op.
        op: &'static str,
        /// Operands it needs.
        expected: usize,
        /// Operands it has.
        got: usize,
        /// The source line of the node.
        location: SourceLocation,
    },
    /// An op was given a tensor that belongs to another `Graph`.
    #[error("{op}: operand belongs to another graph (at {location})")]
    ForeignTensor {
        /// The op.
        op: &'static str,
        /// The user's source line.
        location: SourceLocation,
    },
    /// An input, weight or output name that is empty, repeated, reserved, or not
    /// identifier-like (see [`crate::names::tensor_name_problem`]).
    #[error("{kind} name {name:?} is {problem} (at {location})")]
    BadName {
        /// `input`, `weight` or `output`: the DSL call that named the tensor.
        kind: &'static str,
        /// The name.
        name: String,
        /// `empty`, `already used`, `reserved for compiler buffers (t0, workspace, ...)`, or
        /// `not identifier-like: ' ' is not allowed (...)`.
        problem: String,
        /// The user's source line.
        location: SourceLocation,
    },
    /// `.output()` of an input or weight: outputs must be computed by an op.
    #[error(
        "output {name:?} is {leaf:?} itself; an output must be computed by an op (at {location})"
    )]
    OutputOfLeaf {
        /// The output's name.
        name: String,
        /// The input or weight it names.
        leaf: String,
        /// The user's source line.
        location: SourceLocation,
    },
    /// The same tensor marked as output twice under different names.
    #[error(
        "tensor is already output {first:?}; it cannot also be output {name:?} (at {location})"
    )]
    OutputTwice {
        /// The first name.
        first: String,
        /// The second name.
        name: String,
        /// The user's source line of the second `.output()`.
        location: SourceLocation,
    },
    /// A program with no outputs computes nothing.
    #[error("program has no outputs; mark a result with .output(\"name\")")]
    NoOutputs,
    /// The HLIR has a cycle (only a malformed rewrite can make one).
    #[error("HLIR graph must be acyclic")]
    Cyclic,
    /// An HLIR invariant broken by a rewrite (e.g. an output node with consumers, or operand
    /// indices that are not 0, 1, ...).
    #[error("malformed HLIR: {message} (at {location})")]
    Malformed {
        /// What is wrong.
        message: String,
        /// The source line of the offending node.
        location: SourceLocation,
    },
    /// [`crate::CompileOptions::name`] (or the `name` given to [`crate::compile_hlir`],
    /// [`crate::fusion::explore`]) cannot be the stem of a dump file name: it must be 1 to
    /// [`MAX_PROGRAM_NAME_BYTES`] bytes of ASCII letters, digits, `_`, `-`
    /// and `.`, not starting with `.` (`validate_program_name` in [`crate::options`]). Checked at
    /// compile time whether or not dumps are written, so a name that would escape the dump
    /// folder (`../x`, `/tmp/x`, `sub/dir`) fails the same way everywhere.
    #[error(
        "program name {name:?} cannot label dump files: {problem} (use ASCII letters, digits, \
         '_', '-' and '.', not starting with '.', at most {max} bytes)",
        max = MAX_PROGRAM_NAME_BYTES
    )]
    ProgramName {
        /// The name given.
        name: String,
        /// What is wrong: `it is empty`, `it starts with '.'`, `'/' is not allowed`, `it is
        /// 201 bytes long`.
        problem: String,
    },
    /// A program lumen cannot lower yet (e.g. a reshape of an integer tensor's view that would
    /// need a copy: only f32 data is ever copied).
    #[error("unsupported: {what} (at {location})")]
    Unsupported {
        /// What is not supported.
        what: String,
        /// The user's source line.
        location: SourceLocation,
    },
    /// An op would change the meaning of a symbolic dimension ([`crate::symbolic::propagate`]):
    /// a slice, concat or reshape across a symbolic axis, a fixed axis meeting a symbolic one,
    /// an op that takes no symbolic operand.
    #[error("{op}: symbolic dimension: {message} (at {location})")]
    Symbolic {
        /// The op.
        op: &'static str,
        /// What it would do to the symbol.
        message: String,
        /// The user's source line.
        location: SourceLocation,
    },
    /// A compile option is out of range.
    #[error("invalid option: {0}")]
    Option(String),
    /// [`crate::CompileOptions::alignment`] is positive but not a power of two of at least 4
    /// bytes, so an f32 buffer could start mid-element (the planner alone accepts any positive
    /// alignment; zero is its [`PlanError::ZeroAlignment`]).
    #[error(
        "slab alignment {alignment} bytes does not suit f32 buffers: it must be a power of two \
         of at least 4 (4, 8, 16, ..., 256 for cuBLASLt)"
    )]
    Alignment {
        /// The alignment given, in bytes.
        alignment: usize,
    },
    /// A built-in program got bad arguments (e.g. an empty layer list).
    #[error("{program}: {message}")]
    Program {
        /// The program name.
        program: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A size was given to a built-in program it does not apply to (e.g. `--layers` to
    /// `linear-relu`); refused rather than silently ignored.
    #[error("{} applies to {}, not {program}", option.flag(), option.programs_text())]
    NotApplicable {
        /// The size that was given.
        option: SizeOption,
        /// The program it was given to.
        program: String,
    },
    /// No built-in program has this name.
    #[error("unknown program {name:?} (expected one of: {expected})")]
    UnknownProgram {
        /// The name given.
        name: String,
        /// The built-in names, comma-separated.
        expected: String,
    },
    /// The planner refused the lowered program.
    #[error("planning failed: {0}")]
    Plan(#[from] PlanError),
    /// The e-graph fusion failed internally (a rule or an extraction that does not convert
    /// back to a valid HLIR); compiling with `fuse: false` is unaffected.
    #[error("fusion: {0}")]
    Fusion(String),
    /// Writing a dump file failed.
    #[error("cannot write dump {path}: {message}")]
    Dump {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error, as text.
        message: String,
    },
}
