"""The files shipped for running the daemon agree with the command they start."""

from __future__ import annotations

import re

from edge_translator.cli import build_parser

from .conftest import ROOT

SYSTEMD = ROOT / "assets" / "systemd"


def _serve_flags() -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return {flag for action in sub.choices["serve"]._actions for flag in action.option_strings}


def _unit() -> dict[str, list[str]]:
    entries: dict[str, list[str]] = {}
    text = (SYSTEMD / "edge-translator.service").read_text(encoding="utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", "[")):
            key, value = line.split("=", 1)
            entries.setdefault(key.strip(), []).append(value.strip())
    return entries


def test_unit_runs_serve_as_its_own_user_and_restarts():
    unit = _unit()
    assert unit["User"] == ["edge-translator"] and unit["Restart"] == ["on-failure"]
    assert unit["EnvironmentFile"] == ["/etc/edge-translator/edge-translator.env"]
    command = unit["ExecStart"][0].split()
    assert command[0].endswith("/edge-translator") and command[1] == "serve"
    used = {word for word in command if word.startswith("--")}
    assert used and used <= _serve_flags()
    # the stop timeout leaves room for the daemon's 30 s drain
    assert int(unit["TimeoutStopSec"][0]) > 30


def test_environment_file_sets_what_the_unit_reads():
    env = {}
    for line in (SYSTEMD / "edge-translator.env").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            key, value = line.split("=", 1)
            env[key] = value
    read = set(re.findall(r"\$\{?(\w+)\}?", " ".join(_unit()["ExecStart"])))
    assert read <= set(env) and "EDGE_TRANSLATOR_MODEL" in env  # the model comes from the environment
    assert env["EDGE_TRANSLATOR_HOST"] == "127.0.0.1"
    flags_in_comments = set(re.findall(r"--[a-z-]+", (SYSTEMD / "edge-translator.env").read_text()))
    assert flags_in_comments <= _serve_flags()
