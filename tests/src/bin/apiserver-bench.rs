//! `apiserver-bench`: benchmarks of the API server against the physical
//! limit (raw etcd), measured side by side in one run. See BENCHMARKS.md
//! and `apiserver-bench --help`; the code is in `tests/src/bench/`.

#[path = "../bench/mod.rs"]
mod bench;

use bench::procs::{self, Etcd, Machine, Server};
use bench::report::{Report, Row};
use bench::{Args, Bench, Phase, Plan};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let plan = Plan::from_args(&args);
    let started = Instant::now();
    let etcd_bin = args.etcd_bin.clone().unwrap_or_else(default_etcd);
    let server_bin = args
        .server_bin
        .clone()
        .unwrap_or_else(|| procs::sibling_binary("apiserver"));
    if !server_bin.exists() {
        eprintln!(
            "apiserver-bench: no server binary at {} (cargo build --release --bin apiserver, or --server-bin)",
            server_bin.display()
        );
        return ExitCode::FAILURE;
    }
    let machine = Machine::describe(&etcd_bin);
    let work = args.work_dir.clone().unwrap_or_else(std::env::temp_dir);
    eprintln!("apiserver-bench: {}", plan.describe());

    let (rows, settings) = match run(&plan, &etcd_bin, &server_bin, &args.server_args, &work).await
    {
        Ok(done) => done,
        Err(e) => {
            eprintln!("apiserver-bench: setup failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = Report {
        machine,
        command: command_line(),
        sizes: plan.describe(),
        settings,
        rows,
        duration: started.elapsed(),
        date: shell(&["date", "-u", "+%Y-%m-%d %H:%M UTC"]),
        revision: revision(),
        load_after: procs::load_average(),
    };
    println!("{}", report.table());
    let out = match (&args.out, args.smoke || args.no_write) {
        (Some(path), _) if !args.no_write => Some(path.clone()),
        (None, false) => Some(workspace_root().join("BENCHMARKS.md")),
        _ => None,
    };
    if let Some(path) = out {
        match report.write(&path) {
            Ok(()) => eprintln!("apiserver-bench: wrote {}", path.display()),
            Err(e) => {
                eprintln!("apiserver-bench: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    eprintln!(
        "apiserver-bench: done in {:.0} s",
        report.duration.as_secs_f64()
    );
    let problems = report.problems();
    for p in &problems {
        eprintln!("apiserver-bench: problem: {p}");
    }
    if args.smoke && !problems.is_empty() {
        eprintln!("apiserver-bench: smoke run failed: a phase produced no clean numbers");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Starts etcd and the main server and runs the phases of `plan`. A phase
/// that fails becomes a failed row; only setup failures end the run.
async fn run(
    plan: &Plan,
    etcd_bin: &Path,
    server_bin: &Path,
    server_args: &[String],
    work: &Path,
) -> bench::Result<(Vec<Row>, Vec<String>)> {
    let etcd = Etcd::start(etcd_bin, work).await?;
    let logs = tempfile::Builder::new()
        .prefix("bench-logs-")
        .tempdir_in(work)?;
    let prefix = "/registry".to_string();
    let server = Server::start(
        server_bin,
        server_args,
        &etcd.endpoint,
        &prefix,
        &logs.path().join("apiserver.log"),
    )
    .await?;
    let settings = vec![
        format!("etcd: {}", etcd.settings),
        format!(
            "server: `{} --etcd-prefix={prefix}{}` (its defaults otherwise: watch cache on); \
             fresh servers under their own prefix for phases 4–6 (two replicas on one prefix for 6)",
            display_path(server_bin),
            server_args
                .iter()
                .map(|a| format!(" {a}"))
                .collect::<String>()
        ),
        "client: this tool, on the same machine (it shares the CPUs), HTTP/1.1 with one \
         connection per request in flight; etcd-client (gRPC) for the limits"
            .to_string(),
    ];
    let b = Bench {
        plan: plan.clone(),
        etcd,
        server,
        server_bin: server_bin.to_path_buf(),
        server_args: server_args.to_vec(),
        prefix,
        logs: logs.path().to_path_buf(),
        etcd_bin: etcd_bin.to_path_buf(),
        work: work.to_path_buf(),
    };
    let mut rows = Vec::new();
    for phase in &plan.phases {
        let t = Instant::now();
        eprintln!("apiserver-bench: phase {phase:?}...");
        let result = match phase {
            Phase::Writes => bench::writes::run(&b).await,
            Phase::Reads => bench::reads::run(&b).await,
            Phase::Watch => bench::watch::run(&b).await,
            Phase::Memory => bench::memory::run(&b).await,
            Phase::Crds => bench::crds::run(&b).await,
            Phase::Gc => bench::gc::run(&b).await,
            Phase::Admission => bench::admission::run(&b).await,
            Phase::Storage => bench::storage::run(&b).await,
            Phase::Overload => bench::overload::run(&b).await,
            Phase::Clusters => bench::clusters::run(&b).await,
            Phase::Instructions => bench::instructions::run(&b).await,
        };
        match result {
            Ok(mut r) => rows.append(&mut r),
            Err(e) => rows.push(Row::failed(
                phase_name(*phase),
                "(phase)",
                format!("phase failed: {e}"),
            )),
        }
        eprintln!(
            "apiserver-bench: phase {phase:?} took {:.0} s",
            t.elapsed().as_secs_f64()
        );
    }
    if plan.phases.is_empty() {
        rows.push(Row::failed("—", "(none)", "no phase selected".into()));
    }
    Ok((rows, settings))
}

fn phase_name(p: Phase) -> &'static str {
    match p {
        Phase::Writes => "1 writes",
        Phase::Reads => "2 reads",
        Phase::Watch => "3 watch",
        Phase::Memory => "4 memory",
        Phase::Crds => "6 crds",
        Phase::Gc => "7 gc",
        Phase::Admission => "8 admission",
        Phase::Storage => "9 storage",
        Phase::Overload => "10 overload",
        Phase::Clusters => "11 clusters",
        Phase::Instructions => "12 instructions",
    }
}

/// `$TEST_ETCD_BIN`, else /usr/bin/etcd when present, else `etcd` on PATH.
fn default_etcd() -> PathBuf {
    if let Some(bin) = std::env::var_os("TEST_ETCD_BIN") {
        return PathBuf::from(bin);
    }
    let debian = Path::new("/usr/bin/etcd");
    if debian.exists() {
        return debian.to_path_buf();
    }
    PathBuf::from("etcd")
}

/// The workspace root (this crate's parent directory).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// `path` relative to the workspace root when it is under it.
fn display_path(path: &Path) -> String {
    let root = workspace_root();
    path.strip_prefix(&root)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// The command line as run, and the same run through cargo from the
/// workspace root.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().collect();
    let exe = args
        .first()
        .map(String::as_str)
        .unwrap_or("apiserver-bench");
    let exe = Path::new(exe)
        .canonicalize()
        .map(|p| display_path(&p))
        .unwrap_or_else(|_| exe.to_string());
    let rest = args.get(1..).unwrap_or_default().join(" ");
    let profile = if cfg!(debug_assertions) {
        ""
    } else {
        " --release"
    };
    format!(
        "{exe} {rest}\n# the same from the workspace root, any target dir:\n\
         cargo build{profile} --bin apiserver && cargo run{profile} --bin apiserver-bench -- {rest}"
    )
    .replace(" \n", "\n")
    .trim_end_matches(" -- ")
    .to_string()
}

/// The commit measured, marked when the tree had changes.
fn revision() -> String {
    let root = workspace_root();
    let root = root.to_string_lossy();
    let head = shell(&["git", "-C", &root, "rev-parse", "--short", "HEAD"]);
    let dirty = !shell(&[
        "git",
        "-C",
        &root,
        "status",
        "--porcelain",
        "--untracked-files=no",
    ])
    .is_empty();
    if dirty {
        format!("{head} (with uncommitted changes)")
    } else {
        head
    }
}

fn shell(cmd: &[&str]) -> String {
    Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
