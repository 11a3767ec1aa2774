//! kube's `apiserver_flowcontrol_*` metrics, registered with the server's
//! other metrics.

use super::config::{Classification, SeatLimits};
use prometheus::{
    HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use std::time::Duration;

/// kube's buckets for waits and executions.
const BUCKETS: &[f64] = &[
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0,
];

pub struct ApfMetrics {
    dispatched: IntCounterVec,
    rejected: IntCounterVec,
    inqueue: IntGaugeVec,
    executing: IntGaugeVec,
    wait: HistogramVec,
    execution: HistogramVec,
    nominal: IntGaugeVec,
    current: IntGaugeVec,
    lower: IntGaugeVec,
    upper: IntGaugeVec,
}

/// Decrements a gauge when dropped.
pub struct Held(IntGauge);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn counter(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn gauge(r: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn histogram(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    let h = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(BUCKETS.to_vec()),
        labels,
    )?;
    r.register(Box::new(h.clone()))?;
    Ok(h)
}

const FLOW: &[&str] = &["flow_schema", "priority_level"];
const LEVEL: &[&str] = &["priority_level"];

impl ApfMetrics {
    pub fn new(r: &Registry) -> prometheus::Result<ApfMetrics> {
        Ok(ApfMetrics {
            dispatched: counter(
                r,
                "apiserver_flowcontrol_dispatched_requests_total",
                "Number of requests executed by API Priority and Fairness subsystem",
                FLOW,
            )?,
            rejected: counter(
                r,
                "apiserver_flowcontrol_rejected_requests_total",
                "Number of requests rejected by API Priority and Fairness subsystem",
                &["flow_schema", "priority_level", "reason"],
            )?,
            inqueue: gauge(
                r,
                "apiserver_flowcontrol_current_inqueue_requests",
                "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
                FLOW,
            )?,
            executing: gauge(
                r,
                "apiserver_flowcontrol_current_executing_requests",
                "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
                FLOW,
            )?,
            wait: histogram(
                r,
                "apiserver_flowcontrol_request_wait_duration_seconds",
                "Length of time a request spent waiting in its queue",
                &["execute", "flow_schema", "priority_level"],
            )?,
            execution: histogram(
                r,
                "apiserver_flowcontrol_request_execution_seconds",
                "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request execution in the API Priority and Fairness subsystem",
                &["type", "flow_schema", "priority_level"],
            )?,
            nominal: gauge(
                r,
                "apiserver_flowcontrol_nominal_limit_seats",
                "Nominal number of execution seats configured for each priority level",
                LEVEL,
            )?,
            current: gauge(
                r,
                "apiserver_flowcontrol_current_limit_seats",
                "current derived number of execution seats available to each priority level",
                LEVEL,
            )?,
            lower: gauge(
                r,
                "apiserver_flowcontrol_lower_limit_seats",
                "Configured lower bound on number of execution seats available to each priority level",
                LEVEL,
            )?,
            upper: gauge(
                r,
                "apiserver_flowcontrol_upper_limit_seats",
                "Configured upper bound on number of execution seats available to each priority level",
                LEVEL,
            )?,
        })
    }

    fn flow(c: &Classification) -> [&str; 2] {
        [c.schema.as_str(), c.level.as_str()]
    }

    pub fn limits(&self, level: &str, l: &SeatLimits, current: usize) {
        let set = |g: &IntGaugeVec, n: usize| {
            g.with_label_values(&[level])
                .set(i64::try_from(n).unwrap_or(i64::MAX))
        };
        set(&self.nominal, l.nominal);
        set(&self.lower, l.min());
        set(&self.upper, l.max());
        set(&self.current, current);
    }

    pub fn current_limit(&self, level: &str, current: usize) {
        self.current
            .with_label_values(&[level])
            .set(i64::try_from(current).unwrap_or(i64::MAX));
    }

    pub fn dispatched(&self, c: &Classification) {
        self.dispatched.with_label_values(&Self::flow(c)).inc();
    }

    pub fn rejected(&self, c: &Classification, reason: &str) {
        self.rejected
            .with_label_values(&[c.schema.as_str(), c.level.as_str(), reason])
            .inc();
    }

    fn held(g: &IntGaugeVec, c: &Classification) -> Held {
        let g = g.with_label_values(&Self::flow(c));
        g.inc();
        Held(g)
    }

    pub fn inqueue(&self, c: &Classification) -> Held {
        Self::held(&self.inqueue, c)
    }

    pub fn executing(&self, c: &Classification) -> Held {
        Self::held(&self.executing, c)
    }

    pub fn waited(&self, c: &Classification, executed: bool, d: Duration) {
        // kube's SLI duration leaves the queue wait out.
        crate::metrics::exclude_from_sli(d);
        let execute = if executed { "true" } else { "false" };
        self.wait
            .with_label_values(&[execute, c.schema.as_str(), c.level.as_str()])
            .observe(d.as_secs_f64());
    }

    pub fn executed(&self, c: &Classification, kind: &str, d: Duration) {
        self.execution
            .with_label_values(&[kind, c.schema.as_str(), c.level.as_str()])
            .observe(d.as_secs_f64());
    }
}
