//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static ROLE: KindRules = KindRules::NONE;

pub static ROLE_BINDING: KindRules = KindRules::NONE;

pub static CLUSTER_ROLE: KindRules = KindRules::NONE;

pub static CLUSTER_ROLE_BINDING: KindRules = KindRules::NONE;
