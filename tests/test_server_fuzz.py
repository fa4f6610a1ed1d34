"""Property-based fuzzing of the local server over loopback: bodies generated from the server's
own OpenAPI schema, and message shapes the platform accepts (it does not check them). Whatever
arrives, the answer is never a 5xx, and a background task accepted for a body never fails.

Bounded: a fixed number of examples per run (a few hundred requests, seconds on loopback)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.servers import HTTP, ServerProcess

CRITERIA = [
    "Reward responses that name the capital city",
    "Penalize responses that invent facts",
    "Passes if the answer calls a tool",
    "Fails if the agent calls a tool with invented arguments",
    "Reward agents that use tools well",
]
_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
function = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={"name": json_values | st.text(), "arguments": json_values}),
)
tool_call = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {}, optional={"id": json_values, "type": json_values, "function": function}
    ),
)
block = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "input_text"])},
        optional={
            "text": json_values,
            "name": json_values,
            "input": json_values,
            "content": json_values,
        },
    ),
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"])},
    optional={
        "content": st.one_of(json_values, st.lists(block, max_size=4)),
        "tool_calls": st.one_of(json_values, st.lists(tool_call, max_size=3)),
        "name": json_values,
        "tool_call_id": json_values,
    },
)
tool = st.one_of(
    st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    st.fixed_dictionaries(
        {"type": st.just("function")},
        optional={"function": function | st.fixed_dictionaries({"name": st.text(max_size=8)})},
    ),
)
reward_bodies = st.fixed_dictionaries(
    {
        "messages": st.lists(message, min_size=2, max_size=5),
        "evaluation_criteria": st.sampled_from(CRITERIA),
    },
    optional={
        "tools": st.lists(tool, max_size=3),
        "system": st.text(max_size=30),
        "evaluate_latest": st.booleans(),
    },
)


def _schemas(srv: ServerProcess) -> dict[str, dict[str, Any]]:
    """Each request body schema of the served OpenAPI document, standalone."""
    doc = HTTP.get(srv.base_url + "/openapi.json", timeout=10).json()
    defs = json.loads(
        json.dumps(doc["components"]["schemas"]).replace("#/components/schemas/", "#/$defs/")
    )
    out: dict[str, dict[str, Any]] = {}
    for path, ops in doc["paths"].items():
        body = ops.get("post", {}).get("requestBody")
        if body:
            ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
            out[path] = {**defs[ref], "$defs": defs}
    return out


def _with_criterion(body: Any, criterion: str) -> Any:
    """Half the generated bodies get a valid criterion, so they get past that check."""
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if k != "evaluator_name"}
        body["evaluation_criteria"] = criterion
    return body


class _Checker:
    def __init__(self, srv: ServerProcess) -> None:
        self.srv = srv
        self.http = httpx.Client(headers={"API-Key": srv.api_key}, timeout=30)
        self.tasks: list[tuple[str, Any]] = []

    def post(self, path: str, body: Any) -> None:
        r = self.http.post(self.srv.base_url + path, json=body)
        assert r.status_code < 500, f"{path} answered {r.status_code} {r.text[:300]} for {body!r}"
        assert r.status_code in (200, 413, 422), r.text
        if r.status_code == 200 and path.endswith("/background"):
            self.tasks.append((r.json()["task_id"], body))

    def check_tasks(self) -> None:
        deadline = time.monotonic() + 60
        for task_id, body in self.tasks:
            while True:
                info = self.http.get(f"{self.srv.base_url}/api/v1/evals/tasks/{task_id}").json()
                if info["status"] not in ("pending", "running"):
                    break
                assert time.monotonic() < deadline, "background tasks did not finish"
                time.sleep(0.02)
            assert info["status"] == "succeeded", f"task failed: {info} for {body!r}"


def _run(srv: ServerProcess, strategy: st.SearchStrategy[Any], paths: list[str]) -> int:
    """Fuzz ``paths`` with ``strategy``; returns how many background tasks were accepted."""
    checker = _Checker(srv)

    @_SETTINGS
    @given(strategy)
    def fuzz(body: Any) -> None:
        for path in paths:
            checker.post(path, body)

    try:
        fuzz()
        checker.check_tasks()
    finally:
        checker.http.close()
    return len(checker.tasks)


def _strategy(
    schema: dict[str, Any], defs: dict[str, Any], depth: int = 0
) -> st.SearchStrategy[Any]:
    """Values for the JSON Schema subset pydantic emits: ``$ref``, ``anyOf``, ``enum``/``const``,
    objects, arrays, strings, numbers, booleans and null. Mostly valid values, with optional
    properties left out or filled at random."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return st.deferred(lambda: _strategy(defs[name], defs, depth + 1))
    if "anyOf" in schema:
        return st.one_of([_strategy(s, defs, depth) for s in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = {k: _strategy(v, defs, depth) for k, v in props.items() if k in required}
        optional = {k: _strategy(v, defs, depth) for k, v in props.items() if k not in required}
        extra = schema.get("additionalProperties")
        if not props and extra not in (None, False):
            inner = json_values if extra is True else _strategy(extra, defs, depth)
            return st.dictionaries(st.text(max_size=8), inner, max_size=3 if depth < 4 else 1)
        return st.fixed_dictionaries(fixed, optional=optional)
    if kind == "array":
        items = _strategy(schema.get("items", {}), defs, depth + 1)
        low = schema.get("minItems", 0)
        return st.lists(items, min_size=low, max_size=max(low, 3 if depth < 4 else 1))
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 40)
        return st.text(min_size=low, max_size=max(low, high))
    if kind == "integer":
        return st.integers()
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values  # no type: anything


def _from_schema(srv: ServerProcess, path: str) -> st.SearchStrategy[Any]:
    schema = _schemas(srv)[path]
    raw = st.one_of(_strategy(schema, schema["$defs"]), json_values)
    return st.one_of(
        raw, st.tuples(raw, st.sampled_from(CRITERIA)).map(lambda t: _with_criterion(*t))
    )


def test_schema_generated_reward_bodies_never_get_a_5xx(server: ServerProcess) -> None:
    paths = ["/api/v1/evals/reward", "/api/v1/evals/reward/background"]
    _run(server, _from_schema(server, paths[0]), paths)


def _consistent(body: Any) -> Any:
    """Make a generated trace's ids agree with their keys, so more traces get to the judge."""
    trace = body.get("trace") if isinstance(body, dict) else None
    agents = trace.get("agent_instance_by_id") if isinstance(trace, dict) else None
    if isinstance(agents, dict) and agents:
        for key, agent in agents.items():
            if isinstance(agent, dict):
                agent["id"] = key
                steps = agent.get("interactions")
                if isinstance(steps, list):
                    agent["interactions"] = [s for s in steps if not isinstance(s, str)]
        trace["root_agent_instance_id"] = next(iter(agents))
        body.pop("evaluate_latest", None)
        if str(body.get("model_core") or "").startswith("align-lightning"):
            body.pop("model_core")
    return body


def test_schema_generated_trace_bodies_never_get_a_5xx(server: ServerProcess) -> None:
    paths = ["/api/v1/evals/trace", "/api/v1/evals/trace/background"]
    strategy = _from_schema(server, paths[0])
    _run(server, st.one_of(strategy, strategy.map(_consistent)), paths)


def test_any_message_shape_is_judged_never_a_5xx(server: ServerProcess) -> None:
    paths = ["/api/v1/evals/reward", "/api/v1/evals/reward/background"]
    assert _run(server, reward_bodies, paths) > 10  # most of these bodies reach the judge
