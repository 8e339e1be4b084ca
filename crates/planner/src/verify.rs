//! Independent check of a plan, from any algorithm or from a file.
//!
//! It shares no code with placement: instead of asking, for each request, which earlier requests
//! it conflicts with (first fit's question), it sweeps the plan's byte ranges in offset order and
//! asks, for each pair that shares bytes, whether one buffer precedes the other, with the
//! closure's own `precedes` on use sets.

use petgraph::graph::DiGraph;

use crate::lower_bound::antichain_of;
use crate::order::BufferOrder;
use crate::{PlanError, SlabBuffer, SlabOptions, SlabPlan, VerifyError, reserved_bytes};

/// Checks `plan` against `buffers` and `options`, in this order: the input is valid (as for
/// [`crate::plan_slab`]); there is one offset and one reserved size per buffer; each reserved
/// size is `round_up(max(bytes, 1), alignment)`; every offset is a multiple of the alignment;
/// every end (`offset + reserved`, bytes) is within the capacity; `slab_bytes` and `naive_bytes`
/// match the offsets; no two buffers that conflict (neither precedes the other) share a byte.
///
/// Last, the reported `lower_bound` must equal the exact one ([`crate::lower_bound()`]).
///
/// # Errors
/// The first [`VerifyError`] found, naming the offending buffer or pair: [`VerifyError::Plan`]
/// for invalid input, [`VerifyError::Length`], [`VerifyError::ReservedLength`], [`VerifyError::Reserved`],
/// [`VerifyError::Misaligned`], [`VerifyError::OutOfBounds`], [`VerifyError::Totals`],
/// [`VerifyError::Overlap`] (the pair with the lowest request indices among those found first in
/// offset order), [`VerifyError::LowerBound`].
pub fn verify<N, E>(
    dag: &DiGraph<N, E>,
    buffers: &[SlabBuffer],
    plan: &SlabPlan,
    options: &SlabOptions,
) -> Result<(), VerifyError> {
    let (reach, _) = crate::slab::validate(dag, buffers, options.alignment)?;
    let n = buffers.len();
    if plan.offsets.len() != n {
        return Err(VerifyError::Length { offsets: plan.offsets.len(), buffers: n });
    }
    if plan.reserved.len() != n {
        return Err(VerifyError::ReservedLength { reserved: plan.reserved.len(), buffers: n });
    }

    let mut ends = Vec::with_capacity(n);
    for ((buf, &offset), &reserved) in buffers.iter().zip(&plan.offsets).zip(&plan.reserved) {
        let expected = reserved_bytes(buf.bytes, options.alignment)?;
        if reserved != expected {
            return Err(VerifyError::Reserved { id: buf.id.clone(), reserved, expected });
        }
        if offset % options.alignment != 0 {
            return Err(VerifyError::Misaligned {
                id: buf.id.clone(),
                offset,
                alignment: options.alignment,
            });
        }
        let end =
            offset.checked_add(reserved).ok_or(PlanError::TotalOverflow { total: "slab_bytes" })?;
        if let Some(limit) = options.capacity.filter(|&cap| end > cap) {
            return Err(VerifyError::OutOfBounds { id: buf.id.clone(), end, limit });
        }
        ends.push(end);
    }

    let slab = ends.iter().copied().max().unwrap_or(0);
    if plan.slab_bytes != slab {
        return Err(VerifyError::Totals {
            field: "slab_bytes",
            reported: plan.slab_bytes,
            actual: slab,
        });
    }
    let naive = crate::slab::naive_total(&plan.reserved)?;
    if plan.naive_bytes != naive {
        return Err(VerifyError::Totals {
            field: "naive_bytes",
            reported: plan.naive_bytes,
            actual: naive,
        });
    }

    // Sweep byte ranges by start; `open` holds the ranges that still cover the current start.
    let mut by_start: Vec<usize> = (0..n).collect();
    by_start.sort_by_key(|&i| (plan.offsets[i], i));
    let mut open: Vec<usize> = Vec::new();
    for &i in &by_start {
        let start = plan.offsets[i];
        open.retain(|&j| ends[j] > start);
        let mut clash: Option<(usize, usize)> = None;
        for &j in &open {
            if reach.conflicts(&buffers[i].uses, &buffers[j].uses) {
                let pair = (i.min(j), i.max(j));
                clash = Some(clash.map_or(pair, |c| c.min(pair)));
            }
        }
        if let Some((a, b)) = clash {
            return Err(VerifyError::Overlap {
                a: buffers[a].id.clone(),
                a_start: plan.offsets[a],
                a_end: ends[a],
                b: buffers[b].id.clone(),
                b_start: plan.offsets[b],
                b_end: ends[b],
            });
        }
        open.push(i);
    }

    let order = BufferOrder::new(&reach, buffers);
    let exact = antichain_of(&order, &plan.reserved)?.weight;
    if plan.lower_bound != exact {
        return Err(VerifyError::LowerBound { reported: plan.lower_bound, exact });
    }
    Ok(())
}
