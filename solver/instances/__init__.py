"""Instance building: instances from a model description (the cost model)."""
