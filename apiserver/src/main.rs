use apiserver::config::Config;
use clap::Parser;
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: with many threads glibc keeps freed
/// memory in per-thread arenas it rarely returns, and the watch cache's RSS
/// was several times the heap it uses (BENCHMARKS.md, "Memory (issue 17)").
/// The `system-alloc` feature leaves glibc's for heap profilers.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cfg = Config::parse();
    let telemetry = match apiserver::telemetry::init(
        cfg.log_format,
        cfg.tracing_endpoint.as_deref(),
        cfg.tracing_sampling_rate_per_million,
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("apiserver: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = apiserver::run(cfg).await;
    telemetry.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("apiserver: {e}");
            ExitCode::FAILURE
        }
    }
}
