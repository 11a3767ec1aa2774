//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static STORAGE_CLASS: KindRules = KindRules::NONE;
