//! Host tensors: what callers hand to a runtime and get back from it.

use indexmap::IndexMap;

use crate::RuntimeError;

/// A row-major f32 tensor in host memory.
///
/// The data length always equals the product of the shape (a `[2, 0]` tensor holds nothing,
/// a `[]` scalar holds one value); [`HostTensor::new`] checks it, so every `HostTensor` is
/// well formed.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

/// Named host tensors, in a deterministic order: a program's inputs, weights or outputs.
/// Inputs and weights are looked up by name, in any order. Outputs come back in buffer order
/// (the LLIR's canonical order, which the readback node reads in), not declaration order:
/// look them up by name (see [`crate::PreparedProgram::execute`]).
pub type Tensors = IndexMap<String, HostTensor>;

/// Elements a row-major tensor of `shape` holds, or `None` when the product overflows `usize`.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

impl HostTensor {
    /// A tensor of `shape` holding `data` (row-major).
    ///
    /// # Errors
    /// [`RuntimeError::DataLength`] when `data.len()` is not the product of `shape`.
    pub fn new(shape: impl Into<Vec<usize>>, data: Vec<f32>) -> Result<Self, RuntimeError> {
        let shape = shape.into();
        match element_count(&shape) {
            Some(n) if n == data.len() => Ok(Self { shape, data }),
            other => Err(RuntimeError::DataLength {
                shape,
                expected: other.unwrap_or(usize::MAX),
                len: data.len(),
            }),
        }
    }

    /// A tensor of `shape` filled with zeros.
    ///
    /// # Errors
    /// [`RuntimeError::Alloc`] when the element count overflows or cannot be allocated.
    pub fn zeros(shape: impl Into<Vec<usize>>) -> Result<Self, RuntimeError> {
        let shape = shape.into();
        let n = element_count(&shape).ok_or(RuntimeError::Alloc { bytes: usize::MAX })?;
        let mut data = Vec::new();
        data.try_reserve_exact(n)
            .map_err(|_| RuntimeError::Alloc { bytes: n.saturating_mul(4) })?;
        data.resize(n, 0.0);
        Ok(Self { shape, data })
    }

    /// The shape, in elements, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The elements, row-major.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// Consumes the tensor and returns its elements.
    pub fn into_data(self) -> Vec<f32> {
        self.data
    }

    /// Size of the data in bytes (4 per element).
    pub fn bytes(&self) -> usize {
        self.data.len() * 4
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
        assert!(matches!(err, RuntimeError::DataLength { expected: usize::MAX, .. }));
    }

    #[test]
    fn zeros_has_the_shape() {
        let t = HostTensor::zeros([3, 2]).unwrap();
        assert_eq!(t.shape(), &[3, 2]);
        assert_eq!(t.data(), &[0.0; 6]);
        assert!(HostTensor::zeros([usize::MAX, 3]).is_err());
    }
}
