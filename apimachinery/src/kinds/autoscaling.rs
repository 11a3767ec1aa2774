//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static HORIZONTAL_POD_AUTOSCALER: KindRules = KindRules::NONE;
