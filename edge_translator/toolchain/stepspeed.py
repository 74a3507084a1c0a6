"""What one training step costs in each precision, on this CPU: the figure behind
``--precision`` (:attr:`.train.TrainOptions.precision`).

A random model of the given shape takes the same random batch in each precision, the
precisions alternating step by step so that a busy machine slows them alike; each step's
CPU time over its threads is what ``train-demo``'s budget counts. Run it as::

    python -m edge_translator.toolchain.stepspeed --shape w256,e6,d3 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from ..core.errors import require
from .train import PRECISIONS


def step_seconds(shape: str, threads: int, steps: int, sentences: int = 96, source_tokens: int = 14,
                 target_tokens: int = 16, vocab: int = 15000) -> dict[str, list[float]]:
    """CPU seconds over the threads of each timed step, by precision (after one untimed step each)."""
    torch = require("torch", "export")
    transformers = require("transformers", "export")
    from .sweep import parse_shape
    from .train import _config

    torch.set_num_threads(threads)
    opts = parse_shape(f"model:{shape}")[1]
    torch.manual_seed(0)
    model = transformers.MarianMTModel(_config(opts, vocab)).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, vocab - 1, (sentences, source_tokens))
    mask = torch.ones_like(ids)
    decoder_in = torch.randint(0, vocab - 1, (sentences, target_tokens))
    labels = torch.randint(0, vocab - 1, (sentences, target_tokens))

    def step(precision: str) -> float:
        start = time.process_time()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_in).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), labels.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return (time.process_time() - start) / threads

    for precision in PRECISIONS:
        step(precision)
    times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    for _ in range(steps):
        for precision in PRECISIONS:
            times[precision].append(step(precision))
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edge_translator.toolchain.stepspeed", description=__doc__)
    parser.add_argument("--shape", default="w256,e6,d3", help="a train-sweep SPEC (default w256,e6,d3)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5, help="timed steps of each precision (default 5)")
    args = parser.parse_args(argv)
    if args.threads < 1 or args.steps < 1:
        print("stepspeed: --threads and --steps must be at least 1", file=sys.stderr)
        return 2
    times = step_seconds(args.shape, args.threads, args.steps)
    for precision, values in times.items():
        print(f"{precision}: median {statistics.median(values):.3f} s a step (lowest {min(values):.3f}, highest "
              f"{max(values):.3f}; {len(values)} steps, CPU time over {args.threads} thread(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
