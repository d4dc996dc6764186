"""A team's streaming job under test: `enrich` (the query) and `oracle` (what its output must be)."""
