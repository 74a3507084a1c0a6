"""Seeded fuzz of every format ``docs`` reads (#49, part 5): damaged files end translated or in one line.

Each seed in :data:`SEEDS` damages a small file of every format in every way
:mod:`tests.mutants` knows (truncated, bytes flipped, a zip part cut short, mismatched, missing
or badly encoded, an entity bomb, an external entity pointing at a secret file, invalid
UTF-8, UTF-16 without a BOM, a lone surrogate, NUL bytes). Every mutant goes through the
readers, through one ``docs`` run on a folder of them, and through the daemon's upload. Each
must come back translated or fail in one line naming the file and the reason, within
:data:`READ_SECONDS` and :data:`GROWTH_MB`, and the secret must reach no output or message.
``EDGE_TRANSLATOR_FUZZ_SEEDS=0-199`` widens the run (docs/testing.md).
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest

from .conftest import ROOT
from .mutants import COLUMNS, SECRET, Mutant, mutants, parse_seeds, seed_files, write_secret
from .test_daemon import _parts, _translator, running
from .test_daemon_documents import bearer, upload, wait_done
from .translations import fake

pytest.importorskip("waitress")
pytest.importorskip("pikepdf")

from edge_translator.documents import format_for, load_format  # noqa: E402
from edge_translator.documents.base import DocumentError, FormatOptions  # noqa: E402

SEEDS = parse_seeds(os.environ.get("EDGE_TRANSLATOR_FUZZ_SEEDS", "0-2"))
#: Seconds one reader call (open, every segment, a write) may take; the slowest mutant takes
#: about 0.1 s on 2 vCPUs.
READ_SECONDS = 5.0
#: MB by which one reader call, or one uploaded document, may raise the peak RSS; the most a
#: mutant raised it was 10 MB through a reader and 21 MB through the daemon. A billion laughs
#: or a quadratic blow-up that a parser expanded would take hundreds or more
#: (:func:`test_the_bounds_catch_a_real_bomb`).
GROWTH_MB = 100
#: MB by which the ``docs`` run on the mutants may peak above its run on the good seeds.
DOCS_GROWTH_MB = 150
KEY = "fuzz-key-0001"


class TooSlow(Exception):
    pass


def _peak_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> None:
    """Start the peak RSS over from the current RSS (Linux: ``/proc/self/clear_refs``), so a
    call's growth shows even after the process once peaked higher; elsewhere the peak is
    only a high-water mark, and a growth may be missed, never invented."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def measured(call, seconds: float = READ_SECONDS):
    """``call()``, stopped by :class:`TooSlow` after ``seconds``; ``(result or exception,
    seconds taken, MB of peak RSS growth)``."""
    def alarm(signum, frame):
        raise TooSlow(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    _reset_peak()
    before, started = _peak_kb(), time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        outcome = call()
    except BaseException as exc:  # noqa: BLE001 - judged by the caller
        outcome = exc
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return outcome, time.perf_counter() - started, (_peak_kb() - before) / 1024


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict[str, bytes], list[Mutant]]:
    """The secret's folder, the good seed files by suffix, and every mutant of :data:`SEEDS`."""
    folder = tmp_path_factory.mktemp("fuzz")
    seeds = seed_files(folder / "seeds")
    secret = write_secret(folder / "secret")
    return secret.parent, seeds, list(mutants(seeds, SEEDS, secret))


def _read(path: Path) -> bytes:
    """What ``docs`` does with a file, without the model: open, read every segment, write."""
    document = load_format(format_for(path)).open(path, FormatOptions(columns=COLUMNS))
    segments = list(document.segments())
    out = io.BytesIO()
    document.write((fake(s) for s in segments), out)
    return b"".join(s.text.encode("utf-8", "surrogatepass") for s in segments) + out.getvalue()


def _report(failures: list[str]) -> str:
    return (f"{len(failures)} mutants misbehaved (rerun one with EDGE_TRANSLATOR_FUZZ_SEEDS=SEED):\n"
            + "\n".join(failures[:15]))


