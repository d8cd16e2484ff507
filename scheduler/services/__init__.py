"""Every state transition of the product: one function each, atomic, audited."""
