"""Tables and files above the core: DataFrames in and out, streamed JSONL / CSV / Parquet."""
