//! Views: how a kernel reads a buffer as a tensor of some shape without copying it.
//!
//! A [`View`] is a shape, a stride per axis and an offset, all in elements: the element at
//! index `(i0, i1, ...)` lives at `offset + i0 * strides[0] + i1 * strides[1] + ...` of the
//! buffer. Movement ops (reshape, permute, expand, slice) only change the view, never the data:
//! this is Luminal's `ShapeTracker` riding on every edge and tinygrad's `View(shape, strides,
//! offset)`, without masks (so concat is a copy, not a padded view). A reshape the strides
//! cannot express ([`View::reshape`] returns `None`) is where lowering inserts a `contiguous`
//! copy first. Strides are non-negative: a broadcast axis has stride 0, nothing is reversed.

use serde::Serialize;

/// A strided view of a buffer; see the module docs. Sizes and strides in elements.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct View {
    /// The shape the kernel sees, outermost axis first.
    pub shape: Vec<usize>,
    /// Elements to step in the buffer per step along each axis (0 = broadcast).
    pub strides: Vec<usize>,
    /// Buffer element of index `(0, 0, ...)`.
    pub offset: usize,
}

/// Windows of `size` elements `dilation` apart, starting every `step` elements, that fit in an
/// axis of length `len` (see [`View::window`]): `(len - span) / step + 1` with `span = (size -
/// 1) * dilation + 1`, or 0 when even one does not fit. `step` and `dilation` of 0 count as 1.
pub fn window_count(len: usize, size: usize, step: usize, dilation: usize) -> usize {
    let span = size.saturating_sub(1).saturating_mul(dilation.max(1)).saturating_add(1);
    if len < span { 0 } else { (len - span) / step.max(1) + 1 }
}

/// The multi-index of row-major element `flat` of `shape` (one entry per axis).
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut pos = vec![0; shape.len()];
    for (p, &d) in pos.iter_mut().zip(shape).rev() {
        *p = flat % d.max(1);
        flat /= d.max(1);
    }
    pos
}

/// Row-major strides of `shape`: `[6, 2, 1]` for `[4, 3, 2]` (saturating: validated shapes
/// never overflow).
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut acc = 1usize;
    for (s, &d) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(d);
    }
    strides
}

/// The NumPy broadcast of two shapes (aligned on their trailing axes; an axis of length 1 or
/// a missing axis repeats), or `None` when an axis has two lengths that are both not 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        let pad = rank - s.len();
        if i < pad { 1 } else { s[i - pad] }
    };
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

impl View {
    /// The row-major view of a whole buffer of `shape`.
    pub fn contiguous(shape: &[usize]) -> Self {
        Self { shape: shape.to_vec(), strides: row_major_strides(shape), offset: 0 }
    }

    /// Axes.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Elements the view holds (the product of its shape; saturating).
    pub fn elements(&self) -> usize {
        self.shape.iter().fold(1usize, |acc, &d| acc.saturating_mul(d))
    }

    /// Whether consecutive indices are consecutive elements (row-major strides; an axis of
    /// length 1 may have any stride). The offset may be anything.
    pub fn is_contiguous(&self) -> bool {
        // Row-major strides from the innermost axis out, without building them (kernels ask
        // this on every execute).
        let mut want = 1usize;
        let chained = self.shape.iter().zip(&self.strides).rev().all(|(&d, &s)| {
            let ok = d <= 1 || s == want;
            want = want.saturating_mul(d);
            ok
        });
        chained || self.elements() == 0
    }

    /// Whether the view is exactly a whole buffer of `shape` read in row-major order: what a
    /// dump prints as the bare buffer name.
    pub fn is_whole(&self, shape: &[usize]) -> bool {
        self.shape == shape && self.offset == 0 && self.is_contiguous()
    }

    /// The element offset of row-major index `i` (`0 <= i < elements()`).
    pub fn index(&self, mut i: usize) -> usize {
        let mut at = self.offset;
        for (&d, &s) in self.shape.iter().zip(&self.strides).rev() {
            if d > 0 {
                at += (i % d) * s;
                i /= d;
            }
        }
        at
    }

    /// One past the largest buffer element the view can touch (0 for an empty view), or
    /// `None` when that overflows: the buffer must hold at least this many elements.
    pub fn extent(&self) -> Option<usize> {
        if self.elements() == 0 {
            return Some(0);
        }
        self.shape.iter().zip(&self.strides).try_fold(self.offset + 1, |acc, (&d, &s)| {
            (d - 1).checked_mul(s).and_then(|x| acc.checked_add(x))
        })
    }

