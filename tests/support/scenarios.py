"""Programs the concurrency tests run in a process of their own (``python -m
tests.support.scenarios NAME URL``), so that forking and Ctrl-C happen to a plain Python
program, not to a test worker: each prints one JSON line with what it saw.

- ``fork URL``: a warmed client is forked; parent and child each call it from 8 threads, every
  verdict checked against its own request; the child first makes a several-criteria call.
- ``pool URL``: ``multiprocessing.Pool(4)`` (fork) maps over a module-level client warmed in the
  parent.
- ``background URL``: a background evaluator used, then forked with evaluations in flight; the
  child's evaluations finish.
- ``cache URL DIR``: a client with a result cache used, then forked; the child uses the cache.
- ``interrupt FORM URL``: runs one batch form against a server that never answers; the test
  sends SIGINT; prints how long the interrupt took to come back and which threads of ours live.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from composo import AsyncComposo, Composo, ComposoError

CRITERIA = ["Reward accuracy", "Reward brevity", "Reward warmth"]
CLIENT: Composo | None = None


def messages(text: str) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": text},
    ]


def crossed(client: Composo, text: str, criterion: str = CRITERIA[0]) -> bool:
    """Whether the verdict for ``text`` came back with another request's explanation (or
    garbled: two processes writing on one connection)."""
    try:
        result = client.evaluate(messages=messages(text), criteria=criterion)
    except ComposoError:
        return True
    return bool(result.explanation != f"{text}|{criterion}")


def hammer(client: Composo, tag: str, threads: int = 8, calls: int = 60) -> int:
    """Calls from ``threads`` threads at once; how many verdicts crossed."""
    bad = [0] * threads

    def run(t: int) -> None:
        for i in range(calls):
            bad[t] += crossed(client, f"{tag}-{t}-{i}")

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(bad)


def fork(url: str) -> dict[str, Any]:
    client = Composo(api_key="k", base_url=url, max_concurrent_requests=8, timeout=10)
    client.evaluate(messages=messages("warm"), criteria=CRITERIA)  # the thread pool exists
    hammer(client, "warm", calls=5)  # and connections are open
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        start = time.monotonic()
        several = client.evaluate(messages=messages("child"), criteria=CRITERIA)
        report = {
            "several_ok": [r.explanation for r in several] == [f"child|{c}" for c in CRITERIA],
            "several_seconds": time.monotonic() - start,
            "crossed": hammer(client, f"child{os.getpid()}"),
        }
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    parent = hammer(client, "parent")
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = json.loads(pipe.read() or "{}")
    return {"parent_crossed": parent, "child": child, "calls": 2 * 8 * 60}


def _score(i: int) -> bool:
    assert CLIENT is not None
    return crossed(CLIENT, f"item-{i}")


def pool(url: str) -> dict[str, Any]:
    import multiprocessing

    global CLIENT
    CLIENT = Composo(api_key="k", base_url=url, max_concurrent_requests=8, timeout=10)
    hammer(CLIENT, "warm", calls=5)
    with multiprocessing.get_context("fork").Pool(4) as workers:
        bad = workers.map(_score, range(200), chunksize=5)
    return {"crossed": sum(bad), "items": len(bad)}


def _run(text: str) -> dict[str, Any]:
    return {"messages": messages(text)}


def background(url: str) -> dict[str, Any]:
    from composo.ext import BackgroundEvaluator

    client = Composo(api_key="k", base_url=url, timeout=10)
    evaluator = BackgroundEvaluator([CRITERIA[0]], client=client)
    # Its first answer came before the fork: a fork during a process's first request may catch a
    # thread inside a one-time setup that holds a lock (an import, OpenSSL's), as documented.
    evaluator.submit("first", "evaluate", functools.partial(_run, "first"))
    assert evaluator.flush(timeout=10)
    for i in range(5):
        evaluator.submit(f"parent-{i}", "evaluate", functools.partial(_run, f"p{i}"))
    pid = os.fork()
    if pid == 0:
        for i in range(5):
            evaluator.submit(f"child-{i}", "evaluate", functools.partial(_run, f"c{i}"))
        finished = evaluator.flush(timeout=10)
        mine = [r for r in evaluator.results if r.run_id.startswith("child")]
        good = all(r.explanation == f"c{r.run_id[6:]}|{CRITERIA[0]}" for r in mine)
        os._exit(0 if finished and len(mine) == 5 and good else 1)
    finished = evaluator.flush(timeout=10)
    _, status = os.waitpid(pid, 0)
    evaluator.close()
    return {"parent_flushed": finished, "child_ok": os.waitstatus_to_exitcode(status) == 0}


def cache(url: str, where: str) -> dict[str, Any]:
    """A client with a result cache used, then forked: the child reads and writes the cache
    on a connection of its own."""
    client = Composo(api_key="k", base_url=url, cache=where, timeout=10)
    client.evaluate(messages=messages("kept"), criteria=CRITERIA[0])
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            again = client.evaluate(messages=messages("kept"), criteria=CRITERIA[0])
            new = client.evaluate(messages=messages("child"), criteria=CRITERIA[0])
            good = again.explanation == f"kept|{CRITERIA[0]}"
            code = 0 if good and new.explanation == f"child|{CRITERIA[0]}" else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    after = client.evaluate(messages=messages("child"), criteria=CRITERIA[0])
    client.close()
    return {
        "child_ok": os.waitstatus_to_exitcode(status) == 0,
        "parent_ok": after.explanation == f"child|{CRITERIA[0]}",
    }


def _items(n: int) -> list[dict[str, Any]]:
    return [{"messages": messages(f"item-{i}")} for i in range(n)]


def interrupt(form: str, url: str) -> dict[str, Any]:
    signal.signal(signal.SIGINT, signal.default_int_handler)  # this program's own choice
    started = time.monotonic()
    caught = None
    try:
        if form.startswith("async_"):
            asyncio.run(_interrupt_async(form, url))
        else:
            with Composo(api_key="k", base_url=url, timeout=30, max_concurrent_requests=4) as c:
                try:
                    _interrupt_sync(c, form)
                except KeyboardInterrupt:
                    caught = time.monotonic()
                    raise
    except KeyboardInterrupt:
        caught = caught or time.monotonic()
    back = time.monotonic()
    deadline = time.monotonic() + 0.5  # idle pool threads wind down once the client is closed
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.02)
    return {
        "interrupted": caught is not None,
        "seconds": back - (caught or back),
        "threads": _ours(),
        "ran": back - started,
    }


def _ours() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("composo") and t.is_alive()]


def _interrupt_sync(c: Composo, form: str) -> None:
    if form == "evaluate":
        c.evaluate(messages=messages("x"), criteria=CRITERIA)
    elif form == "many":
        c.evaluate_many(_items(20), CRITERIA[0])
    elif form == "iter":
        for _ in c.evaluate_many_iter(_items(20), CRITERIA[0]):
            pass
    elif form == "dataframe":
        import pandas as pd

        frame = pd.DataFrame({"question": ["q"] * 20, "answer": [f"a{i}" for i in range(20)]})
        c.evaluate_dataframe(frame, CRITERIA[0])
    else:
        raise SystemExit(f"unknown form {form}")


async def _interrupt_async(form: str, url: str) -> None:
    async with AsyncComposo(api_key="k", base_url=url, timeout=30, max_concurrent_requests=4) as c:
        if form == "async_evaluate":
            await c.evaluate(messages=messages("x"), criteria=CRITERIA)
        elif form == "async_many":
            await c.evaluate_many(_items(20), CRITERIA[0])
        elif form == "async_iter":
            async for _ in c.evaluate_many_iter(_items(20), CRITERIA[0]):
                pass
        else:
            raise SystemExit(f"unknown form {form}")


def main(argv: list[str]) -> None:
    name, *args = argv
    scenario: dict[str, Callable[..., dict[str, Any]]] = {
        "fork": fork,
        "pool": pool,
        "background": background,
        "cache": cache,
        "interrupt": interrupt,
    }
    print(json.dumps(scenario[name](*args)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
