//! What a symbolic dimension is: a named symbol with an upper bound, the symbol (or none) of
//! each axis of a tensor, and how a shape with symbols prints (`[seq<=32, 512]`). How symbols
//! flow through a program and are bound at run time is [`crate::symbolic`].

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// A symbol of a program: an index into [`Symbols::decls`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SymbolId(pub usize);

/// A declared symbol: its name and the largest value it may take.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct SymbolDecl {
    /// The name in dumps and errors (`seq`).
    pub name: String,
    /// The upper bound (at least 1): the length the program is compiled and planned for.
    pub bound: usize,
}

/// Per axis of a tensor: the symbol its length is, or `None` for a fixed length.
pub type Axes = Vec<Option<SymbolId>>;

/// Whether no axis is symbolic (serde's skip test for [`crate::LlirBuffer::axes`]).
pub fn all_fixed(axes: &Axes) -> bool {
    axes.iter().all(Option::is_none)
}

/// A program's symbols and which input axes they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Symbols {
    /// Declared symbols, in declaration order.
    pub decls: Vec<SymbolDecl>,
    /// The symbolic axes of each input (or state) that has one, by name.
    pub inputs: BTreeMap<String, Axes>,
    /// Where each symbol was declared, in declaration order (for errors).
    pub locations: Vec<crate::error::SourceLocation>,
}

impl Symbols {
    /// Whether the program has no symbol.
    pub fn is_empty(&self) -> bool {
        self.decls.is_empty()
    }

    /// The bound of each symbol, in declaration order (the values the compiled LLIR has).
    pub fn bounds(&self) -> Vec<usize> {
        self.decls.iter().map(|d| d.bound).collect()
    }
}

/// One dimension given to [`crate::Graph::input_dims`]: a fixed length or a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    /// A fixed length in elements.
    Fixed(usize),
    /// A symbolic length ([`crate::Graph::symbol`]); the program is compiled at its bound.
    Sym(Symbol),
}

/// A handle to a declared symbol ([`crate::Graph::symbol`]): its id and bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol {
    /// Its id in the program.
    pub id: SymbolId,
    /// Its upper bound.
    pub bound: usize,
}

impl From<usize> for Dim {
    fn from(n: usize) -> Self {
        Dim::Fixed(n)
    }
}

impl From<Symbol> for Dim {
    fn from(s: Symbol) -> Self {
        Dim::Sym(s)
    }
}

impl Dim {
    /// The length at the bound.
    pub fn bound(self) -> usize {
        match self {
            Dim::Fixed(n) => n,
            Dim::Sym(s) => s.bound,
        }
    }

    /// The symbol, if symbolic.
    pub fn symbol(self) -> Option<SymbolId> {
        match self {
            Dim::Fixed(_) => None,
            Dim::Sym(s) => Some(s.id),
        }
    }
}

/// A shape with its symbols as dumps print it: `[seq<=32, 512]`.
pub struct SymbolicShape<'a> {
    /// Lengths at the bound.
    pub shape: &'a [usize],
    /// Symbol per axis (shorter or empty: the rest are fixed).
    pub axes: &'a [Option<SymbolId>],
    /// The program's symbols.
    pub decls: &'a [SymbolDecl],
}

impl fmt::Display for SymbolicShape<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, &d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match self.axes.get(i).copied().flatten().and_then(|s| self.decls.get(s.0)) {
                Some(decl) => write!(f, "{}<={}", decl.name, decl.bound)?,
                None => write!(f, "{d}")?,
            }
        }
        f.write_str("]")
    }
}