    /// Distinct buffer elements a full read touches, counting a broadcast axis once: the
    /// product of the lengths of the axes with a non-zero stride (exact for every view
    /// lumen makes, whose strided axes never overlap). What the DRAM traffic figures count.
    pub fn footprint(&self) -> usize {
        if self.elements() == 0 {
            return 0;
        }
        self.shape
            .iter()
            .zip(&self.strides)
            .filter(|(_, s)| **s != 0)
            .fold(1usize, |acc, (&d, _)| acc.saturating_mul(d))
    }

    /// The view with its axes reordered: axis `i` of the result is axis `perm[i]` of `self`.
    /// `perm` must be a permutation of `0..rank` (the HLIR checks it).
    pub fn permute(&self, perm: &[usize]) -> Self {
        Self {
            shape: perm.iter().map(|&p| self.shape[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// NumPy's `broadcast_to(shape)`: axes are aligned on the right, a missing axis or an
    /// axis of length 1 repeats with stride 0. `None` when an axis of length other than 1
    /// would have to change, or `shape` has fewer axes.
    pub fn expand(&self, shape: &[usize]) -> Option<Self> {
        let pad = shape.len().checked_sub(self.rank())?;
        let mut strides = vec![0; shape.len()];
        for (i, &d) in shape.iter().enumerate().skip(pad) {
            let (src, s) = (self.shape[i - pad], self.strides[i - pad]);
            strides[i] = if src == d {
                s
            } else if src == 1 {
                0
            } else {
                return None;
            };
        }
        Some(Self { shape: shape.to_vec(), strides, offset: self.offset })
    }

    /// Elements `start..end` of `axis` (`start <= end <= shape[axis]`, checked by the HLIR).
    pub fn slice(&self, axis: usize, start: usize, end: usize) -> Self {
        let mut view = self.clone();
        if end > start {
            view.offset += start * self.strides[axis];
        }
        view.shape[axis] = end - start;
        view
    }

    /// The buffer element at multi-index `pos` (one entry per axis, each below its length):
    /// `offset + sum(pos[a] * strides[a])`.
    pub fn offset_of(&self, pos: &[usize]) -> usize {
        pos.iter().zip(&self.strides).fold(self.offset, |acc, (&p, &s)| acc + p * s)
    }

    /// Sliding windows along `axis` (Luminal's `pool_last_dim`, NumPy's
    /// `sliding_window_view` with a step and a dilation): the axis of length `len` becomes two,
    /// `[count, size]`, where window `i` holds elements `i * step + j * dilation` for `j` in
    /// `0..size`, and `count = (len - span) / step + 1` windows fit (`span = (size - 1) *
    /// dilation + 1`; none when `len < span`). Windows overlap when `step < span`; no element
    /// moves. `size`, `step` and `dilation` are at least 1 (checked by the HLIR).
    pub fn window(&self, axis: usize, size: usize, step: usize, dilation: usize) -> Self {
        let len = self.shape[axis];
        let count = window_count(len, size, step, dilation);
        let stride = self.strides[axis];
        let mut view = self.clone();
        view.shape.splice(axis..=axis, [count, size]);
        view.strides.splice(axis..=axis, [stride * step, stride * dilation]);
        view
    }

    /// The same elements in row-major order seen with `shape` (equal element count), when
    /// strides can express it, else `None` (a permuted view folded across its reordered
    /// axes, say): then the data must be made contiguous first. Axes are merged or split
    /// only within runs of the old shape whose strides chain (PyTorch's `computeStride`).
    pub fn reshape(&self, shape: &[usize]) -> Option<Self> {
        let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
        if count != self.elements() {
            return None;
        }
        if count <= 1 {
            // Zero or one element: any strides address it.
            return Some(Self {
                shape: shape.to_vec(),
                strides: row_major_strides(shape),
                offset: self.offset,
            });
        }
        // Drop length-1 axes: their strides are meaningless.
        let old: Vec<(usize, usize)> = self
            .shape
            .iter()
            .zip(&self.strides)
            .filter(|(d, _)| **d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let mut strides = vec![0usize; shape.len()];
        let mut new_axis = shape.len();
        let mut i = old.len();
        while i > 0 {
            // A run of old axes i0..i whose strides chain: stride[j] = stride[j+1] * len[j+1].
            let end = i;
            let mut start = i - 1;
            while start > 0 && old[start - 1].1 == old[start].1 * old[start].0 {
                start -= 1;
            }
            let run: usize = old[start..end].iter().map(|&(d, _)| d).product();
            let base = old[end - 1].1;
            // Take new axes from the right until they cover exactly the run.
            let mut covered = 1usize;
            while new_axis > 0 && (covered < run || shape[new_axis - 1] == 1) {
                if covered >= run && shape[new_axis - 1] == 1 {
                    // A length-1 axis between runs: any stride.
                    strides[new_axis - 1] = base * covered;
                    new_axis -= 1;
                    continue;
                }
                strides[new_axis - 1] = base * covered;
                covered *= shape[new_axis - 1];
                new_axis -= 1;
            }
            if covered != run {
                return None;
            }
            i = start;
        }
        // Leading length-1 axes of the new shape.
        while new_axis > 0 {
            if shape[new_axis - 1] != 1 {
                return None;
            }
            new_axis -= 1;
        }
        Some(Self { shape: shape.to_vec(), strides, offset: self.offset })
    }

    /// Calls `f(offset)` for every element in row-major index order. The last axis is the
    /// inner loop, so a kernel walking two views side by side can use [`walk`].
    pub fn for_each_offset(&self, mut f: impl FnMut(usize)) {
        walk(&self.shape, [self], |[o]| f(o));
    }
}

/// `views` (all of one shape) with the fewest axes that walk the same elements in the same
/// row-major order: length-1 axes dropped, and each axis merged into the next one in where
/// every view's strides chain (`stride[a] == stride[a + 1] * shape[a + 1]`, as NumPy's
/// iterator coalesces dimensions). A `[2, 16, 64]` operand beside a `[2, 16, 1]` broadcast
/// becomes `[32, 64]`, a contiguous one `[2048]`, so [`walk_rows`] calls its kernel once per
/// long row instead of once per short one. Views of an empty shape, or of different shapes,
/// come back unchanged.
pub fn coalesce(views: &[View]) -> Vec<View> {
    let Some(first) = views.first() else { return Vec::new() };
    let shape = &first.shape;
    if shape.contains(&0)
        || views.iter().any(|v| v.shape != *shape || v.strides.len() != shape.len())
    {
        return views.to_vec();
    }
    let axes: Vec<usize> = (0..shape.len()).filter(|&a| shape[a] != 1).collect();
    let mut out: Vec<View> = views
        .iter()
        .map(|v| View { shape: Vec::new(), strides: Vec::new(), offset: v.offset })
        .collect();
    // From the innermost axis out: extend the current outermost merged axis or start one.
    for &a in axes.iter().rev() {
        let d = shape[a];
        let merges = out[0].shape.first().is_some_and(|&inner| {
            views.iter().zip(&out).all(|(v, o)| v.strides[a] == o.strides[0] * inner)
        });
        for (v, o) in views.iter().zip(out.iter_mut()) {
            if merges {
                o.shape[0] *= d;
            } else {
                o.shape.insert(0, d);
                o.strides.insert(0, v.strides[a]);
            }
        }
    }
    out
}

/// Walks `shape` in row-major order, calling `f` with the element offset of every view in
/// `views` (each of `shape`'s rank and lengths) at that index: the one loop nest every
/// strided kernel and the reference interpreter share. The innermost axis steps by adding
/// strides; no division per element. See [`walk_rows`] for a row at a time.
pub fn walk<const N: usize>(shape: &[usize], views: [&View; N], mut f: impl FnMut([usize; N])) {
    walk_rows(shape, views, |base, len, strides| {
        let mut at = base;
        for _ in 0..len {
            f(at);
            for k in 0..N {
                at[k] += strides[k];
            }
        }
    });
}

/// Walks `shape` in row-major order one innermost row at a time: `f(base, len, strides)` gets
/// every view's offset of the row's first element, the row's length (the last axis; 1 for a
/// scalar) and each view's stride along it. A kernel then runs a tight loop per row (a plain
/// slice where the stride is 1, one value where it is 0) instead of a call per element.
pub fn walk_rows<const N: usize>(
    shape: &[usize],
    views: [&View; N],
    mut f: impl FnMut([usize; N], usize, [usize; N]),
) {
    if shape.contains(&0) {
        return;
    }
    let rank = shape.len();
    let mut base: [usize; N] = std::array::from_fn(|k| views[k].offset);
    if rank == 0 {
        f(base, 1, [0; N]);
        return;
    }
    let inner = shape[rank - 1];
    let inner_strides: [usize; N] = std::array::from_fn(|k| views[k].strides[rank - 1]);
    // The outer axes' odometer: on the stack for the ranks kernels meet (no allocation per
    // kernel call), on the heap beyond.
    let mut small = [0usize; 8];
    let mut large = Vec::new();
    let index: &mut [usize] = if rank - 1 <= small.len() {
        &mut small[..rank - 1]
    } else {
        large.resize(rank - 1, 0);
        &mut large
    };
    loop {
        f(base, inner, inner_strides);
        // Odometer over the outer axes.
        let mut axis = rank - 1;
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            for k in 0..N {
                base[k] += views[k].strides[axis];
            }
            if index[axis] < shape[axis] {
                break;
            }
            for k in 0..N {
                base[k] -= views[k].strides[axis] * shape[axis];
            }
            index[axis] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn offsets(v: &View) -> Vec<usize> {
        let mut out = Vec::new();
        v.for_each_offset(|o| out.push(o));
        out
    }

    #[test]
    fn movement_composes_like_numpy() {
        let x = View::contiguous(&[2, 3, 4]);
        assert_eq!(x.strides, [12, 4, 1]);
        let t = x.permute(&[0, 2, 1]);
        assert_eq!((t.shape.clone(), t.strides.clone()), (vec![2, 4, 3], vec![12, 1, 4]));
        assert!(!t.is_contiguous());
        assert_eq!(offsets(&t)[..4], [0, 4, 8, 1]);
        let b = View::contiguous(&[4]).expand(&[2, 3, 4]).unwrap();
        assert_eq!(b.strides, [0, 0, 1]);
        assert_eq!(b.footprint(), 4);
        assert!(View::contiguous(&[3]).expand(&[2, 4]).is_none());
        let s = x.slice(1, 1, 3);
        assert_eq!((s.shape.clone(), s.offset), (vec![2, 2, 4], 4));
        assert_eq!(s.extent(), Some(24));
        assert_eq!(offsets(&s), [4, 5, 6, 7, 8, 9, 10, 11, 16, 17, 18, 19, 20, 21, 22, 23]);
    }

    #[test]
    fn reshape_merges_and_splits_chained_axes_only() {
        let x = View::contiguous(&[2, 3, 4]);
        assert_eq!(x.reshape(&[6, 4]).unwrap().strides, [4, 1]);
        assert_eq!(x.reshape(&[2, 12]).unwrap().strides, [12, 1]);
        assert_eq!(x.reshape(&[1, 2, 1, 3, 4, 1]).unwrap().shape, [1, 2, 1, 3, 4, 1]);
        // Heads split of a [B, S, D] tensor, then moved forward: a view, not a copy.
        let heads = View::contiguous(&[2, 5, 8]).reshape(&[2, 5, 2, 4]).unwrap();
        let moved = heads.permute(&[0, 2, 1, 3]);
        assert_eq!(moved.strides, [40, 4, 8, 1]);
        // Merging them back across the permuted axes needs a copy.
        assert!(moved.reshape(&[2, 2, 20]).is_none());
        // But merging the leading batch and head axes of a permuted view may still work.
        assert!(moved.reshape(&[4, 5, 4]).is_none());
        let ok = View::contiguous(&[3, 4]).permute(&[1, 0]).reshape(&[4, 3, 1]);
        assert_eq!(ok.unwrap().strides[..2], [1, 4]);
        // A broadcast axis splits into broadcast axes.
        let bc = View::contiguous(&[4]).expand(&[6, 4]).unwrap().reshape(&[2, 3, 4]).unwrap();
        assert_eq!(bc.strides, [0, 0, 1]);
        assert!(x.reshape(&[5, 5]).is_none());
    }

    fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
        proptest::collection::vec(1usize..4, 0..5)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// A reshape, when possible, visits exactly the elements the source visits, in the
        /// same row-major order; after any permute and slice.
        #[test]
        fn reshape_keeps_row_major_order(shape in shape_strategy(), seed in 0u64..1000) {
            let mut v = View::contiguous(&shape);
            let rank = shape.len();
            let mut perm: Vec<usize> = (0..rank).collect();
            if rank > 1 {
                perm.swap((seed as usize) % rank, (seed as usize / 7) % rank);
            }
            v = v.permute(&perm);
            if rank > 0 && v.shape[0] > 1 && seed % 3 == 0 {
                v = v.slice(0, 1, v.shape[0]);
            }
            let want = offsets(&v);
            // Every factorisation into two axes, and fully flat.
            let n = v.elements();
            let mut targets = vec![vec![n]];
            for a in 1..=n {
                if n.is_multiple_of(a) {
                    targets.push(vec![a, n / a]);
                }
            }
            for t in targets {
                if let Some(r) = v.reshape(&t) {
                    prop_assert_eq!(offsets(&r), want.clone(), "{:?} -> {:?}", v, t);
                }
            }
            let flat = View::contiguous(&[n]);
            if v.is_contiguous() {
                let r = v.reshape(&[n]).expect("a contiguous view always flattens");
                prop_assert_eq!(r.strides, flat.strides);
            }
            for (i, o) in want.iter().enumerate() {
                prop_assert_eq!(v.index(i), *o);
            }
        }
    }

    #[test]
    fn broadcast_shapes_follow_numpy() {
        assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast_shapes(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[2, 3], &[4, 3]), None);
    }

    #[test]
    fn coalesce_merges_chained_axes_and_keeps_the_order() {
        let x = View::contiguous(&[2, 16, 64]);
        let mean = View { shape: vec![2, 16, 64], strides: vec![16, 1, 0], offset: 3 };
        let got = coalesce(&[x.clone(), mean.clone()]);
        assert_eq!((got[0].shape.clone(), got[0].strides.clone()), (vec![32, 64], vec![64, 1]));
        assert_eq!((got[1].strides.clone(), got[1].offset), (vec![1, 0], 3));
        assert_eq!(coalesce(std::slice::from_ref(&x))[0].shape, [2048]);
        let t = View::contiguous(&[2, 1, 3, 4]).permute(&[0, 1, 3, 2]);
        let one = coalesce(std::slice::from_ref(&t));
        assert_eq!((one[0].shape.clone(), one[0].strides.clone()), (vec![2, 4, 3], vec![12, 1, 4]));
        assert_eq!(offsets(&one[0]), offsets(&t));
        let scalar = View { shape: vec![1, 1], strides: vec![0, 0], offset: 5 };
        assert_eq!(coalesce(&[scalar])[0], View { shape: vec![], strides: vec![], offset: 5 });
        let empty = View::contiguous(&[2, 0]);
        assert_eq!(coalesce(std::slice::from_ref(&empty))[0], empty);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        /// Coalesced views walk exactly the offsets of the originals, side by side.
        #[test]
        fn coalesce_walks_the_same_offsets(shape in shape_strategy(), seed in 0u64..1000) {
            let rank = shape.len();
            let mut a = View::contiguous(&shape);
            let mut perm: Vec<usize> = (0..rank).collect();
            if rank > 1 {
                perm.swap((seed as usize) % rank, (seed as usize / 5) % rank);
            }
            a = a.permute(&perm);
            let mut b = View::contiguous(&a.shape);
            for (k, s) in b.strides.iter_mut().enumerate() {
                if (seed >> k) & 1 == 1 {
                    *s = 0;
                }
            }
            let c = coalesce(&[a.clone(), b.clone()]);
            let mut want = Vec::new();
            walk(&a.shape, [&a, &b], |o| want.push(o));
            let mut got = Vec::new();
            walk(&c[0].shape.clone(), [&c[0], &c[1]], |o| got.push(o));
            prop_assert_eq!(got, want);
            prop_assert!(c[0].rank() <= a.rank());
        }
    }

    #[test]
    fn walk_visits_each_index_once() {
        let a = View::contiguous(&[2, 3]);
        let b = View::contiguous(&[3]).expand(&[2, 3]).unwrap();
        let mut seen = Vec::new();
        walk(&[2, 3], [&a, &b], |[x, y]| seen.push((x, y)));
        assert_eq!(seen, [(0, 0), (1, 1), (2, 2), (3, 0), (4, 1), (5, 2)]);
        let scalar = View::contiguous(&[]);
        let mut n = 0;
        walk(&[], [&scalar], |_| n += 1);
        assert_eq!(n, 1);
        walk(&[2, 0], [&View::contiguous(&[2, 0])], |_| n += 1);
        assert_eq!(n, 1);
    }
}
