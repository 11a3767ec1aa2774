use apiserver::config::Config;
use clap::Parser;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let cfg = Config::parse();
    let telemetry = match apiserver::telemetry::init(&cfg) {
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
