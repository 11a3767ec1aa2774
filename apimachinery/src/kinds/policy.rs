//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static POD_DISRUPTION_BUDGET: KindRules = KindRules::NONE;
