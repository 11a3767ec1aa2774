//! batch/v1.

pub mod cronjob;
pub mod job;
