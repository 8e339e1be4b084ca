//! Element types and scalar constants.
//!
//! Every computed tensor is f32. Integer tensors exist only as indices: an input or weight of
//! dtype i32 or i64 that feeds [`crate::HlirOp::Gather`] (and views of it). A workspace is raw
//! bytes (`u8`).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// The element type of a tensor or buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE 754 binary32: every computed tensor.
    F32,
    /// 32-bit signed integer indices (gather ids).
    I32,
    /// 64-bit signed integer indices (gather ids; what PyTorch and ONNX use for token ids).
    I64,
    /// Raw bytes: a matmul's workspace.
    U8,
}

impl DType {
    /// The name in dumps and messages: `f32`, `i32`, `i64`, `u8`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
        }
    }

    /// Bytes per element: 4, 4, 8, 1.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
            DType::U8 => 1,
        }
    }

    /// Whether host tensors hold this type (f32, i32, i64; not a workspace's raw bytes).
    pub fn is_host(self) -> bool {
        self != DType::U8
    }

    /// Whether the type holds integer indices (i32 or i64).
    pub fn is_index(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }
}

impl DType {
    /// `v` converted to this type, as [`crate::HlirOp::Cast`] defines it, in f64: to an
    /// integer type truncated toward zero and saturated at the type's range (NaN is 0); to
    /// f32 rounded to the nearest f32. Every engine computes casts by this rule.
    pub fn cast_f64(self, v: f64) -> f64 {
        match self {
            DType::F32 => f64::from(v as f32),
            DType::I32 => f64::from(v as i32),
            DType::I64 => (v as i64) as f64,
            DType::U8 => f64::from(v as u8),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An f32 scalar constant, compared and hashed by its bits (so `0.0` and `-0.0` are two
/// constants, and a constant can key an e-graph node). Every NaN is stored as the one quiet
/// NaN `0x7fc00000`, so equal-looking constants are equal.
///
/// Displays as Rust's shortest round-trip form of the value (`0.125`, `1e-5`, `-0.0`, `inf`,
/// `NaN`), which [`Scalar::from_str`] reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Scalar(u32);

impl Scalar {
    /// The constant `value` (any NaN becomes the canonical quiet NaN).
    pub fn new(value: f32) -> Self {
        if value.is_nan() { Self(0x7fc0_0000) } else { Self(value.to_bits()) }
    }

    /// The value.
    pub fn value(self) -> f32 {
        f32::from_bits(self.0)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.value())
    }
}

impl FromStr for Scalar {
    type Err = std::num::ParseFloatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<f32>().map(Scalar::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_round_trip_through_text() {
        for v in [0.125f32, 1e-5, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY, 3.0, f32::MIN] {
            let s = Scalar::new(v);
            assert_eq!(s.to_string().parse::<Scalar>().unwrap(), s, "{v}");
        }
        assert_ne!(Scalar::new(0.0), Scalar::new(-0.0));
        assert_eq!(Scalar::new(f32::NAN), Scalar::new(-f32::NAN));
        assert_eq!(Scalar::new(f32::NAN).to_string(), "NaN");
        assert_eq!(Scalar::new(1e-5).to_string(), "1e-5");
    }

    #[test]
    fn sizes() {
        assert_eq!([DType::F32, DType::I32, DType::I64, DType::U8].map(DType::size), [4, 4, 8, 1]);
        assert!(DType::I64.is_index() && !DType::F32.is_index());
    }
}
