//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static PRIORITY_CLASS: KindRules = KindRules::NONE;
