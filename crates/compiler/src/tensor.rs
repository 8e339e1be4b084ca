//! Host tensors: what callers hand to a runtime and get back from it, and the values an
//! importer reads from a model file. They live in the compiler crate so a front end (the ONNX
//! importer) and a runtime share them without one depending on the other.

use indexmap::IndexMap;
use thiserror::Error;

use crate::dtype::DType;
pub use crate::hlir::element_count;

/// Why a host tensor could not be made.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TensorError {
    /// A host tensor's data length is not the product of its shape.
    #[error("tensor data has {len} elements but shape {shape:?} holds {expected}")]
    DataLength {
        /// The declared shape.
        shape: Vec<usize>,
        /// Elements the shape holds (saturates at `usize::MAX` on overflow).
        expected: usize,
        /// Elements given.
        len: usize,
    },
    /// The host memory for a tensor could not be allocated (or its size overflows).
    #[error("cannot allocate {bytes} bytes of host memory")]
    Alloc {
        /// The size asked for, bytes (`usize::MAX` when it overflows).
        bytes: usize,
    },
}

/// A row-major tensor in host memory: f32 values, or i32/i64 indices (gather ids).
///
/// The data length always equals the product of the shape (a `[2, 0]` tensor holds nothing,
/// a `[]` scalar holds one value); the constructors check it, so every `HostTensor` is well
/// formed. Outputs are always f32.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    shape: Vec<usize>,
    data: Vec<f32>,
    ids: Ids,
}

/// The elements of an integer tensor (none for f32).
#[derive(Debug, Clone, PartialEq)]
enum Ids {
    None,
    I32(Vec<i32>),
    I64(Vec<i64>),
}

/// Named host tensors, in a deterministic order: a program's inputs, weights or outputs.
/// Inputs and weights are looked up by name, in any order. Outputs come back in buffer order
/// (the LLIR's canonical order, which the readback node reads in), not declaration order:
/// look them up by name (see `PreparedProgram::execute` in lumen-runtime).
pub type Tensors = IndexMap<String, HostTensor>;

impl HostTensor {
    /// A tensor of `shape` holding `data` (row-major).
    ///
    /// # Errors
    /// [`TensorError::DataLength`] when `data.len()` is not the product of `shape`.
    pub fn new(shape: impl Into<Vec<usize>>, data: Vec<f32>) -> Result<Self, TensorError> {
        let shape = shape.into();
        check_len(&shape, data.len())?;
        Ok(Self { shape, data, ids: Ids::None })
    }

    /// An i64 index tensor (token ids for a gather) of `shape` holding `data`.
    ///
    /// # Errors
    /// [`TensorError::DataLength`] when `data.len()` is not the product of `shape`.
    pub fn from_i64(shape: impl Into<Vec<usize>>, data: Vec<i64>) -> Result<Self, TensorError> {
        let shape = shape.into();
        check_len(&shape, data.len())?;
        Ok(Self { shape, data: Vec::new(), ids: Ids::I64(data) })
    }

    /// An i32 index tensor of `shape` holding `data`.
    ///
    /// # Errors
    /// [`TensorError::DataLength`] when `data.len()` is not the product of `shape`.
    pub fn from_i32(shape: impl Into<Vec<usize>>, data: Vec<i32>) -> Result<Self, TensorError> {
        let shape = shape.into();
        check_len(&shape, data.len())?;
        Ok(Self { shape, data: Vec::new(), ids: Ids::I32(data) })
    }

    /// The element type: f32, i32 or i64.
    pub fn dtype(&self) -> DType {
        match self.ids {
            Ids::None => DType::F32,
            Ids::I32(_) => DType::I32,
            Ids::I64(_) => DType::I64,
        }
    }

    /// The i64 elements of an i64 tensor, else `None`.
    pub fn i64_data(&self) -> Option<&[i64]> {
        match &self.ids {
            Ids::I64(v) => Some(v),
            _ => None,
        }
    }

