"""evaluate_dataframe on real pandas, polars and datasets objects, against the local server."""

from __future__ import annotations

import pytest

from composo import AsyncComposo, Composo, ComposoValidationError
from tests.support.lazy import lazy_import
from tests.support.servers import ServerProcess

pd = lazy_import("pandas")
pl = lazy_import("polars")

REFUND = "Reward answers that explain the refund policy"
WINDOW = "Passes if the answer mentions the return window"


def qa_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "question": ["How do refunds work?", "Can I return shoes?", "What is the window?"],
            "answer": [
                "Returns within 30 days get a full refund.",
                "Yes, unworn shoes can be returned.",
                "The return window is 30 days from delivery.",
            ],
        },
        index=[10, 20, 30],
    )


def messages_of(question: str, answer: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def test_pandas_rows_are_scored_in_order_with_one_column_pair_per_criterion(
    client: Composo, live: ServerProcess
) -> None:
    df = qa_frame()
    before = df.copy()
    out = client.evaluate_dataframe(df, [REFUND, WINDOW])

    assert list(out.index) == [10, 20, 30]  # the input's rows, in its order
    assert list(out.columns) == [
        "id",
        "question",
        "answer",
        "reward_answers_that_explain_the_refund_score",
        "reward_answers_that_explain_the_refund_explanation",
        "passes_if_the_answer_mentions_the_return_score",
        "passes_if_the_answer_mentions_the_return_explanation",
        "error",
    ]
    pd.testing.assert_frame_equal(df, before)  # the caller's frame is untouched
    assert out["error"].isna().all()
    # each row's score is what evaluate() gives for the same conversation
    for _, row in out.iterrows():
        one = client.evaluate(messages_of(row["question"], row["answer"]), criteria=WINDOW)
        assert row["passes_if_the_answer_mentions_the_return_score"] == one.score
        assert row["passes_if_the_answer_mentions_the_return_explanation"] == one.explanation
    assert out["reward_answers_that_explain_the_refund_score"].dtype == "float64"
    assert len([r for r in live.requests() if r["path"].endswith("/reward")]) == 3 * 2 + 3


def test_polars_messages_column_and_named_criteria(client: Composo) -> None:
    frame = pl.DataFrame(
        {
            "messages": [
                messages_of("How do refunds work?", "Full refund within 30 days."),
                messages_of("Do you ship abroad?", "Yes, to 40 countries."),
            ],
            "tags": [{"team": "support"}, {"team": "sales"}],
        }
    )
    out = client.evaluate_dataframe(frame, {"refund": REFUND})
    assert isinstance(out, pl.DataFrame)
    assert out.columns == ["messages", "tags", "refund_score", "refund_explanation", "error"]
    assert out.schema["refund_score"] == pl.Float64
    first = client.evaluate(frame["messages"][0].to_list(), criteria=REFUND)
    assert out["refund_score"][0] == first.score
    assert out["error"].null_count() == 2


@pytest.mark.slow
def test_hugging_face_dataset_through_the_same_mapping(
    client: Composo, live: ServerProcess
) -> None:
    import datasets  # loaded by the test that uses it, not at collection

    ds = datasets.Dataset.from_dict(
        {
            "prompt": ["How do refunds work?", "Is there a fee?"],
            "response": ["Full refund within 30 days.", "No fee for returns."],
            "docs": [["Refunds: 30 days."], ["Returns are free."]],
        }
    )
    mapping = {"question": "prompt", "answer": "response", "context": "docs"}
    out = client.evaluate_dataframe(ds, {"refund": REFUND}, columns=mapping)
    assert isinstance(out, datasets.Dataset)
    assert out.column_names == [
        "prompt",
        "response",
        "docs",
        "refund_score",
        "refund_explanation",
        "error",
    ]
    # Rows are sent concurrently: find the first row's request, whichever arrived first.
    users = [r["body"]["messages"][0]["content"] for r in live.requests()]
    assert any("Refunds: 30 days." in u and "How do refunds work?" in u for u in users)
    assert any("Returns are free." in u and "Is there a fee?" in u for u in users)
    assert all(isinstance(s, float) for s in out["refund_score"])


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (None, "no 'messages' column and no 'answer' column"),
        ({"answer": "reply"}, "answer='reply' is not a column of this table"),
        ({"answr": "response"}, "unknown role 'answr'"),
    ],
)
def test_a_missing_or_misnamed_column_fails_before_any_request(
    client: Composo, live: ServerProcess, columns: dict[str, str] | None, message: str
) -> None:
    df = pd.DataFrame({"question": ["q"], "response": ["a"]})
    with pytest.raises(ComposoValidationError, match=message) as info:
        client.evaluate_dataframe(df, REFUND, columns=columns)
    if columns is None or "answer" in columns:  # names what the table has
        assert "'question', 'response'" in str(info.value)
    assert live.requests() == []


