"""How results show where people look at them: one short console line each, and an HTML view in a
notebook in which whatever the judge or the data said is shown as text, never run as markup."""

from __future__ import annotations

from html.parser import HTMLParser

from composo import Composo
from composo._display import HTML_ROWS
from composo.types import MultiAgentTraceResponse

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)> \" ' & ]]>"
CONVERSATION = [
    {"role": "user", "content": "How do refunds work for returns?"},
    {"role": "assistant", "content": "Returns within 30 days get a full refund. " * 40},
]
TRACE = {
    "root_agent_instance_id": "root-1",
    "agent_instance_by_id": {
        "root-1": {
            "id": "root-1",
            "name": "planner",
            "interactions": [
                {
                    "input_messages": [{"role": "user", "content": "Plan a trip to Paris"}],
                    "output_messages": [{"content": "Day 1: the Louvre. " * 30}],
                }
            ],
        }
    },
}


class _Tags(HTMLParser):
    """The tags and attributes a browser would build from a piece of HTML, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [name for name, _ in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parsed(html: str) -> _Tags:
    parser = _Tags()
    parser.feed(html)
    parser.close()
    return parser


def _inert(html: str) -> str:
    """Assert the HTML builds no script, image or event handler; its text."""
    parsed = _parsed(html)
    assert "script" not in parsed.tags and "img" not in parsed.tags
    assert not [a for a in parsed.attributes if a.startswith("on")]
    return "".join(parsed.text)


def test_a_score_is_one_short_line_and_a_card_with_its_explanation(client: Composo) -> None:
    result = client.evaluate(CONVERSATION, criteria="Reward answers that explain the refund policy")
    text = repr(result)
    assert len(text) <= 200 and "\n" not in text
    assert text.startswith("EvaluationResponse(score=") and f"{result.score:.2f}" in text
    shown = _inert(result._repr_html_())
    assert f"{result.score:.2f}" in shown
    assert result.explanation.split()[0] in shown
    assert "Reward answers that explain the refund policy" in shown


def test_a_trace_verdict_is_short_and_lists_each_agent(client: Composo) -> None:
    result = client.evaluate_trace(TRACE, criteria="Reward agents that make a concrete plan")
    assert isinstance(result, MultiAgentTraceResponse)
    text = repr(result)
    assert len(text) <= 200 and "overall_score=" in text and "agents=1" in text
    shown = _inert(result._repr_html_())
    assert "planner" in shown and "overall score" in shown


def test_a_batch_is_a_summary_line_and_a_table(client: Composo) -> None:
    items = [{"id": f"q{i}", "messages": CONVERSATION} for i in range(3)]
    items.append({"id": "broken", "messages": "not a conversation"})
    results = client.evaluate_many(
        items, ["Reward answers that explain the refund policy", "Penalize rude answers"]
    )
    text = repr(results)
    assert len(text) <= 200
    assert "8 results" in text and "2 criteria" in text and "2 failed" in text
    assert all(len(repr(r)) <= 200 for r in results)
    failed = next(r for r in results if r.error is not None)
    assert "error=" in repr(failed) and "broken" in repr(failed)
    html = results._repr_html_()
    shown = _inert(html)
    assert _parsed(html).tags.count("tr") == 1 + 2 + 1 + 8  # two headers, two criteria, 8 rows
    assert "broken" in shown and "Penalize rude answers" in shown
    assert results.summary()["Penalize rude answers"]["failed"] == 1


def test_hostile_text_from_the_data_and_the_judge_stays_text(client: Composo) -> None:
    criterion = f"Reward answers that mention {HOSTILE}"
    items = [{"id": HOSTILE, "messages": CONVERSATION}, {"id": "x", "messages": []}]
    results = client.evaluate_many(items, criterion)
    for shown in (results, *results, results[0].response):
        text = _inert(shown._repr_html_())
        assert HOSTILE in text
    judged = MultiAgentTraceResponse.model_validate(
        {
            "criterion": criterion,
            "results_by_agent_name": {
                HOSTILE: {
                    "agent_name": HOSTILE,
                    "results_by_agent_instance_id": {"i": {"score": 0.5, "explanation": HOSTILE}},
                }
            },
        }
    )
    assert HOSTILE in _inert(judged._repr_html_())
    assert len(repr(judged)) <= 200


def test_a_long_batch_shows_its_first_rows_and_says_how_many_more(client: Composo) -> None:
    items = [{"id": f"q{i}", "messages": CONVERSATION} for i in range(60)]
    results = client.evaluate_many(items, "Penalize rude answers")
    html = results._repr_html_()
    assert _parsed(html).tags.count("tr") == 1 + 1 + 1 + HTML_ROWS
    assert f"showing {HTML_ROWS} of 60 results" in _inert(html)
