"""Bridges to other evaluation tools (inspect_ai, through the ``[inspect]`` extra).

Everything here imports its tool lazily: userturn itself never needs it.
"""
