//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static RULES: KindRules = KindRules::NONE;
