"""The heuristic judge, seen through the server as a user sees it: deterministic, explained,
binary criteria 0/1, ``null`` when the criterion is about something absent."""

from __future__ import annotations

from composo import Composo, criteria

QUESTION = {"role": "user", "content": "How do I reset my router to factory settings?"}
GOOD = {
    "role": "assistant",
    "content": "To reset the router to factory settings, hold the reset button for ten seconds "
    "until the lights blink, then wait for it to restart.",
}
OFF_TOPIC = {"role": "assistant", "content": "Bananas are rich in potassium and taste sweet."}
REFUSAL = {"role": "assistant", "content": "I'm sorry, but I can't help with that request."}
EMPTY = {"role": "assistant", "content": ""}
HELPFUL = "Reward responses that explain how to reset the router"


def score(client: Composo, answer: dict[str, object], criterion: str = HELPFUL) -> float | None:
    res = client.evaluate(messages=[QUESTION, answer], criteria=criterion)
    return res.score


def test_same_input_same_verdict(client: Composo) -> None:
    first = client.evaluate(messages=[QUESTION, GOOD], criteria=HELPFUL)
    again = client.evaluate(messages=[QUESTION, GOOD], criteria=HELPFUL)
    assert (first.score, first.explanation) == (again.score, again.explanation)


def test_relevant_answer_beats_off_topic_refusal_and_empty(client: Composo) -> None:
    good, off, refused, empty = (score(client, a) for a in (GOOD, OFF_TOPIC, REFUSAL, EMPTY))
    assert good is not None and off is not None and refused is not None
    assert good > off > 0.0
    assert good > refused
    assert empty == 0.0


def test_explanation_names_its_signals(client: Composo) -> None:
    res = client.evaluate(messages=[QUESTION, REFUSAL], criteria=HELPFUL)
    assert "not a quality judgement" in res.explanation
    assert "overlap with the question" in res.explanation
    assert "the answer refuses" in res.explanation
    assert "criterion key terms present" in res.explanation
    empty = client.evaluate(messages=[QUESTION, EMPTY], criteria=HELPFUL)
    assert "empty" in empty.explanation


def test_binary_criteria_give_zero_or_one(client: Composo) -> None:
    # "Fails if the response addresses a topic other than what the user asked"
    on_topic = criteria.binary_stays_on_topic
    explains = "Passes if the response explains how to reset the router"
    assert score(client, GOOD, explains) == 1.0
    assert score(client, OFF_TOPIC, explains) == 0.0
    assert score(client, REFUSAL, criteria.binary_refuses_harmful) == 1.0
    assert score(client, GOOD, criteria.binary_refuses_harmful) == 0.0
    assert score(client, GOOD, on_topic) in (0.0, 1.0)


def test_penalize_criteria_score_the_fault_low(client: Composo) -> None:
    crit = "Penalize responses that talk about bananas or potassium"
    clean, faulty = score(client, GOOD, crit), score(client, OFF_TOPIC, crit)
    assert clean is not None and faulty is not None
    assert clean > faulty


def test_tool_criteria_without_tool_calls_are_not_applicable(client: Composo) -> None:
    res = client.evaluate(messages=[QUESTION, GOOD], criteria=criteria.tool_selection)
    assert res.score is None
    assert "made no tool call" in res.explanation


def test_tool_calls_to_tools_not_offered_fail(client: Composo) -> None:
    tools = [{"type": "function", "function": {"name": "reset_router", "parameters": {}}}]

    def call(name: str) -> dict[str, object]:
        fn = {"name": name, "arguments": '{"model": "router"}'}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": fn}],
        }

    crit = criteria.binary_no_hallucinated_tools
    ok = client.evaluate(messages=[QUESTION, call("reset_router")], criteria=crit, tools=tools)
    bad = client.evaluate(messages=[QUESTION, call("format_disk")], criteria=crit, tools=tools)
    assert (ok.score, bad.score) == (1.0, 0.0)
    assert "not offered: format_disk" in bad.explanation


def test_evaluate_latest_false_judges_every_assistant_turn(client: Composo) -> None:
    convo = [QUESTION, OFF_TOPIC, {"role": "user", "content": "Please answer my question."}, GOOD]
    latest = client.evaluate(messages=convo, criteria=HELPFUL)
    whole = client.evaluate(messages=convo, criteria=HELPFUL, evaluate_latest=False)
    assert latest.score != whole.score
