//! Kubernetes' CEL cost limits and the runtime cost meter.
//!
//! # Runtime cost
//!
//! The base crate's interpreter has no cost hook, so [`crate::Program`]
//! meters evaluation itself:
//!
//! * when compiled, the program is rewritten (see `instrument.rs`): every
//!   comprehension (`all`, `exists`, `exists_one`, `map`, `filter`) charges,
//!   on each iteration, the cost of its loop condition and step as the
//!   static estimate counts nodes (1 per variable, field selection and
//!   call; nothing for literals and `&&`/`||`/`?:`); operands of
//!   size-dependent standard and extension functions (`contains`,
//!   `startsWith`, `endsWith`, `matches`, `+`, `==`, `!=`, `in`, the strings
//!   extension's `split`, `replace`, `lowerAscii`..., the lists extension's
//!   `sort`, `distinct`..., `string()`) charge 0.1 per byte of a string or
//!   bytes, 1 per element of a list or entry of a map;
//! * the nodes outside comprehension loops are charged once, up front, at
//!   the same rates (an upper bound: a short-circuited branch is charged
//!   too);
//! * the Kubernetes library functions charge 0.1 per byte of their string
//!   arguments, and for what they work on beyond that (1 per list element
//!   for `sum`/`min`/`max`/`isSorted`, the product of the sizes for the
//!   `sets` functions, the text times the pattern for `find`/`findAll`).
//!
//! This follows cel-go's model (1 per evaluated node, string work at 0.1 per
//! character) closely enough for limits to trip at the same order of
//! magnitude, but the numbers are not identical to cel-go's `ActualCost`.
//! The meter is per evaluation and per thread (evaluation never leaves the
//! calling thread). Once the limit is passed the next charge fails the
//! evaluation with "operation cancelled: actual cost limit exceeded"; that
//! error cannot be absorbed by `||`/`&&`, as the meter is checked again when
//! evaluation ends.

use std::cell::Cell;

use cel::ExecutionError;

/// Kubernetes' `PerCallLimit`: the runtime cost limit of one evaluation.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Kubernetes' `RuntimeCELCostBudget`: the runtime cost budget of all the
/// rules run to validate one custom resource (or one admission policy
/// binding).
pub const RUNTIME_CEL_COST_BUDGET: u64 = 10_000_000;
/// Kubernetes' `StaticEstimatedCostLimit`: the largest estimated cost one
/// expression of a CRD may have.
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// Kubernetes' `StaticEstimatedCRDCostLimit`: the largest estimated cost of
/// all the rules of one CRD together.
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;
/// Kubernetes' `MaxEvaluatedMessageExpressionSizeBytes`: the longest
/// string a `messageExpression` may produce.
pub const MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES: usize = 5 * 1024;
/// Kubernetes' `MaxRequestSizeBytes`, which bounds every value whose schema
/// sets no `maxLength`/`maxItems`/`maxProperties`.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// The error of one evaluation over its cost limit, worded as Kubernetes
/// (cel-go) words it.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";
/// The error once a validation's whole runtime budget is spent, worded as
/// Kubernetes words it.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

#[derive(Clone, Copy)]
struct Meter {
    used: u64,
    limit: u64,
}

thread_local! {
    static METER: Cell<Option<Meter>> = const { Cell::new(None) };
}

/// Charges `n` to the evaluation running on this thread, failing once its
/// limit is passed. Outside an evaluation it does nothing.
pub(crate) fn charge(n: u64) -> Result<(), ExecutionError> {
    METER.with(|m| match m.get() {
        None => Ok(()),
        Some(mut meter) => {
            meter.used = meter.used.saturating_add(n);
            m.set(Some(meter));
            if meter.used > meter.limit {
                Err(ExecutionError::function_error("cost", COST_LIMIT_EXCEEDED))
            } else {
                Ok(())
            }
        }
    })
}

/// 0.1 per unit, rounded up: cel-go's rate for string work.
pub(crate) fn tenth(n: usize) -> u64 {
    (n as u64).div_ceil(10)
}

/// The meter of one evaluation, installed on this thread while it lives.
pub(crate) struct MeterGuard {
    previous: Option<Meter>,
}

impl MeterGuard {
    pub(crate) fn install(limit: u64) -> MeterGuard {
        let previous = METER.with(|m| m.replace(Some(Meter { used: 0, limit })));
        MeterGuard { previous }
    }

    /// The cost charged so far.
    pub(crate) fn used(&self) -> u64 {
        METER.with(|m| m.get().map(|m| m.used).unwrap_or(0))
    }
}

impl Drop for MeterGuard {
    fn drop(&mut self) {
        METER.with(|m| m.set(self.previous));
    }
}

/// A runtime budget shared by several evaluations, as Kubernetes spends
/// [`RUNTIME_CEL_COST_BUDGET`] over all the rules that validate one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    remaining: u64,
}

impl Budget {
    /// A budget of `total`.
    pub fn new(total: u64) -> Budget {
        Budget { remaining: total }
    }

    /// What is left.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Whether nothing is left: Kubernetes then runs no further rule.
    pub fn is_exhausted(&self) -> bool {
        self.remaining == 0
    }

    /// Spends `cost`; fails (leaving the budget exhausted) if it was more
    /// than what was left.
    pub fn spend(&mut self, cost: u64) -> Result<(), crate::EvalError> {
        if cost > self.remaining {
            self.remaining = 0;
            return Err(crate::EvalError::OutOfBudget);
        }
        self.remaining -= cost;
        Ok(())
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(RUNTIME_CEL_COST_BUDGET)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_counts_and_trips() {
        assert!(charge(5).is_ok(), "no meter, no charge");
        let guard = MeterGuard::install(10);
        charge(4).unwrap();
        charge(6).unwrap();
        assert_eq!(guard.used(), 10);
        let e = charge(1).unwrap_err();
        assert!(e.to_string().contains(COST_LIMIT_EXCEEDED));
        drop(guard);
        assert!(charge(100).is_ok());
    }

    #[test]
    fn budget_spends_and_exhausts() {
        let mut b = Budget::new(10);
        b.spend(4).unwrap();
        assert_eq!(b.remaining(), 6);
        assert_eq!(b.spend(7), Err(crate::EvalError::OutOfBudget));
        assert!(b.is_exhausted());
        assert_eq!(Budget::default().remaining(), RUNTIME_CEL_COST_BUDGET);
        assert_eq!(tenth(0), 0);
        assert_eq!(tenth(11), 2);
    }
}
