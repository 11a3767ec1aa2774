//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static POD: KindRules = KindRules::NONE;

pub static POD_TEMPLATE: KindRules = KindRules::NONE;
