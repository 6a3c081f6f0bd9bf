"""Instance building: from command-line options (`from_options`) and from a model description (the cost model)."""
