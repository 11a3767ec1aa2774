//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static CONFIG_MAP: KindRules = KindRules::NONE;

pub static SECRET: KindRules = KindRules::NONE;
