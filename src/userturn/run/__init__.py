"""A run, stage by stage: the worker (generation), executors (where the worker runs), the
judge stage, outputs (run-directory files) and the driver that ties them together. What
they store (records, keys, the store, the lock) is ``userturn.rundir``, below them.
``userturn.run.driver.run`` is the entry point; nothing is imported here so that light
modules stay light."""
