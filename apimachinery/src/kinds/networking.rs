//! TODO(#12): defaults, strategy, validation and printer columns.

use crate::kinds::KindRules;

pub static INGRESS: KindRules = KindRules::NONE;

pub static NETWORK_POLICY: KindRules = KindRules::NONE;

pub static INGRESS_CLASS: KindRules = KindRules::NONE;
