"""The Spark recipe of docs/data.md on a local Spark: ``mapInPandas`` over the batch function,
with the budget split across executors, against the local server. The page's block runs here as
written, on the same Spark (its ``getOrCreate()`` finds the running session): one JVM, not two."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator

import pytest

from composo import Composo
from composo.dataframes import BatchEvaluator
from tests.support.counting_proxy import CountingProxy
from tests.support.lazy import lazy_import
from tests.support.servers import ServerProcess
from tests.test_docs_examples import BLOCKS

pd = lazy_import("pandas")

pytest.importorskip("pyspark", reason="PySpark is not installed (pip install pyspark)")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("Spark needs a Java runtime", allow_module_level=True)

# PySpark warns that it does not yet fully support pandas 3; what the recipe uses works.
pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning:pyspark", "ignore::DeprecationWarning:pyspark"
)

CRITERION = "Reward answers that explain the refund policy"
EXECUTORS = 2
ROWS = 24
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1 -Xss1m"


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    # As the recipe does: the executors run this interpreter, activated or not (PySpark
    # otherwise starts the first `python3` on PATH, which may lack the SDK).
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_PYTHON", sys.executable)
        session = (
            SparkSession.builder.master(f"local[{EXECUTORS}]")
            .appName("composo-recipe")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", str(EXECUTORS))
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            # A short-lived JVM: the quick compiler only and one GC thread cost less CPU than
            # the defaults, which tune for long jobs (and share two cores with the other tests).
            .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()


@pytest.fixture(scope="module")
def slow_server() -> Iterator[ServerProcess]:
    """20 ms per answer, so the executors' requests overlap and the split budget is tested."""
    with ServerProcess(latency=0.02) as srv:
        yield srv


def tickets() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ticket": [f"t{i}" for i in range(ROWS)],
            "prompt": [f"Order {i}: how do refunds work for returned boots?" for i in range(ROWS)],
            "response": [
                "Unused items returned within 30 days get a full refund. " * (1 + i % 3)
                for i in range(ROWS)
            ],
        }
    )


@pytest.mark.timeout(300)  # the JVM starts first
def test_the_spark_recipe_scores_every_row_within_the_split_budget(
    spark: object,
    slow_server: ServerProcess,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    columns = {"id": "ticket", "question": "prompt", "answer": "response"}
    with CountingProxy(slow_server.base_url) as proxy:
        # The recipe as the README gives it: each executor a share of the limits.
        evaluate = BatchEvaluator(
            {"refund": CRITERION},
            columns=columns,
            api_key=slow_server.api_key,
            base_url=proxy.base_url,
            max_concurrent_requests=max(1, 2 // EXECUTORS),  # 2 in flight cluster-wide
        )

        def score(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
            for batch in batches:
                yield evaluate(batch)[["ticket", "refund_score", "refund_explanation", "error"]]

        spark_df = spark.createDataFrame(tickets())  # type: ignore[attr-defined]
        scored = (
            spark_df.repartition(EXECUTORS)
            .mapInPandas(
                score,
                schema="ticket string, refund_score double, refund_explanation string, "
                "error string",
            )
            .toPandas()
        )
        assert proxy.total == ROWS  # every row once, nothing retried or lost
        assert proxy.peak <= 2  # what the server side saw in flight across the executors
    assert sorted(scored["ticket"]) == sorted(tickets()["ticket"])
    assert scored["error"].isna().all() and scored["refund_score"].notna().all()

    with Composo(api_key=slow_server.api_key, base_url=slow_server.base_url) as client:
        local = client.evaluate_dataframe(tickets(), {"refund": CRITERION}, columns=columns)
    by_ticket = scored.set_index("ticket").sort_index()
    expected = local.set_index("ticket").sort_index()
    assert by_ticket["refund_score"].tolist() == expected["refund_score"].tolist()
    assert by_ticket["refund_explanation"].tolist() == expected["refund_explanation"].tolist()

    # The page's block as written, configured as a user configures it: by the environment.
    (block,) = [code for where, code in BLOCKS if "from pyspark" in code]
    monkeypatch.setenv("COMPOSO_API_KEY", slow_server.api_key)
    monkeypatch.setenv("COMPOSO_BASE_URL", slow_server.base_url)
    capsys.readouterr()
    exec(compile(block, "docs/data.md", "exec"), {"__name__": "__main__"})
    shown = capsys.readouterr().out
    # Each ticket's row with a score and no error.
    assert re.search(r"^\|\s*t1\|\s*[01]\.\d+\|.*\|\s*NULL\|$", shown, re.M), shown
    assert re.search(r"^\|\s*t2\|\s*[01]\.\d+\|.*\|\s*NULL\|$", shown, re.M), shown
