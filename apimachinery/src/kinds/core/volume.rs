//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static PERSISTENT_VOLUME: KindRules = KindRules::NONE;

pub static PERSISTENT_VOLUME_CLAIM: KindRules = KindRules::NONE;
