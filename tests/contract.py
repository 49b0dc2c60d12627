"""The output contract of a run directory (summary.json, records.jsonl) as key sets.

Written out here, as documented, rather than read from userturn: a test that took the
keys from the code under test could not notice the code dropping one.
"""

CELL_KEYS = {
    "model",
    "dataset",
    "temperature",
    "perturbation",
    "judge",
    "family",
    "n_total",
    "n",
    "genuine",
    "rate",
    "ci_low",
    "ci_high",
    "unparseable",
    "errors",
    "accuracy",
    "answers_truncated",
    "labels",
}
RECORD_KEYS = {
    "id",
    "item_id",
    "model",
    "family",
    "dataset",
    "temperature",
    "sample",
    "seed",
    "perturbation",
    "messages",
    "answer",
    "correct",
    "answer_finish",
    "user_turn",
    "user_finish",
    "prompt_sha",
    "template_sha",
    "reference_turn",
    "judgments",
}
STATS_KEYS = {
    "generated",
    "reused",
    "model_calls",
    "judge_calls",
    "judged",
    "prompt_tokens_evaluated",
    "prompt_tokens_reused",
}
