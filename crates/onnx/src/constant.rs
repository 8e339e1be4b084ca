//! Values known at import time (initializers, `Constant` nodes and everything computed from
//! them alone), and the arithmetic that folds them: the shape computations exporters emit
//! (`Shape` -> `Gather` -> `Unsqueeze` -> `Concat` -> `Reshape`) never reach the program.
//! Movement uses lumen's own views ([`View`]), elementwise float math lumen's op table, so a
//! folded value is what the runtime would have computed.

use lumen_compiler::DType;
use lumen_compiler::view::{View, broadcast_shapes, walk};

use crate::proto::{TensorProto, data_type};

/// The elements of a constant: floats (f32; doubles narrowed) or integers (int64, int32,
/// bool and the small integer types widened to i64, their ONNX type kept in [`Const::int`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    /// Floating-point elements.
    F32(Vec<f32>),
    /// Integer (or boolean: 0/1) elements.
    I64(Vec<i64>),
}

/// The ONNX element type of an integer constant, whose elements [`Data::I64`] holds widened:
/// the range a folded result wraps into (int32 arithmetic wraps at 32 bits) and the type the
/// value keeps as a graph output or beside a computed tensor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IntType {
    /// int64 (and what lumen's own integers are: shapes, indices, counts).
    #[default]
    I64,
    /// int32.
    I32,
    /// int8.
    I8,
    /// uint8.
    U8,
    /// bool (0 or 1).
    Bool,
}

impl IntType {
    /// The type of ONNX element type `data_type` (`TensorProto.DataType`), `None` for a type
    /// that is not one of these integers.
    pub fn of(onnx: i32) -> Option<Self> {
        Some(match onnx {
            data_type::INT64 => IntType::I64,
            data_type::INT32 => IntType::I32,
            data_type::INT8 => IntType::I8,
            data_type::UINT8 => IntType::U8,
            data_type::BOOL => IntType::Bool,
            _ => return None,
        })
    }

    /// The ONNX name: `int64`, `int32`, `int8`, `uint8`, `bool`.
    pub fn name(self) -> &'static str {
        match self {
            IntType::I64 => "int64",
            IntType::I32 => "int32",
            IntType::I8 => "int8",
            IntType::U8 => "uint8",
            IntType::Bool => "bool",
        }
    }

    /// Bits of the type (1 for bool).
    pub fn bits(self) -> u32 {
        match self {
            IntType::I64 => 64,
            IntType::I32 => 32,
            IntType::I8 | IntType::U8 => 8,
            IntType::Bool => 1,
        }
    }

    /// Whether the type is signed (two's complement).
    pub fn signed(self) -> bool {
        matches!(self, IntType::I64 | IntType::I32 | IntType::I8)
    }

    /// `v` wrapped into the type's range as C (and NumPy) wrap an integer result: its low bits,
    /// read signed or unsigned; a bool is `v != 0`.
    pub fn wrap(self, v: i64) -> i64 {
        match self {
            IntType::I64 => v,
            IntType::I32 => i64::from(v as i32),
            IntType::I8 => i64::from(v as i8),
            IntType::U8 => i64::from(v as u8),
            IntType::Bool => i64::from(v != 0),
        }
    }

    /// The program's type for a value of this type: i32 for int32, i64 for the others (lumen
    /// computes no narrower integers; bools are f32 0/1 once computed, i64 as constants).
    pub fn dtype(self) -> DType {
        match self {
            IntType::I32 => DType::I32,
            _ => DType::I64,
        }
    }
}

/// A tensor known at import time, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Const {
    /// Shape in elements.
    pub shape: Vec<usize>,
    /// The elements.
    pub data: Data,
    /// The ONNX type of integer elements (`I64` for floats, where it means nothing).
    pub int: IntType,
}

/// Why a `TensorProto` cannot be read: its element type (by name), or external data.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadError {
    /// An element type lumen does not import.
    DType(String),
    /// Data in an external file.
    External,
    /// Data whose length does not match the dims.
    Length,
}

