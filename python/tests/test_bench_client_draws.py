"""serve simulate --bench-client sglang against numpy itself: the prompt and output tokens of the simulated run
are the sums of the lengths sglang.bench_serving's random dataset draws (np.random.seed(seed); randint for every
prompt, then for every output), over seeds and ranges, numpy's legacy stream being frozen across its versions."""

from __future__ import annotations

import numpy as np
import pytest

import pipewright

CASES = [  # seed, requests, prompt range, output range
    (1, 10, (1, 1000), (1, 1000)),
    (1, 80, (1, 8000), (0, 64)),
    (0, 37, (100, 100), (1, 5)),
    (12345, 200, (1, 65536), (3, 9)),
    (4294967295, 50, (17, 4097), (0, 2)),
]


@pytest.mark.parametrize("seed,requests,prompt,output", CASES)
def test_the_simulated_tokens_are_numpys_draws(seed, requests, prompt, output):
    np.random.seed(seed)
    prompts = np.random.randint(prompt[0], prompt[1] + 1, size=requests)
    outputs = np.random.randint(output[0], output[1] + 1, size=requests)
    run = pipewright.serve_simulate(
        model="llama3-8b", cluster="dgx-h100", requests=requests, concurrency=8, bench_client="sglang", seed=seed,
        prompt_tokens=f"uniform:{prompt[0]}:{prompt[1]}", output_tokens=f"uniform:{output[0]}:{output[1]}")
    # A drawn output of 0 is served as the one token the prefill gives.
    assert round(run["input_tokens_per_s"] * run["makespan_s"]) == int(prompts.sum())
    assert round(run["output_tokens_per_s"] * run["makespan_s"]) == int(np.maximum(outputs, 1).sum())
