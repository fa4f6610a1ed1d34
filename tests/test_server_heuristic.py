"""The heuristic judge, seen through the server as a user sees it: it follows the criterion's
words (what a "Passes if the answer names X" asks for, the trait a Reward or Penalize criterion
names), Reward and Penalize of one trait are mirror images, it answers ``None`` where it cannot
judge, and every explanation says what it looked for and what it found."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from composo import Composo, criteria
from tests.support.cli import ROOT
from tests.support.servers import ServerProcess

QUESTION = {"role": "user", "content": "How do I reset my router to factory settings?"}
GOOD = {
    "role": "assistant",
    "content": "To reset the router to factory settings, hold the reset button for ten seconds "
    "until the lights blink, then wait for it to restart.",
}
OFF_TOPIC = {"role": "assistant", "content": "Bananas are rich in potassium and taste sweet."}
REFUSAL = {"role": "assistant", "content": "I'm sorry, but I can't help with that request."}
EMPTY = {"role": "assistant", "content": ""}
RUDE = {"role": "assistant", "content": "Calm down, it's obvious. Read the manual next time."}
POLITE = {
    "role": "assistant",
    "content": "Happy to help! Please hold the reset button for ten seconds, thank you.",
}
HELPFUL = "Reward responses that explain how to reset the router"
LONG = " ".join(["The router keeps its settings in memory and a reset clears them."] * 20)


def say(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def score(
    client: Composo, answer: dict[str, Any], criterion: str = HELPFUL, **kw: Any
) -> float | None:
    got: float | None = client.evaluate(messages=[QUESTION, answer], criteria=criterion, **kw).score
    return got


def test_same_input_same_verdict(client: Composo) -> None:
    first = client.evaluate(messages=[QUESTION, GOOD], criteria=HELPFUL)
    again = client.evaluate(messages=[QUESTION, GOOD], criteria=HELPFUL)
    assert (first.score, first.explanation) == (again.score, again.explanation)


# -- "Passes if the answer names X" ------------------------------------------------------------

REFUNDS = {"role": "user", "content": "How long do refunds take, and what does Pro cost?"}


@pytest.mark.parametrize(
    ("criterion", "passing", "failing"),
    [
        ("Passes if the answer names Paris", "The capital is Paris.", "The capital is Berlin."),
        ("Passes if the answer states a time frame", "5 to 7 days.", "Refunds are quick."),
        ("Passes if the response gives a date", "It arrives on 14 March.", "It arrives soon."),
        ("Passes if the answer mentions a price", "Pro is $12 a month.", "Pro is affordable."),
        ("Passes if the answer includes a number", "You get 25 days.", "You get plenty."),
        ("Passes if the answer cites a source", "Refunds take 5 days [1].", "Refunds are quick."),
        ("Passes if the answer gives a link", "See https://example.com/refunds", "See our site."),
        ("Passes if the answer contains 'Return item'", "Click 'Return item'.", "Click Returns."),
        ("Passes if the answer names a city", "Ship it to Lisbon.", "Ship it to me."),
        ("Passes if the answer mentions the return window", "The return window is 30 days.", "No."),
        ("Passes if the answer does not mention Berlin", "It is Paris.", "It is Berlin."),
    ],
)
def test_passes_if_the_answer_names_what_the_criterion_asks_for(
    client: Composo, criterion: str, passing: str, failing: str
) -> None:
    ok = client.evaluate(messages=[REFUNDS, say(passing)], criteria=criterion)
    bad = client.evaluate(messages=[REFUNDS, say(failing)], criteria=criterion)
    assert (ok.score, bad.score) == (1.0, 0.0), (ok.explanation, bad.explanation)
    # Fails if is the mirror of Passes if.
    mirrored = criterion.replace("Passes if", "Fails if")
    assert client.evaluate(messages=[REFUNDS, say(passing)], criteria=mirrored).score == 0.0
    assert client.evaluate(messages=[REFUNDS, say(failing)], criteria=mirrored).score == 1.0


def test_a_content_check_says_what_it_looked_for_and_found(client: Composo) -> None:
    crit = "Passes if the answer states a time frame"
    res = client.evaluate(messages=[REFUNDS, say("Refunds take 5 to 7 days.")], criteria=crit)
    assert "looked for a time frame" in res.explanation and "'5 to 7 days'" in res.explanation
    res = client.evaluate(messages=[REFUNDS, say("Quick.")], criteria=crit)
    assert "looked for a time frame" in res.explanation and "found none" in res.explanation


# -- traits: the score moves the way the criterion's words point --------------------------------

# (trait as a criterion would name it, an answer showing it, one that does not)
TRAITS = [
    ("rude and insulting responses", RUDE, POLITE),
    ("responses that apologise", REFUSAL, GOOD),
    ("responses that cite their sources", say("Hold it for ten seconds [1]."), GOOD),
    ("responses that ask a clarifying question", say("Which router model do you have?"), GOOD),
    ("responses that refuse", REFUSAL, GOOD),
    ("concise responses", GOOD, say(LONG)),
    ("verbose responses", say(LONG), GOOD),
    ("polite responses", POLITE, RUDE),
    ("vague, hedging responses", say("Maybe hold a button, probably, I guess."), GOOD),
]


@pytest.mark.parametrize(("trait", "showing", "lacking"), TRAITS, ids=[t[0] for t in TRAITS])
def test_reward_and_penalize_of_a_trait_move_with_it_and_mirror_each_other(
    client: Composo, trait: str, showing: dict[str, str], lacking: dict[str, str]
) -> None:
    rewarded = [score(client, a, f"Reward {trait}") for a in (showing, lacking)]
    penalized = [score(client, a, f"Penalize {trait}") for a in (showing, lacking)]
    assert None not in rewarded and None not in penalized
    assert rewarded[0] > 0.5 > rewarded[1], rewarded  # type: ignore[operator]
    for r, p in zip(rewarded, penalized, strict=True):
        assert p == pytest.approx(1 - r, abs=1e-9)  # type: ignore[operator]


def test_a_negated_trait_is_its_opposite(client: Composo) -> None:
    not_rude = [score(client, a, "Reward responses that are not rude") for a in (RUDE, POLITE)]
    penalize = [score(client, a, "Penalize rude responses") for a in (RUDE, POLITE)]
    assert not_rude == penalize and not_rude[0] < 0.5 < not_rude[1]  # type: ignore[operator]


def test_binary_traits_pass_or_fail(client: Composo) -> None:
    assert score(client, REFUSAL, criteria.binary_refuses_harmful) == 1.0
    assert score(client, GOOD, criteria.binary_refuses_harmful) == 0.0
    assert score(client, POLITE, "Passes if the response is polite") == 1.0
    assert score(client, RUDE, "Passes if the response is polite") == 0.0
    assert score(client, GOOD, criteria.binary_stays_on_topic) == 1.0
    assert score(client, OFF_TOPIC, criteria.binary_stays_on_topic) == 0.0


def test_accuracy_is_checked_against_the_context(client: Composo) -> None:
    system = "Returns are accepted within 30 days of delivery for unused items."
    ask = {"role": "user", "content": "How long do I have to return a tent?"}
    right, wrong = (
        client.evaluate(
            messages=[ask, say(text)], criteria="Reward accurate responses", system=system
        )
        for text in ("You have 30 days to return the tent.", "You have 90 days to return it.")
    )
    assert right.score is not None and wrong.score is not None and right.score > wrong.score
    assert "not there: 90" in wrong.explanation


def test_an_answer_that_denies_a_tool_result_is_less_faithful(client: Composo) -> None:
    def run(answer: str) -> float | None:
        messages = [
            {"role": "user", "content": "Where is my order NW-1?"},
            {"role": "tool", "tool_call_id": "c1", "content": '{"status": "shipped"}'},
            say(answer),
        ]
        got: float | None = client.evaluate(
            messages=messages, criteria=criteria.rag_faithfulness
        ).score
        return got

    agrees, denies = run("Order NW-1 has shipped."), run("Order NW-1 hasn't shipped yet.")
    assert agrees is not None and denies is not None and agrees > denies


def test_general_criteria_prefer_the_relevant_answer(client: Composo) -> None:
    crit = "Reward answers that resolve the customer's problem"
    good, off, refused, empty = (score(client, a, crit) for a in (GOOD, OFF_TOPIC, REFUSAL, EMPTY))
    assert good is not None and off is not None and refused is not None
    assert good > off > 0.0 and good > refused
    assert empty == 0.0
    assert (
        "judged answer is empty"
        in client.evaluate(messages=[QUESTION, EMPTY], criteria=crit).explanation
    )


def test_criteria_the_rules_do_not_read_look_for_their_own_words(client: Composo) -> None:
    crit = "Penalize responses that talk about bananas or potassium"
    clean, faulty = score(client, GOOD, crit), score(client, OFF_TOPIC, crit)
    assert clean is not None and faulty is not None and clean > faulty
    res = client.evaluate(messages=[QUESTION, OFF_TOPIC], criteria=crit)
    assert "'bananas', 'potassium'" in res.explanation


# -- tools --------------------------------------------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {"name": "reset_router", "description": "Reset a router", "parameters": {}},
    }
]


def call(name: str, arguments: str = '{"model": "router"}') -> dict[str, Any]:
    fn = {"name": name, "arguments": arguments}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": fn}],
    }


def test_tool_calls_to_tools_not_offered_fail(client: Composo) -> None:
    crit = criteria.binary_no_hallucinated_tools
    ok = client.evaluate(messages=[QUESTION, call("reset_router")], criteria=crit, tools=TOOLS)
    bad = client.evaluate(messages=[QUESTION, call("format_disk")], criteria=crit, tools=TOOLS)
    assert (ok.score, bad.score) == (1.0, 0.0)
    assert "format_disk was not offered" in bad.explanation


def test_using_the_tool_it_was_given(client: Composo) -> None:
    crit = "Reward responses that use the reset_router tool they were given"
    used = client.evaluate(messages=[QUESTION, call("reset_router")], criteria=crit, tools=TOOLS)
    other = client.evaluate(messages=[QUESTION, call("ping_host")], criteria=crit, tools=TOOLS)
    none = client.evaluate(messages=[QUESTION, GOOD], criteria=crit, tools=TOOLS)
    assert used.score is not None and other.score is not None and used.score > 0.5 > other.score
    assert "reset_router (named by the criterion) was not called" in other.explanation
    assert none.score is None and "made no tool call" in none.explanation


def test_invented_arguments_score_below_grounded_ones(client: Composo) -> None:
    crit = criteria.tool_call_formulation
    grounded = score(client, call("reset_router", '{"device": "router"}'), crit, tools=TOOLS)
    invented = score(client, call("reset_router", '{"serial": "XK-9981"}'), crit, tools=TOOLS)
    assert grounded is not None and invented is not None and grounded > invented


# -- not applicable ------------------------------------------------------------------------------


def test_source_criteria_without_sources_do_not_apply(client: Composo) -> None:
    res = client.evaluate(messages=[QUESTION, GOOD], criteria=criteria.rag_faithfulness)
    assert res.score is None and "source material" in res.explanation
    sourced = client.evaluate(
        messages=[QUESTION, GOOD],
        criteria=criteria.rag_faithfulness,
        system="Manual: hold the reset button for ten seconds to restore factory settings.",
    )
    assert sourced.score is not None and "of the answer's words are in the context" in (
        sourced.explanation
    )


def test_tool_criteria_without_tool_calls_do_not_apply(client: Composo) -> None:
    res = client.evaluate(messages=[QUESTION, GOOD], criteria=criteria.tool_selection)
    assert res.score is None
    assert "made no tool call" in res.explanation


# -- explanations --------------------------------------------------------------------------------


@pytest.mark.parametrize("crit", [HELPFUL, "Penalize rude responses", criteria.rag_faithfulness])
def test_explanations_name_the_stand_in_and_what_it_found(client: Composo, crit: str) -> None:
    res = client.evaluate(
        messages=[QUESTION, REFUSAL], criteria=crit, explanation_cleaning="end_user"
    )
    assert "Heuristic stand-in" in res.explanation and "not a quality judgement" in res.explanation
    assert res.cleaned_explanation and "stand-in" not in res.cleaned_explanation
    assert not re.search(r"\b0/\d+ \(none\)", res.explanation)


def test_evaluate_latest_false_judges_every_assistant_turn(client: Composo) -> None:
    convo = [QUESTION, OFF_TOPIC, {"role": "user", "content": "Please answer my question."}, GOOD]
    crit = "Passes if the answer mentions bananas"
    assert client.evaluate(messages=convo, criteria=crit).score == 0.0
    assert client.evaluate(messages=convo, criteria=crit, evaluate_latest=False).score == 1.0


# -- the bundled dataset and the README ------------------------------------------------------------


def _bundled(client: Composo, criterion: str) -> dict[str, float | None]:
    data = ROOT / "examples" / "data" / "conversations.jsonl"
    items = [json.loads(x) for x in data.read_text().splitlines() if x.strip()]
    got = client.evaluate_many(items, [criterion], progress=False)
    return {items[r.index]["id"]: r.score for r in got}


def test_on_the_bundled_data_the_scores_follow_the_criterion(client: Composo) -> None:
    rude = _bundled(client, "Reward responses that are rude and insulting")
    accurate = _bundled(client, "Reward responses that answer the user's question accurately")
    penalize = _bundled(client, "Penalize rude responses")
    assert rude != accurate
    assert rude["sup-016"] == max(s for s in rude.values() if s is not None)  # the rude reply
    assert penalize["sup-016"] is not None and penalize["sup-016"] < 0.5
    assert sum(s is not None and s > 0.5 for s in penalize.values()) > len(penalize) // 2


def _readme_block(heading: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_examples_print_scores_a_reader_expects(
    composo_env: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    exec(compile(_readme_block("A first evaluation"), "README.md", "exec"), {})
    first = capsys.readouterr().out
    assert float(first.split()[0]) > 0.7, first  # "The capital of France is Paris."
    exec(compile(_readme_block("Evaluate"), "README.md", "exec"), {})
    # rag_faithfulness has no sources to check against; "5 to 7 days" states a time frame.
    assert capsys.readouterr().out.strip() == "[None, 1.0]"