def test_a_bad_cell_fails_its_row_only_naming_row_and_column(
    client: Composo, live: ServerProcess
) -> None:
    df = pd.DataFrame(
        {
            "question": ["How do refunds work?", "Q2", "Q3", "Q4", "Q5", "Q6"],
            "answer": ["Full refund within 30 days.", 42, None, "", "   ", "Returns are free."],
        }
    )
    out = client.evaluate_dataframe(df, {"refund": REFUND})
    assert out["error"][1] == (
        "ComposoValidationError: row 1, column 'answer': expected text, got an int; "
        "fill it in or drop the row"
    )
    assert "row 2, column 'answer': expected text, got an empty cell" in out["error"][2]
    # an answer of no words is no answer: refused, never scored as a bad one
    assert "row 3, column 'answer': expected text, got an empty string" in out["error"][3]
    assert "row 4, column 'answer': expected text, got only whitespace" in out["error"][4]
    assert out["refund_score"][1:5].isna().all()
    assert out["error"][[0, 5]].isna().all()  # what could be scored was scored
    assert not out["refund_score"][[0, 5]].isna().any()
    assert len(live.requests()) == 2


def test_a_metadata_column_comes_back_as_it_was_and_is_never_sent(
    client: Composo, live: ServerProcess
) -> None:
    df = qa_frame().assign(metadata=[{"user": "u1"}, None, {"user": "u3", "tries": [1, 2]}])
    before = df.copy()
    out = client.evaluate_dataframe(df, {"refund": REFUND})

    assert list(out.columns) == [*df.columns, "refund_score", "refund_explanation", "error"]
    assert list(out["metadata"]) == list(before["metadata"]) and out["error"].isna().all()
    pd.testing.assert_frame_equal(df, before)
    assert not any("u1" in str(r["body"]) for r in live.requests())
    texts = pl.Series("metadata", ['{"user": "u1"}', None, "free text"])
    polar = client.evaluate_dataframe(
        pl.from_pandas(qa_frame()).with_columns(texts), {"refund": REFUND}
    )
    assert polar["metadata"].to_list() == ['{"user": "u1"}', None, "free text"]
    assert polar["error"].is_null().all()  # a column of the table, whatever it holds
    with pytest.raises(ComposoValidationError, match="comes back unchanged in the result"):
        client.evaluate_dataframe(df, REFUND, columns={"metadata": "metadata"})


def test_result_columns_may_not_overwrite_the_input(client: Composo, live: ServerProcess) -> None:
    df = pd.DataFrame({"question": ["q"], "answer": ["a"], "error": ["kept"]})
    with pytest.raises(ComposoValidationError, match="already has a column 'error'"):
        client.evaluate_dataframe(df, REFUND)
    assert live.requests() == []


async def test_async_client_gives_the_same_frame(client: Composo, aclient: AsyncComposo) -> None:
    df = qa_frame()
    sync = client.evaluate_dataframe(df, {"refund": REFUND, "window": WINDOW})
    async_ = await aclient.evaluate_dataframe(df, {"refund": REFUND, "window": WINDOW})
    pd.testing.assert_frame_equal(sync, async_)


def test_batch_results_convert_to_pandas_and_polars(client: Composo) -> None:
    items = [
        {"id": "a", "messages": messages_of("How do refunds work?", "Full refund in 30 days.")},
        {"id": "b", "messages": [{"role": "user", "content": "only one message"}]},
    ]
    items[1]["metadata"] = {"user": "u2", "scores": [1, "x"]}
    results = client.evaluate_many(items, [REFUND, WINDOW])
    frame = results.to_pandas()
    columns = ["index", "id", "criterion", "score", "explanation", "error", "metadata"]
    assert list(frame.columns) == columns
    assert list(frame["criterion"]) == [REFUND, WINDOW, REFUND, WINDOW]
    assert frame["score"][0] == results[0].score and frame["error"][:2].isna().all()
    assert frame["error"][2].startswith("ComposoValidationError")
    polar = results.to_polars()
    assert polar.shape == (4, 7) and polar["id"].to_list() == ["a", "a", "b", "b"]
    assert polar["score"][1] == results[1].score
    meta = [None, None, items[1]["metadata"], items[1]["metadata"]]
    assert list(frame["metadata"]) == meta and polar["metadata"].to_list() == meta


def test_import_composo_loads_no_table_library() -> None:
    import subprocess
    import sys

    code = (
        "import sys, composo; from composo import Composo; "
        "print([m for m in ('pandas', 'polars', 'pyarrow', 'datasets', 'ray', 'sqlite3') "
        "if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_batch_evaluator_takes_any_batch_form_and_travels_by_pickle(live: ServerProcess) -> None:
    import pickle
    import time

    import pyarrow as pa

    from composo.dataframes import BatchEvaluator

    evaluate = BatchEvaluator(
        {"refund": REFUND}, api_key=live.api_key, base_url=live.base_url, requests_per_minute=1200
    )
    assert live.api_key not in repr(evaluate)
    copy = pickle.loads(pickle.dumps(evaluate))  # what a worker receives
    df = qa_frame().reset_index(drop=True)
    start = time.monotonic()
    from_pandas = copy(df)
    assert time.monotonic() - start >= 2 * 60 / 1200  # three requests, paced 50 ms apart
    from_columns = copy({c: df[c].to_numpy() for c in df.columns})
    from_arrow = copy(pa.Table.from_pandas(df))
    with Composo(api_key=live.api_key, base_url=live.base_url) as client:
        local = client.evaluate_dataframe(df, {"refund": REFUND})
    for out in (from_pandas, from_columns, from_arrow):
        assert list(out["refund_score"]) == list(local["refund_score"])
        assert list(out["id"]) == ["a", "b", "c"]
