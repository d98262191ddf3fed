"""The model description the core computes on (``spec``) and its parameter, FLOP and KV arithmetic."""
