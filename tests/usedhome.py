"""A home as a machine that has been used leaves it: made by the app's own commands.

:func:`fill` runs ``edge-translator`` as a user would, with ``HOME`` pointing at the folder
and no ``XDG_*`` variables, so everything lands where the app puts it by default:

- the daemon's state: a translated document kept, a document still to translate, a glossary;
- the translation memory: what one ``docs`` run decoded, and imported pairs (made-up
  translations of sentences the tests translate);
- an installed model set as the default (the tiny random one: anything that uses it
  translates nonsense);
- the desktop app's settings, pointing at a model that is not there.

A test that reads any of it gets other results than it does in a home of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from .conftest import FIXTURES, HOME_VARIABLES, ROOT, USER_VARIABLES

#: Sentences the tests translate, each given a made-up translation in the used memory.
IMPORTED = ("Hello.", "Hi.", "Where is the station?", "Where is the train station?", "I like tea.",
            "Good morning.", "How are you?", "Ready.", "Thank you.")


def environment(home: Path) -> dict[str, str]:
    """The environment of a user whose home is ``home`` (every per-user folder in its default place)."""
    env = {k: v for k, v in os.environ.items() if k not in HOME_VARIABLES and k not in USER_VARIABLES}
    env["HOME"] = str(home)
    return env


def _cli(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "edge_translator.cli", *args], cwd=ROOT, env=environment(home),
                            capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"edge-translator {' '.join(args)} failed: {result.stderr}")
    return result


def _daemon_state(home: Path, work: Path) -> None:
    """Run the daemon once: a document translated and kept, a glossary; then one more
    document that a next start must translate (its state set back to queued)."""
    process = subprocess.Popen([sys.executable, "-m", "edge_translator.cli", "serve", "--port", "0", "--threads",
                                "1"], cwd=ROOT, env=environment(home), stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in process.stderr:
            if "serving" in line:
                url = line.split(" on ")[-1].strip()
                break
        assert url, "the daemon did not start"
        boundary = "edge-used-home"
        document = (work / "kept.txt").read_bytes()
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"target_lang\"\r\n\r\nZH\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"kept.txt\"\r\n"
                "Content-Type: text/plain\r\n\r\n").encode() + document + f"\r\n--{boundary}--\r\n".encode()
        request = urllib.request.Request(url + "/v2/document", body, method="POST", headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        doc = json.loads(urllib.request.urlopen(request, timeout=60).read())
        status = {}
        deadline = time.monotonic() + 120
        while status.get("status") != "done":
            assert time.monotonic() < deadline, f"the document did not finish: {status}"
            check = urllib.request.Request(url + f"/v2/document/{doc['document_id']}",
                                           json.dumps({"document_key": doc["document_key"]}).encode(),
                                           method="POST", headers={"Content-Type": "application/json"})
            status = json.loads(urllib.request.urlopen(check, timeout=60).read())
            if status.get("status") == "error":
                raise AssertionError(f"the document failed: {status}")
        glossary = {"name": "kept", "dictionaries": [{"source_lang": "en", "target_lang": "zh",
                                                      "entries": "station\t车站\ntea\t茶", "entries_format": "tsv"}]}
        request = urllib.request.Request(url + "/v3/glossaries", json.dumps(glossary).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=60).read()
    finally:
        process.terminate()
        process.wait(60)
    files = home / ".local" / "state" / "edge-translator" / "files"
    kept = files / doc["document_id"]
    queued = files / ("q" + doc["document_id"][1:])
    shutil.copytree(kept, queued)
    state = json.loads((queued / "state.json").read_text("utf-8"))
    state.update(id=queued.name, status="queued", finished=0.0)
    (queued / "state.json").write_text(json.dumps(state), "utf-8")


def fill(home: Path) -> Path:
    """Make ``home`` a used one (see the module's docstring); returns it."""
    work = home / "Documents"
    work.mkdir(parents=True)
    (work / "kept.txt").write_text("Good morning.\n\nThe weather is fine today.\n", "utf-8")
    _daemon_state(home, work)
    _cli(home, "docs", str(work / "kept.txt"), "--quiet")
    tmx = work / "made-up.tmx"
    units = "".join(f'<tu><tuv xml:lang="en"><seg>{s}</seg></tuv><tuv xml:lang="zh-Hans"><seg>编造的译文{i}。'
                    f"</seg></tuv></tu>" for i, s in enumerate(IMPORTED))
    tmx.write_text(f'<?xml version="1.0" encoding="UTF-8"?><tmx version="1.4"><header srclang="en" '
                   f'datatype="plaintext" segtype="sentence" adminlang="en" creationtool="test" '
                   f'creationtoolversion="1" o-tmf="none"/><body>{units}</body></tmx>', "utf-8")
    _cli(home, "tm", "import", str(tmx))
    _cli(home, "models", "add", str(FIXTURES / "tiny-int8"), "--name", "tiny-used", "--default", "--quiet")
    config = home / ".config" / "edge-translator"
    config.mkdir(parents=True, exist_ok=True)
    (config / "edge-translator.conf").write_text(
        "[General]\nmodel=/nowhere/any-model\nvariant=zh-Hant\nthreads=7\nas_you_type=false\n", "utf-8")
    return home


def digest(home: Path) -> dict[str, str]:
    """Every file under ``home`` with a digest of its bytes: what a run must leave as it was."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*")) if p.is_file()}
