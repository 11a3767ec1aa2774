//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static LIMIT_RANGE: KindRules = KindRules::NONE;

pub static RESOURCE_QUOTA: KindRules = KindRules::NONE;
