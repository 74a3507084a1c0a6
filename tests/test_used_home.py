"""The suite on a machine that has been used: no test reads or writes the real home, and the
daemon's start-up errors stay one line whatever state it finds.

The run's own home comes from ``conftest.pytest_configure``; :mod:`tests.usedhome` makes a
home as a user's looks after some use (kept documents, a memory, a glossary, an installed
default model, settings).
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from . import usedhome
from .conftest import HOME_VARIABLES, ROOT, run_cli


@pytest.fixture(scope="module")
def used_home(tmp_path_factory) -> Path:
    return usedhome.fill(tmp_path_factory.mktemp("used") / "home")


def test_the_run_and_every_process_it_starts_have_a_home_of_their_own(run_home):
    real = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert Path.home() == run_home and run_home != real
    for name, relative in HOME_VARIABLES.items():
        assert os.environ[name] == str(run_home / relative), name
    seen = subprocess.run([sys.executable, "-c", "import os, pathlib; print(pathlib.Path.home()); "
                           "print(os.environ.get('XDG_STATE_HOME')); print(os.environ.get('EDGE_TRANSLATOR_MODEL'))"],
                          capture_output=True, text=True, check=True).stdout.split("\n")
    assert seen[:3] == [str(run_home), str(run_home / ".local/state"), "None"]


def _clean(tmp_path: Path) -> dict[str, str]:
    """A home that was never used, set explicitly (what the helpers must behave as if they had)."""
    env = {name: str(tmp_path / "clean" / relative) for name, relative in HOME_VARIABLES.items()}
    for folder in env.values():
        Path(folder).mkdir(parents=True, exist_ok=True)
    return env


def test_the_cli_helper_answers_as_in_a_home_never_used(tmp_path):
    """Run by the used-home test below under a used ``HOME``: run_cli must still see none of it."""
    doc = tmp_path / "a.txt"
    doc.write_text("Where is the train station?\n\nI like tea.\n", "utf-8")
    clean = _clean(tmp_path)
    for args in (("translate", "Where is the train station?"), ("models", "list"), ("tm", "stats")):
        here, there = run_cli(*args), run_cli(*args, env=clean)
        assert here.returncode == there.returncode == 0, here.stderr.decode()
        assert here.stdout.replace(str(Path.home()).encode(), b"HOME") == \
            there.stdout.replace(str(tmp_path / "clean").encode(), b"HOME"), args
    here = run_cli("docs", str(doc), "-o", str(tmp_path / "here"), "--json")
    there = run_cli("docs", str(doc), "-o", str(tmp_path / "there"), "--json", env=clean)
    a, b = json.loads(here.stdout), json.loads(there.stdout)
    assert (a["decoded"], a["reused"]) == (b["decoded"], b["reused"]) == (2, 0)
    assert (tmp_path / "here" / "a.zh-Hans.txt").read_bytes() == (tmp_path / "there" / "a.zh-Hans.txt").read_bytes()


#: Tests that read the home when it is not their own: the CLI helper's (the default model,
#: the memory, the models folder) and the daemon's port-in-use error (its kept documents).
UNDER_A_USED_HOME = ("tests/test_used_home.py::test_the_cli_helper_answers_as_in_a_home_never_used",
                     "tests/test_used_home.py::test_the_run_and_every_process_it_starts_have_a_home_of_their_own",
                     "tests/test_daemon_clients.py::test_a_port_in_use_is_one_line",
                     "tests/test_daemon_clients.py::test_startup_errors_are_one_line")


def test_tests_pass_in_a_used_home_and_leave_it_as_it_was(used_home):
    before = usedhome.digest(used_home)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *UNDER_A_USED_HOME],
                            cwd=ROOT, env=usedhome.environment(used_home), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert usedhome.digest(used_home) == before


@pytest.fixture
def busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def _startup_cases(tmp_path: Path, busy: int) -> list[tuple[list[str], int, str]]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder", "utf-8")
    return [
        (["--port", str(busy)], 4, f"cannot listen on 127.0.0.1:{busy}"),
        (["--host", "192.0.2.1", "--port", "0"], 4, "cannot listen on 192.0.2.1"),
        (["--host", "no-such-host.invalid"], 4, "cannot listen on no-such-host.invalid"),
        (["--api-keys", "/nonexistent/keys.txt"], 4, "API key file /nonexistent/keys.txt does not exist"),
        (["--model", "/nonexistent/bundle", "--port", "0"], 3, "/nonexistent/bundle"),
        (["--tm", str(tmp_path), "--port", "0"], 4, "is not a usable translation memory"),
        (["--state-dir", str(a_file), "--port", "0"], 4, "is a file, not a folder"),
        (["--files-dir", str(a_file), "--port", "0"], 4, "is a file, not a folder"),
        (["--char-limit", "-1"], 2, "char_limit must not be negative"),
        (["--workers", "0"], 2, "workers must be at least 1"),
    ]


def test_every_startup_error_is_one_line_with_state_present(used_home, tmp_path, busy_port):
    """With kept documents (one still to translate), a glossary, a memory and an installed
    default model in the home, a start that fails prints its one line and touches nothing."""
    before = usedhome.digest(used_home)
    for args, code, message in _startup_cases(tmp_path, busy_port):
        result = subprocess.run([sys.executable, "-m", "edge_translator.cli", "serve", *args], cwd=ROOT,
                                env=usedhome.environment(used_home), capture_output=True, text=True, timeout=120)
        assert result.returncode == code, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and not result.stdout, (args, result.stderr)
    assert usedhome.digest(used_home) == before, "a failed start changed the state"
