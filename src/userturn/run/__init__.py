"""A run, stage by stage: records (what is stored), the store (all SQL), the worker
(generation), executors (where the worker runs), the judge stage, outputs (run-directory
files) and the driver that ties them together. ``userturn.run.driver.run`` is the entry
point; nothing is imported here so that light modules stay light."""
