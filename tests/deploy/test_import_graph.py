"""tools/import_graph.py: the CI check that keeps the apiserver's floors one
way finds circles and broken floor rules, and ignores test modules."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "import_graph.py"


def run(src, *args):
    return subprocess.run(
        [sys.executable, str(TOOL), str(src), *args], capture_output=True, text=True
    )


def crate(tmp_path, files):
    src = tmp_path / "src"
    for name, text in files.items():
        p = src / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return src


def test_finds_a_circle_and_fails_past_the_bound(tmp_path):
    src = crate(tmp_path, {
        "lib.rs": "pub mod a;\npub mod b;\npub mod c;\n",
        "a.rs": "use crate::b::B;\npub struct A;\n",
        "b.rs": "use crate::c::{C, D};\npub struct B;\n",
        "c.rs": "pub struct C;\npub struct D;\nfn f() -> crate::a::A { crate::a::A }\n",
    })
    out = run(src, "--max", "2")
    assert out.returncode == 1, out.stdout
    assert "circle of 3: a, b, c" in out.stdout
    assert run(src, "--max", "3").returncode == 0


def test_tests_comments_and_strings_are_not_imports(tmp_path):
    src = crate(tmp_path, {
        "lib.rs": "pub mod a;\npub mod b;\n",
        "a.rs": "use crate::b::B;\npub struct A;\n",
        "b.rs": (
            "pub struct B;\n// crate::a::A in a comment\n"
            "const S: &str = \"crate::a::A\";\n"
            "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"
        ),
    })
    out = run(src, "--max", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 circles" in out.stdout


def test_a_child_module_named_without_self_is_an_import(tmp_path):
    # `create::handle()` in handlers/mod.rs names its child module; the
    # child imports its parent back: a circle of two.
    src = crate(tmp_path, {
        "lib.rs": "pub mod handlers;\n",
        "handlers/mod.rs": (
            "mod create;\nuse create::Answer;\n"
            "pub struct Scope;\nfn f() { create::handle() }\n"
        ),
        "handlers/create.rs": "use super::Scope;\npub struct Answer;\npub fn handle() {}\n",
    })
    out = run(src, "--max", "1")
    assert out.returncode == 1, out.stdout
    assert "circle of 2: handlers, handlers::create" in out.stdout
    # the declaration alone is no import
    src = crate(tmp_path / "decl", {
        "lib.rs": "pub mod handlers;\n",
        "handlers/mod.rs": "pub mod create;\npub struct Scope;\n",
        "handlers/create.rs": "use super::Scope;\n",
    })
    assert "0 circles" in run(src).stdout


def test_a_floor_rule_fails_on_an_arrow_back_up(tmp_path):
    src = crate(tmp_path, {
        "lib.rs": "pub mod registry;\npub mod handlers;\n",
        "registry/mod.rs": "pub mod table;\n",
        "registry/table.rs": "use super::super::handlers::Scope;\n",
        "handlers.rs": "pub struct Scope;\n",
    })
    out = run(src, "--never", "registry=handlers")
    assert out.returncode == 1
    assert "registry::table -> handlers" in out.stderr
    # `registry!` is the module itself: its children are not bound.
    assert run(src, "--never", "registry!=handlers").returncode == 0


def test_the_apiserver_holds_its_floors():
    makefile = (ROOT / "Makefile").read_text()
    assert "import_graph.py apiserver/src --max" in makefile
    out = run(ROOT / "apiserver" / "src", "--never", "registry=handlers,server")
    assert out.returncode == 0, out.stderr
