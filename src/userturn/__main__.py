"""``python -m userturn``."""

from userturn.cli import entrypoint

entrypoint()
