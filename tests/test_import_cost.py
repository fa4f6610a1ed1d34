"""What importing composo and making a client load: names resolve on first use, and neither the
import nor the construction pulls in pydantic's model machinery, asyncio, tenacity or anything
optional. Checked in fresh interpreters, by the modules loaded (never by timing)."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

import composo
import composo.types
from composo import Composo
from tests.support.servers import ServerProcess

QA = [
    {"role": "user", "content": "What's the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris."},
]

# Top-level packages that a plain import or a client construction must not load.
NOT_LOADED = (
    "asyncio",
    "tenacity",
    "openai",
    "llama_index",
    "opentelemetry",
    "fastapi",
    "uvicorn",
)


def _loaded_after(statement: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``statement``."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


def _unwanted(loaded: list[str]) -> list[str]:
    return sorted(
        m
        for m in loaded
        if m == "pydantic.main"
        or m.split(".")[0] in NOT_LOADED
        or m.startswith("langchain")
        or m in ("composo._core.trace", "composo._core.wire", "composo._core.responses")
    )


@pytest.mark.parametrize(
    "statement",
    [
        "import composo",
        "from composo import Composo; Composo(api_key='k')",
        "from composo import Composo; Composo(api_key='k', model_core='align-20250529').close()",
        # the platform SDK's import paths cost what ours do
        "from composo.client import Composo; Composo(api_key='k')",
        "from composo.exceptions import TimeoutError, get_exception_for_status_code",
        "from composo.models import criteria; criteria.rag",
    ],
)
def test_import_and_construction_load_no_models_and_nothing_optional(statement: str) -> None:
    assert _unwanted(_loaded_after(statement)) == []


def test_the_platform_sdk_import_paths_load_only_when_imported() -> None:
    loaded = _loaded_after("import composo")
    assert not {"composo.models", "composo.client", "composo.exceptions"} & set(loaded)


def test_the_pytest_plugin_loads_no_models_and_nothing_optional() -> None:
    # Loaded in every pytest session, whether or not a test evaluates anything.
    statement = "import pytest, composo._pytest_plugin, composo._testing_session"
    assert _unwanted(_loaded_after(statement)) == []


def test_every_public_name_resolves_and_is_listed() -> None:
    assert set(composo.__all__) <= set(dir(composo))
    for name in composo.__all__:
        assert getattr(composo, name) is not None, name
    # The same objects as the types face, whichever module defines them.
    assert composo.MODEL_CORES is composo.types.MODEL_CORES
    assert composo.ModelCore is composo.types.ModelCore
    assert composo.EvaluationResponse is composo.types.EvaluationResponse
    assert composo.MultiAgentTrace is composo.types.MultiAgentTrace
    with pytest.raises(AttributeError, match="module 'composo' has no attribute 'Nothing'"):
        _ = composo.Nothing  # type: ignore[attr-defined]


def test_a_bad_model_core_is_refused_at_construction_before_any_model_loads() -> None:
    code = (
        "import sys\n"
        "from composo import Composo, ComposoValidationError\n"
        "try:\n"
        "    Composo(api_key='k', model_core='align-1999')\n"
        "except ComposoValidationError as exc:\n"
        "    print(exc)\n"
        "assert 'pydantic.main' not in sys.modules\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("model_core: 'align-1999' is not a model core; use one of ")
    assert "align-20251111" in out


def test_the_client_connects_on_first_use_and_closes_cleanly(live: ServerProcess) -> None:
    unused = Composo(api_key=live.api_key, base_url=live.base_url)
    unused.close()  # never sent anything: nothing to close, no error
    with Composo(api_key=live.api_key, base_url=live.base_url) as client:
        # Several criteria at once: the first requests start on several threads together.
        results = client.evaluate(messages=QA, criteria=["Reward accuracy", "Reward brevity"])
        assert [r.criterion for r in results] == ["Reward accuracy", "Reward brevity"]
        assert client.evaluate(messages=QA, criteria="Reward accuracy").score is not None


def test_a_closed_client_refuses_requests_even_if_it_never_connected(
    live: ServerProcess,
) -> None:
    client = Composo(api_key=live.api_key, base_url=live.base_url)
    client.close()
    with pytest.raises(RuntimeError, match="client has been closed"):
        client.evaluate(messages=QA, criteria="Reward accuracy")


def test_a_supplied_http_client_is_used_and_left_open(live: ServerProcess) -> None:
    seen: list[str] = []
    with httpx.Client(event_hooks={"request": [lambda r: seen.append(r.url.path)]}) as http:
        with Composo(api_key=live.api_key, base_url=live.base_url, http_client=http) as client:
            client.evaluate(messages=QA, criteria="Reward accuracy")
        assert seen == ["/api/v1/evals/reward"]
        assert not http.is_closed
        http.get(live.base_url + "/api/healthcheck").raise_for_status()
