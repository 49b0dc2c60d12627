"""Task scorers: pure functions from (final answer text, gold) to a verdict.

Only the final answer is scored; reasoning is split off before (``chat.split_reasoning``).
"""