    /// The i32 elements of an i32 tensor, else `None`.
    pub fn i32_data(&self) -> Option<&[i32]> {
        match &self.ids {
            Ids::I32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of an index tensor as i64 (i32 widened), else `None`.
    pub fn index_values(&self) -> Option<Vec<i64>> {
        match &self.ids {
            Ids::None => None,
            Ids::I32(v) => Some(v.iter().map(|&x| i64::from(x)).collect()),
            Ids::I64(v) => Some(v.clone()),
        }
    }

    /// The tensor as the 4-byte words a slab holds (f32 bits; an i32 per word; an i64 as
    /// its low then high 32 bits), for a runtime's upload.
    pub fn words(&self) -> std::borrow::Cow<'_, [f32]> {
        match &self.ids {
            Ids::None => std::borrow::Cow::Borrowed(&self.data),
            Ids::I32(v) => v.iter().map(|&x| f32::from_bits(x as u32)).collect(),
            Ids::I64(v) => v
                .iter()
                .flat_map(|&x| {
                    [f32::from_bits(x as u64 as u32), f32::from_bits((x as u64 >> 32) as u32)]
                })
                .collect(),
        }
    }

    /// The tensor of `shape` and `dtype` whose slab words are `words` (the inverse of
    /// [`HostTensor::words`]: f32 bits, an i32 per word, an i64 as its low then high word):
    /// how a runtime reads an output back.
    ///
    /// # Errors
    /// [`TensorError::DataLength`] when `words` do not hold the shape's elements of `dtype`
    /// (a `u8` tensor is not a host tensor: also this error).
    pub fn from_words(
        shape: impl Into<Vec<usize>>,
        dtype: DType,
        words: &[f32],
    ) -> Result<Self, TensorError> {
        let shape = shape.into();
        let bits = |w: &f32| w.to_bits();
        match dtype {
            DType::F32 => Self::new(shape, words.to_vec()),
            DType::I32 => Self::from_i32(shape, words.iter().map(|w| bits(w) as i32).collect()),
            DType::I64 => {
                let pairs = words.chunks_exact(2);
                if !pairs.remainder().is_empty() {
                    check_len(&shape, usize::MAX)?;
                }
                let v =
                    pairs.map(|p| (u64::from(bits(&p[0])) | (u64::from(bits(&p[1])) << 32)) as i64);
                Self::from_i64(shape, v.collect())
            }
            DType::U8 => {
                check_len(&shape, usize::MAX)?;
                Self::new(shape, Vec::new())
            }
        }
    }

    /// A tensor of `shape` filled with zeros.
    ///
    /// # Errors
    /// [`TensorError::Alloc`] when the element count overflows or cannot be allocated.
    pub fn zeros(shape: impl Into<Vec<usize>>) -> Result<Self, TensorError> {
        let shape = shape.into();
        let n = element_count(&shape).ok_or(TensorError::Alloc { bytes: usize::MAX })?;
        let mut data = Vec::new();
        data.try_reserve_exact(n).map_err(|_| TensorError::Alloc { bytes: n.saturating_mul(4) })?;
        data.resize(n, 0.0);
        Ok(Self { shape, data, ids: Ids::None })
    }

    /// The shape, in elements, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The f32 elements, row-major (empty for an index tensor: see [`HostTensor::i64_data`]).
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// The f32 elements, row-major, to write in place (empty for an index tensor): a caller
    /// updating a cache row between executes writes only that row.
    pub fn data_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }

    /// Consumes the tensor and returns its f32 elements (empty for an index tensor).
    pub fn into_data(self) -> Vec<f32> {
        self.data
    }

    /// Size of the data in bytes (4 per f32 or i32 element, 8 per i64).
    pub fn bytes(&self) -> usize {
        element_count(&self.shape).unwrap_or(0) * self.dtype().size()
    }
}

fn check_len(shape: &[usize], len: usize) -> Result<(), TensorError> {
    match element_count(shape) {
        Some(n) if n == len => Ok(()),
        other => Err(TensorError::DataLength {
            shape: shape.to_vec(),
            expected: other.unwrap_or(usize::MAX),
            len,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_checks_length() {
        assert!(HostTensor::new([2, 3], vec![0.0; 6]).is_ok());
        assert!(HostTensor::new([2, 0], vec![]).is_ok());
        assert_eq!(HostTensor::new(Vec::<usize>::new(), vec![7.0]).map(|t| t.bytes()), Ok(4));
        let err = HostTensor::new([2, 3], vec![0.0; 5]).unwrap_err();
        assert_eq!(err.to_string(), "tensor data has 5 elements but shape [2, 3] holds 6");
        let err = HostTensor::new([usize::MAX, 2], vec![]).unwrap_err();
        assert!(matches!(err, TensorError::DataLength { expected: usize::MAX, .. }));
    }

    #[test]
    fn index_tensors_carry_their_dtype_and_words() {
        let t = HostTensor::from_i64([2], vec![3, -1]).unwrap();
        assert_eq!(t.dtype(), DType::I64);
        assert_eq!(t.bytes(), 16);
        let w = t.words();
        assert_eq!((w[0].to_bits(), w[1].to_bits(), w[3].to_bits()), (3, 0, u32::MAX));
        assert_eq!(t.index_values(), Some(vec![3, -1]));
        assert!(HostTensor::from_i32([3], vec![1]).is_err());
        assert_eq!(HostTensor::new([1], vec![1.0]).unwrap().dtype(), DType::F32);
    }

    #[test]
    fn words_round_trip_every_dtype() {
        for t in [
            HostTensor::new([2], vec![1.5, -0.0]).unwrap(),
            HostTensor::from_i32([3], vec![-1, 0, i32::MAX]).unwrap(),
            HostTensor::from_i64([2], vec![-5, i64::MIN]).unwrap(),
        ] {
            let back = HostTensor::from_words(t.shape().to_vec(), t.dtype(), &t.words()).unwrap();
            assert_eq!(back, t);
        }
        assert!(HostTensor::from_words([2], DType::I64, &[0.0; 3]).is_err());
    }

    #[test]
    fn zeros_has_the_shape() {
        let t = HostTensor::zeros([3, 2]).unwrap();
        assert_eq!(t.shape(), &[3, 2]);
        assert_eq!(t.data(), &[0.0; 6]);
        assert!(HostTensor::zeros([usize::MAX, 3]).is_err());
    }
}