def test_every_seed_file_is_read(corpus, tmp_path):
    _, seeds, found = corpus
    for suffix, data in seeds.items():
        path = tmp_path / f"seed{suffix}"
        path.write_bytes(data)
        assert _read(path), suffix
    assert {m.name.rsplit(".", 1)[1] for m in found} == {s[1:] for s in seeds}


def test_the_readers_read_each_mutant_or_fail_in_one_line(corpus, tmp_path):
    _, _, found = corpus
    failures, slowest, largest = [], 0.0, 0.0
    for mutant in found:
        path = tmp_path / mutant.name
        path.write_bytes(mutant.data)
        outcome, seconds, growth = measured(lambda: _read(path))
        slowest, largest = max(slowest, seconds), max(largest, growth)
        why = None
        if isinstance(outcome, DocumentError):
            text = str(outcome)
            if "\n" in text or not text.startswith(str(path)):
                why = f"the error is not one line naming the file: {text!r}"
            elif SECRET in text:
                why = "the secret is in the error"
        elif isinstance(outcome, BaseException):
            why = "".join(traceback.format_exception(outcome)[-3:]).strip()
        elif SECRET.encode() in outcome:
            why = "the secret is in the segments or the output"
        if why is None and seconds > READ_SECONDS:
            why = f"took {seconds:.1f} s"
        if why is None and growth > GROWTH_MB:
            why = f"raised the peak RSS by {growth:.0f} MB"
        if why is not None:
            failures.append(f"{mutant.what}: {why}")
    print(f"{len(found)} mutants read; slowest {slowest:.2f} s, largest peak RSS growth {largest:.1f} MB")
    assert not failures, _report(failures)


def _docs(inputs: Path, out: Path, model: Path) -> tuple[int, str, str, float]:
    """``docs`` on a folder as a user runs it: exit code, stdout, stderr and its peak RSS in MB."""
    with open(out.with_suffix(".stdout"), "w+b") as stdout, open(out.with_suffix(".stderr"), "w+b") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "edge_translator.cli", "docs", str(inputs), "-o", str(out), "--no-tm", "--json",
             "--columns", ",".join(COLUMNS), "--model", str(model)], stdout=stdout, stderr=stderr, cwd=ROOT)
        timer = threading.Timer(300, process.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)  # the rusage of this child alone
        finally:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0), stderr.seek(0)
        return process.returncode, stdout.read().decode(), stderr.read().decode("utf-8", "replace"), \
            usage.ru_maxrss / 1024


def test_one_docs_run_on_a_folder_of_mutants(corpus, tmp_path, tiny_int8):
    _, seeds, found = corpus
    good = tmp_path / "good"
    good.mkdir()
    for suffix, data in seeds.items():
        (good / f"seed{suffix}").write_bytes(data)
    code, _, _, baseline = _docs(good, tmp_path / "good-out", tiny_int8)
    assert code == 0 and len(list((tmp_path / "good-out").glob("*.zh-Hans.*"))) == len(seeds)
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    what = {}
    for mutant in found:
        (inputs / mutant.name).write_bytes(mutant.data)
        what[mutant.name] = mutant.what
    started = time.perf_counter()
    code, stdout, stderr, peak = _docs(inputs, out, tiny_int8)
    seconds = time.perf_counter() - started
    print(f"docs on {len(found)} mutants: {seconds:.1f} s, peak RSS {peak:.0f} MB (the good seeds: {baseline:.0f} MB)")
    assert code in (0, 7) and "Traceback" not in stderr, stderr[-3000:]
    assert peak - baseline < DOCS_GROWTH_MB, (peak, baseline)
    files = {Path(f["input"]).name: f for f in json.loads(stdout)["files"]}
    assert sorted(files) == sorted(what)
    lines = stderr.splitlines()
    failures = []
    for name, file in files.items():
        output = Path(file["output"])
        said = [line for line in lines if line.startswith(f"{inputs / name}: failed: ")]
        if file["status"] == "done":
            if not output.is_file() or SECRET.encode() in output.read_bytes():
                failures.append(f"{what[name]}: done, but its output is missing or holds the secret")
        elif file["status"] != "failed":
            failures.append(f"{what[name]}: {file['status']}: {file['message']}")
        elif output.exists() or len(said) != 1 or SECRET in said[0]:
            failures.append(f"{what[name]}: failed with {len(said)} lines {said!r}, output left: {output.exists()}")
    assert not failures, _report(failures)
    unexplained = [line for line in lines if not any(line.startswith(f"{inputs / name}: ") for name in files)]
    assert not unexplained, unexplained[:10]
    assert not [p.name for p in out.iterdir() if p.name.endswith(".edge-tmp")]
    assert SECRET not in stdout + stderr