impl Const {
    /// An f32 constant.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Self {
        Self { shape, data: Data::F32(data), int: IntType::I64 }
    }

    /// An i64 constant.
    pub fn i64(shape: Vec<usize>, data: Vec<i64>) -> Self {
        Self { shape, data: Data::I64(data), int: IntType::I64 }
    }

    /// An integer constant of ONNX type `int`, each element wrapped into its range.
    pub fn ints(shape: Vec<usize>, data: Vec<i64>, int: IntType) -> Self {
        Self { shape, data: Data::I64(data.into_iter().map(|v| int.wrap(v)).collect()), int }
    }

    /// Reads an initializer or a constant's tensor.
    ///
    /// # Errors
    /// [`ReadError`] for an unsupported element type, external data, or a length mismatch.
    pub fn from_proto(t: &TensorProto) -> Result<Self, ReadError> {
        if t.data_location == 1 || !t.external_data.is_empty() {
            return Err(ReadError::External);
        }
        let shape: Vec<usize> =
            t.dims.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect();
        let count =
            shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or(ReadError::Length)?;
        let raw = &t.raw_data;
        let data = match t.data_type {
            data_type::FLOAT => Data::F32(if raw.is_empty() {
                t.float_data.clone()
            } else {
                raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
            }),
            data_type::DOUBLE => Data::F32(if raw.is_empty() {
                t.double_data.iter().map(|&v| v as f32).collect()
            } else {
                raw.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32)
                    .collect()
            }),
            data_type::INT64 => Data::I64(if raw.is_empty() {
                t.int64_data.clone()
            } else {
                raw.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect()
            }),
            data_type::INT32 => Data::I64(if raw.is_empty() {
                t.int32_data.iter().map(|&v| i64::from(v)).collect()
            } else {
                raw.chunks_exact(4)
                    .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                    .collect()
            }),
            data_type::BOOL | data_type::UINT8 => Data::I64(if raw.is_empty() {
                t.int32_data.iter().map(|&v| i64::from(v)).collect()
            } else {
                raw.iter().map(|&b| i64::from(b)).collect()
            }),
            data_type::INT8 => Data::I64(if raw.is_empty() {
                t.int32_data.iter().map(|&v| i64::from(v)).collect()
            } else {
                raw.iter().map(|&b| i64::from(b as i8)).collect()
            }),
            other => return Err(ReadError::DType(data_type::name(other))),
        };
        let int = IntType::of(t.data_type).unwrap_or_default();
        let c = Self { shape, data, int };
        if c.len() != count {
            return Err(ReadError::Length);
        }
        Ok(c)
    }

    /// Elements held.
    pub fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the elements are floats.
    pub fn is_float(&self) -> bool {
        matches!(self.data, Data::F32(_))
    }

    /// The elements as integers (floats truncated toward zero).
    pub fn to_i64(&self) -> Vec<i64> {
        match &self.data {
            Data::F32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::I64(v) => v.clone(),
        }
    }

    /// The elements as f32.
    pub fn to_f32(&self) -> Vec<f32> {
        match &self.data {
            Data::F32(v) => v.clone(),
            Data::I64(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }

    /// The same elements as floats (a `Cast` to float).
    pub fn as_float(&self) -> Self {
        Self::f32(self.shape.clone(), self.to_f32())
    }

    /// The same elements as integers (a `Cast` to an integer type, truncating).
    pub fn as_int(&self) -> Self {
        Self::i64(self.shape.clone(), self.to_i64())
    }

    /// The same elements as integers of ONNX type `int` (a `Cast` to it: floats truncated
    /// toward zero, then wrapped into the type's range as NumPy's `astype` does).
    pub fn as_type(&self, int: IntType) -> Self {
        Self::ints(self.shape.clone(), self.to_i64(), int)
    }

    /// The elements read through `view` (of this constant's contiguous layout), row-major.
    pub fn through(&self, view: &View) -> Self {
        let mut idx = Vec::with_capacity(view.elements());
        walk(&view.shape, [view], |[o]| idx.push(o));
        let data = match &self.data {
            Data::F32(v) => Data::F32(idx.iter().map(|&i| v[i]).collect()),
            Data::I64(v) => Data::I64(idx.iter().map(|&i| v[i]).collect()),
        };
        Self { shape: view.shape.clone(), data, int: self.int }
    }

    /// The same elements with another shape (equal element count, checked by the caller).
    pub fn reshaped(mut self, shape: Vec<usize>) -> Self {
        self.shape = shape;
        self
    }

    /// Elementwise `f` over the NumPy broadcast of `self` and `other`, or `None` when the
    /// shapes do not broadcast. Float when either is float; integers keep their ONNX type
    /// (`self`'s, or `other`'s when `self`'s is int64), each result wrapped into its range.
    pub fn zip(
        &self,
        other: &Self,
        ff: impl Fn(f32, f32) -> f32,
        fi: impl Fn(i64, i64) -> i64,
    ) -> Option<Self> {
        let shape = broadcast_shapes(&self.shape, &other.shape)?;
        let a = self.through(&View::contiguous(&self.shape).expand(&shape)?);
        let b = other.through(&View::contiguous(&other.shape).expand(&shape)?);
        Some(match (&a.data, &b.data) {
            (Data::I64(x), Data::I64(y)) => {
                let int = if self.int == IntType::I64 { other.int } else { self.int };
                Self::ints(shape, x.iter().zip(y).map(|(&p, &q)| fi(p, q)).collect(), int)
            }
            _ => Self::f32(
                shape,
                a.to_f32().iter().zip(b.to_f32()).map(|(&p, q)| ff(p, q)).collect(),
            ),
        })
    }

    /// Elementwise `f` of one float or integer constant (integers keep their ONNX type, each
    /// result wrapped into its range).
    pub fn map(&self, ff: impl Fn(f32) -> f32, fi: impl Fn(i64) -> i64) -> Self {
        match &self.data {
            Data::F32(v) => Self::f32(self.shape.clone(), v.iter().map(|&x| ff(x)).collect()),
            Data::I64(v) => {
                Self::ints(self.shape.clone(), v.iter().map(|&x| fi(x)).collect(), self.int)
            }
        }
    }

    /// Joins `parts` (equal shapes but along `axis`) along `axis`; `None` without parts or
    /// when their shapes differ elsewhere.
    pub fn concat(parts: &[Self], axis: usize) -> Option<Self> {
        let first = parts.first()?;
        let agree = |p: &Self| {
            p.shape.len() == first.shape.len()
                && axis < p.shape.len()
                && p.shape
                    .iter()
                    .zip(&first.shape)
                    .enumerate()
                    .all(|(d, (a, b))| d == axis || a == b)
        };
        if !parts.iter().all(agree) {
            return None;
        }
        let mut shape = first.shape.clone();
        shape[axis] = parts.iter().map(|p| p.shape.get(axis).copied().unwrap_or(0)).sum();
        let outer: usize = shape[..axis].iter().product();
        let float = parts.iter().any(Self::is_float);
        let mut f = Vec::new();
        let mut i = Vec::new();
        for o in 0..outer {
            for p in parts {
                let row: usize = p.shape[axis..].iter().product();
                if float {
                    f.extend_from_slice(&p.to_f32()[o * row..(o + 1) * row]);
                } else {
                    i.extend_from_slice(&p.to_i64()[o * row..(o + 1) * row]);
                }
            }
        }
        Some(if float { Self::f32(shape, f) } else { Self::ints(shape, i, first.int) })
    }
}
