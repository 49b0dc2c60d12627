"""What a run directory holds, below every stage that reads or writes one: record keys
(content hashes), the typed records, the records.jsonl line codec, the SQLite store, the
one-writer lock and atomic file writes.

Plugins (judges caching by content key), analysis and the run stages all build on this
layer, and it imports none of them. Nothing is imported here so that light modules stay
light."""
