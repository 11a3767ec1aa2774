//! The coverage-guided driver: `fuzz-afl <target>` under `afl-fuzz`.
//! Build with `cargo afl build --release -p fuzz --features afl --bin fuzz-afl`;
//! `tools/fuzz.sh` does that and runs each target.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = fuzz::target(&name) else {
        let names: Vec<&str> = fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("usage: fuzz-afl <target>; targets: {}", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| (target.run)(data));
}
