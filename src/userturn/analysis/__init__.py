"""Analysis of a run: cells and intervals, paper-shaped views, tables, plots, run
comparisons, judge agreement and notebook loading.

Nothing is imported here, so ``import userturn.analysis.intervals`` stays light (the
CLI starts fast); heavy libraries (matplotlib, pandas, scipy) load inside the modules
that need them.
"""
