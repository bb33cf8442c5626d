"""The run-directory room: what a run writes and the only thing reports read (file names, checkpoints
and ``latest``, durable writes, metric records, data fingerprints as plain data, the machine
record, the settings that change nothing learned, YAML reading, output-folder checks)."""
