//! batch/v1.

pub mod cron;
pub mod cronjob;
pub mod job;
