//! The fuzz targets in `cargo test`: every input kept under
//! `corpus/<target>/` (seeds and past crashes), then proptest mutations of
//! those inputs. `FUZZ_CASES` sets the mutations per target (default 256;
//! CI's short run). Coverage-guided runs are `tools/fuzz.sh`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                bytes,
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_kept_input_passes() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for t in fuzz::TARGETS {
        let inputs = corpus(t.name);
        assert!(!inputs.is_empty(), "target {} has no corpus", t.name);
        for (file, bytes) in inputs {
            runs += 1;
            if catch_unwind(AssertUnwindSafe(|| (t.run)(&bytes))).is_err() {
                failures.push(format!("{}/{file}", t.name));
            }
        }
    }
    eprintln!("replayed {runs} kept inputs");
    assert!(failures.is_empty(), "inputs that fail: {failures:?}");
}

#[test]
fn every_corpus_directory_names_a_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for entry in std::fs::read_dir(root).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            fuzz::target(&name).is_some(),
            "corpus/{name} belongs to no target"
        );
    }
}

/// Byte strings that often matter to these grammars.
const TOKENS: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\0",
    b"!",
    b"=",
    b"!=",
    b" in ",
    b" notin ",
    b"(",
    b")",
    b"0",
    b"-1",
    b"null",
    b"true",
    b"%",
    b"%00",
    b"/",
    b"\\u0000",
    b"\\",
    b"18446744073709551616",
    b"1e999",
    b"\xff",
    b"\xc3\x28",
    b"&",
    b"?",
    b"..",
    b"\n- ",
    b"&a",
    b"*a",
    b"k8s\0",
    b"\x1f",
    b"\x9f",
    b"\xbf",
];

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Token(usize, usize),
    Splice(usize, usize, usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(p, b)| Edit::Flip(p, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Edit::Insert(p, b)),
        (any::<usize>(), 1usize..8).prop_map(|(p, n)| Edit::Delete(p, n)),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(p, t)| Edit::Token(p, t)),
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(p, s, r)| Edit::Splice(p, s, r)),
        any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn mutate(seed: &[u8], seeds: &[(String, Vec<u8>)], edits: &[Edit]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for e in edits {
        let at = |p: usize, len: usize| if len == 0 { 0 } else { p % (len + 1) };
        match *e {
            Edit::Flip(p, bit) if !out.is_empty() => {
                let i = p % out.len();
                out[i] ^= 1 << bit;
            }
            Edit::Flip(..) => {}
            Edit::Insert(p, b) => {
                let i = at(p, out.len());
                out.insert(i, b);
            }
            Edit::Delete(p, n) => {
                let i = at(p, out.len()).min(out.len());
                let end = (i + n).min(out.len());
                out.drain(i..end);
            }
            Edit::Token(p, t) => {
                let i = at(p, out.len());
                out.splice(i..i, TOKENS[t].iter().copied());
            }
            Edit::Splice(p, s, r) => {
                let other = &seeds[s % seeds.len()].1;
                if !other.is_empty() {
                    let start = r % other.len();
                    let end = (start + 1 + r % 16).min(other.len());
                    let i = at(p, out.len());
                    out.splice(i..i, other[start..end].iter().copied());
                }
            }
            Edit::Truncate(p) => {
                let n = at(p, out.len());
                out.truncate(n);
            }
        }
    }
    out
}

#[test]
fn mutated_inputs_pass() {
    let cases: u32 = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let mut total = 0u64;
    for t in fuzz::TARGETS {
        let seeds = corpus(t.name);
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        });
        let strategy = (0..seeds.len(), proptest::collection::vec(edit(), 1..12));
        let result = runner.run(&strategy, |(which, edits)| {
            let input = mutate(&seeds[which].1, &seeds, &edits);
            catch_unwind(AssertUnwindSafe(|| (t.run)(&input))).map_err(|_| {
                TestCaseError::fail(format!(
                    "{} fails on {:?}",
                    t.name,
                    String::from_utf8_lossy(&input)
                ))
            })
        });
        total += u64::from(cases);
        if let Err(e) = result {
            panic!("{e}");
        }
    }
    eprintln!(
        "ran {total} mutated inputs over {} targets",
        fuzz::TARGETS.len()
    );
}