@pytest.fixture(scope="module")
def served(tiny_int8, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"{KEY} 100000000\n", encoding="utf-8")
    state = tmp_path_factory.mktemp("state")
    translator, _, _ = _translator(_parts(tiny_int8))
    with running(translator, api_keys=str(keys), state_dir=str(state), max_file_size=1_000_000,
                 max_queued_documents=10_000) as (daemon, client):
        yield client, state


def test_the_daemon_translates_each_uploaded_mutant_or_answers_one_line(corpus, served):
    _, _, found = corpus
    client, state = served
    failures, largest = [], 0.0

    def translated(mutant: Mutant):
        status, _, answer = upload(client, "/v1/documents", mutant.name, mutant.data, bearer(KEY))
        if status != 202:
            return status, json.loads(answer)["error"], None
        doc = json.loads(answer)
        done = wait_done(client, doc["id"], KEY, timeout=READ_SECONDS + 30)
        if done["status"] == "done":
            got, _, result = client.call("GET", done["result_url"], headers=bearer(KEY))
            return got, "", result
        return done["status"], done["error"], sorted(p.name for p in (state / "files" / doc["id"] / "out").glob("*"))

    for mutant in found:
        outcome, _, growth = measured(lambda: translated(mutant), seconds=READ_SECONDS + 60)
        largest = max(largest, growth)
        if isinstance(outcome, BaseException):
            failures.append(f"{mutant.what}: {''.join(traceback.format_exception(outcome)[-2:]).strip()}")
            continue
        status, message, result = outcome
        if status == 200:
            why = "the secret is in the result" if SECRET.encode() in result else None
        elif status == "error":
            why = None if not result else f"files left in its output folder: {result}"
            if message.startswith("translation failed:"):  # what the worker says of an unexpected exception
                why = f"an unexpected error: {message}"
        elif isinstance(status, int) and 400 <= status < 500:
            why = None if mutant.name in message else f"the {status} does not name the file: {message!r}"
        else:
            why = f"answered {status}: {message}"
        if why is None and ("\n" in message or SECRET in message):
            why = f"the message is not one line, or holds the secret: {message!r}"
        if why is None and growth > GROWTH_MB:
            why = f"raised the peak RSS by {growth:.0f} MB"
        if why is not None:
            failures.append(f"{mutant.what}: {why}")
    print(f"{len(found)} mutants uploaded; largest peak RSS growth {largest:.1f} MB")
    assert not failures, _report(failures)
    assert client.call("GET", "/health")[0] == 200


def test_the_bounds_catch_a_real_bomb():
    """The text of a quadratic blow-up once expanded (what a parser that resolved the
    entities of a mutant would build) goes over :data:`GROWTH_MB`, and a reader that hangs is
    stopped. (lxml's own guard refuses this bomb even with ``resolve_entities=True``; the
    readers do not resolve entities at all.)"""
    if not os.access("/proc/self/clear_refs", os.W_OK):
        pytest.skip("the peak RSS cannot be started over here (no /proc/self/clear_refs)")
    outcome, _, growth = measured(lambda: len("".join(["x" * 50_000] * 5_000)))
    assert outcome == 250_000_000 and growth > GROWTH_MB, growth
    outcome, seconds, _ = measured(lambda: time.sleep(30), seconds=0.2)
    assert isinstance(outcome, TooSlow) and seconds < 5
