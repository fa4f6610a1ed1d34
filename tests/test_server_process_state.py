"""``LocalServer`` runs inside its users' processes (``composo evaluate --local``, the pytest
plugin): serving, large bodies included, leaves the process's garbage collector and memory
allocator as the host program set them."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import composo

# Runs in a fresh interpreter: an audit hook cannot be removed once added.
_HOST = r"""
import gc, json, re, sys, threading
from concurrent.futures import ThreadPoolExecutor

touched = []  # ctypes calls that name an allocator function
sys.addaudithook(
    lambda event, args: touched.append(f"{event} {args!r}")
    if event.startswith("ctypes.") and re.search(r"mall|trim", repr(args))
    else None
)

import httpx
from composo.server import LocalServer

# The bytes are mostly Chinese text (six bytes a character in JSON): each body is near the 10 MiB
# limit, while the heuristic judge, which reads English words, has few of them to read.
words = " ".join(f"word{i % 997}" for i in range(12)) + " " + "大型请求体的中文内容" * 17
agents = {
    f"a{i}": {
        "id": f"a{i}",
        "name": f"agent-{i % 40}",
        "interactions": [
            {
                "input_messages": [{"role": "user", "content": f"Question {i}: {words}"}],
                "output_messages": [{"content": f"Answer {i}: {words}"}],
            }
        ],
    }
    for i in range(4000)
}
agents["a0"]["interactions"] += [f"a{i}" for i in range(1, 4000)]
trace = {
    "trace": {"root_agent_instance_id": "a0", "agent_instance_by_id": agents},
    "evaluation_criteria": "Reward agents that answer the question",
}
prose = "lorem ipsum dolor sit amet consectetur " * 1000 + "大型请求体的中文内容" * 80_000
reward = {
    "messages": [{"role": "user", "content": prose}, {"role": "assistant", "content": prose}],
    "evaluation_criteria": "Reward answers that stay on topic",
}

enabled = []  # gc.isenabled(), sampled while the server works
collections = []  # generations of the collections that ran meanwhile
stop = threading.Event()


def sample():
    while not stop.is_set():
        enabled.append(gc.isenabled())
        stop.wait(0.001)


def seen(phase, info):
    if phase == "start":
        collections.append(info["generation"])


bodies = [json.dumps(b).encode() for b in (trace, reward)] * 2  # about 36 MiB in flight at once
paths = ["/api/v1/evals/trace", "/api/v1/evals/reward"] * 2
out = {"sizes": [len(b) for b in bodies]}
with LocalServer() as srv, httpx.Client(base_url=srv.base_url, timeout=120) as http:
    headers = {"API-Key": srv.api_key, "Content-Type": "application/json"}
    sampler = threading.Thread(target=sample)
    sampler.start()
    gc.callbacks.append(seen)
    try:
        with ThreadPoolExecutor(len(bodies)) as pool:
            answers = pool.map(
                lambda pb: http.post(pb[0], content=pb[1], headers=headers), zip(paths, bodies)
            )
            out["statuses"] = [r.status_code for r in answers]
    finally:
        gc.callbacks.remove(seen)
        stop.set()
        sampler.join()
out.update(
    samples=len(enabled),
    always_on=all(enabled),
    collections=len(collections),
    on_after=gc.isenabled(),
    touched=touched,
)
print(json.dumps(out))
"""


def test_large_bodies_leave_the_collector_on_and_the_allocator_alone() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _HOST], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["statuses"] == [200] * 4
    assert all(size > 8 * 1024 * 1024 for size in seen["sizes"])  # each near the 10 MiB limit
    assert seen["samples"] > 0 and seen["always_on"]  # never switched off, not even briefly
    assert seen["collections"] > 0  # and it kept collecting while the bodies were handled
    assert seen["on_after"]
    assert seen["touched"] == []  # no allocator function was looked up or called


_PROCESS_WIDE = {
    ("gc", "disable"),
    ("gc", "freeze"),
    ("gc", "set_threshold"),
    ("signal", "signal"),
    ("logging", "basicConfig"),
}


def test_the_package_changes_no_process_wide_state() -> None:
    """No module of the package switches the collector off, reaches the C allocator, installs a
    signal handler or configures the root logger."""
    found = []
    for path in sorted(Path(composo.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.name}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in _PROCESS_WIDE:
                    found.append(f"{where} {node.value.id}.{node.attr}")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(n.split(".")[0] == "ctypes" for n in names):
                    found.append(f"{where} imports ctypes")
    assert found == []
